"""Uploaded heads in the shared result cache: stored under their sha256 with an expiry, loaded by ``InputSpec``.

An upload lives in the same cache as the results (the on-disk folder or Redis), so a link
``?input=upload&upload=<sha256>`` reproduces the view on every replica that shares the cache, until
``ATTN_EXPLORER_UPLOAD_HOURS`` have passed since the upload. Its key does not carry the engine version: a new release
still finds the uploads of the last one. Values are the cache's own format (an ``np.savez`` archive of arrays and
JSON), never pickle; nothing else touches the disk. This module imports no Streamlit.
"""

from __future__ import annotations

from typing import Any

from core import uploads
from core.errors import ParameterError
from service import compute, result_cache

KEY_PREFIX = "upload-v1:"  # + sha256; v1: the stored layout of core.uploads.Upload.to_value
SUMMARY_PREFIX = "upload-v1-summary:"  # + sha256: kind, heads, n, d (the sidebar reads it on every run)


class UploadMissing(ParameterError):
    """The link's upload is not in the shared cache (expired, evicted, or never uploaded here)."""

    def __init__(self, sha256: str) -> None:
        hours = uploads.upload_hours()
        super().__init__(
            "upload",
            f"this upload has expired (uploads are kept {hours:g} hours) or was never stored on this server "
            f"({sha256[:12]}…); upload the file again",
        )


def cache_key(sha256: str, prefix: str = KEY_PREFIX) -> str:
    if not uploads.is_sha256(sha256):
        raise ParameterError("upload", "must be a sha256: 64 lowercase hexadecimal digits")
    return prefix + sha256


def summary(upload: uploads.Upload) -> dict[str, Any]:
    return {"kind": upload.kind, "heads": upload.heads, "n": upload.n, "d": upload.d, **upload.meta}


def store(upload: uploads.Upload) -> bool:
    """Keep ``upload`` in the shared cache for ``ATTN_EXPLORER_UPLOAD_HOURS``; False when the cache refused it (larger
    than its bound, or its Redis server does not answer)."""
    expire = uploads.upload_hours() * 3600
    stored = result_cache.put_key(cache_key(upload.sha256), upload.to_value(), expire=expire)
    stored = stored and result_cache.put_key(cache_key(upload.sha256, SUMMARY_PREFIX), summary(upload), expire=expire)
    if result_cache.redis_store() is None:
        # diskcache leaves expired entries on disk until evicted: drop them now, so no upload outlives its hours.
        result_cache.get_cache().expire(retry=True)
    return stored


def exists(sha256: str) -> bool:
    """Whether the link's upload is still in the cache (an index lookup; nothing is read)."""
    return uploads.is_sha256(sha256) and result_cache.contains_key(cache_key(sha256))


def fetch(sha256: str) -> dict[str, Any]:
    """The stored upload (``core.uploads.Upload.to_value``). Raises ``UploadMissing`` once it has expired."""
    value = result_cache.get_key(cache_key(sha256))
    if not isinstance(value, dict):
        raise UploadMissing(sha256)
    return value


def describe(sha256: str) -> dict[str, Any]:
    """What the upload holds (``summary``: kind, heads, n, d, format, dtype, names, rank of logits), read from its
    small summary entry. Raises ``UploadMissing`` once the upload has expired."""
    value = result_cache.get_key(cache_key(sha256, SUMMARY_PREFIX)) if exists(sha256) else None
    if not isinstance(value, dict):
        raise UploadMissing(sha256)
    return value


def input_arrays(sha256: str, heads: int) -> Any:
    """The first ``heads`` heads as the pages' ``InputArrays`` (float32; no labels, tokens or model attention)."""
    q, k, v = uploads.load(fetch(sha256))
    if not 1 <= heads <= q.shape[0]:
        raise ParameterError("heads", f"must be from 1 to {q.shape[0]} for this upload, got {heads}")
    return compute.InputArrays(q[:heads].copy(), k[:heads].copy(), v[:heads].copy(), None, None, None)
