"""Heads a user brings: queries, keys and values, or one layer's attention logits, from an uploaded file.

    >>> upload = read_upload(data, "layer3.safetensors")   # raises UploadError naming what is wrong
    >>> upload.sha256, upload.q.shape                      # content address; (heads, n, d)

Two formats, arrays only: ``.safetensors`` and ``.npz`` (``numpy.load(..., allow_pickle=False)``). Nothing is
unpickled, evaluated or written to disk; a file is read from its bytes in memory. Every size is checked from the
file's headers (the safetensors JSON header, the zip central directory and each member's ``.npy`` header) before any
array data is read, so a ``10^9``-element shape or a zip bomb is refused without allocating it.

Accepted content (names are case-sensitive):
  * ``q``, ``k``, ``v`` (or ``query``, ``key``, ``value``): each (heads, n, d) or (n, d), the same heads, n and d;
    the projections' outputs as the model computes them, before its 1/sqrt(d) scaling: ``load`` divides q by
    sqrt(d), so temperature 1 is the model's own attention (as for the built-in MiniLM);
  * ``logits`` (or ``scores``): one layer's pre-softmax attention scores, (heads, n, n) or (n, n), already scaled.

Logits alone: every method of the app approximates softmax(Q K^T) from Q and K, so the logits are factored exactly
into Q K^T by a seeded randomised SVD (Q = U sqrt(S), K = V sqrt(S), cut at the numerical rank, which is the
model's head dimension for real logits). Exact attention, its entropy and the oracles (top-k, SVD, robust PCA) then
see the uploaded matrix itself; methods that hash or project Q and K see this factorisation, not the model's own
projections, and the values V are seeded Gaussian draws (there are none in the file). The alternative, refusing
logits or offering only the oracles on them, would leave every page but Compare without the upload.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from core import config, limits
from core.approximation import DENSE_MAX_N
from core.data import MAX_HEADS
from core.errors import ParameterError

FORMATS = ("safetensors", "npz")
# The app's inputs keep one head dimension for q, k and v, drawn by the sidebar up to this (its d slider's top).
MAX_D = 256
MIN_N = 2
MAX_MEMBERS = 8  # arrays in one file: q, k, v or logits, plus a few the user may have left in
SAFETENSORS_HEADER_MAX = 1 << 20  # bytes of the JSON header (a handful of names needs a few hundred)
NAMES = {
    "q": "q",
    "query": "q",
    "k": "k",
    "key": "k",
    "v": "v",
    "value": "v",
    "logits": "logits",
    "scores": "logits",
}
# dtype of a safetensors entry -> bytes per element; BF16 is read through torch (NumPy has no bfloat16).
SAFETENSORS_DTYPES = {"F16": 2, "BF16": 2, "F32": 4, "F64": 8}
NUMPY_FLOAT_SIZES = (2, 4, 8)  # float16, float32, float64
# A singular value above this fraction of the largest counts towards the logits' rank (float32 rounding is ~1e-7).
RANK_TOLERANCE = 1e-5
VALUES_SEED = 0  # the seeded values (and the range finder's sketch) of a logits-only upload
RANGE_OVERSAMPLING = 16
FACTOR_TOLERANCE = 1e-4  # relative Frobenius residual of the factorisation
MIB = 2**20


class UploadError(ParameterError):
    """An uploaded file that is refused; the message names what is wrong and what is allowed."""

    def __init__(self, message: str) -> None:
        super().__init__("upload", message)


@dataclass(frozen=True)
class UploadLimits:
    """The largest upload the app takes: n and heads as the dense views allow, d as the sidebar draws, and bytes."""

    max_n: int = DENSE_MAX_N
    max_heads: int = MAX_HEADS
    max_d: int = MAX_D
    max_bytes: int = 0  # 0: ``upload_limit_bytes()``

    def byte_limit(self) -> int:
        return self.max_bytes or upload_limit_bytes()


def upload_limit_bytes() -> int:
    """``ATTN_EXPLORER_UPLOAD_MB``, and at most an eighth of ``ATTN_EXPLORER_MEMORY_LIMIT``: a file's arrays are held
    decoded, converted to float32 and copied by the pages, so one upload must leave the job room to run."""
    return int(min(float(config.read("upload_mb")) * MIB, limits.memory_limit_bytes() / 8))


def upload_limit_mb() -> int:
    """The uploader's ``max_upload_size`` in whole MB (at least 1)."""
    return max(1, int(upload_limit_bytes() // MIB))


def upload_hours() -> float:
    """``ATTN_EXPLORER_UPLOAD_HOURS``: how long the shared cache keeps an upload."""
    return float(config.read("upload_hours"))


@dataclass
class Upload:
    """A validated upload: q, k, v of shape (heads, n, d) (float16 or float32, as given; bfloat16 and float64 become
    float32), its sha256 and what it held."""

    sha256: str
    kind: str  # "qkv" | "logits"
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def heads(self) -> int:
        return int(self.q.shape[0])

    @property
    def n(self) -> int:
        return int(self.q.shape[1])

    @property
    def d(self) -> int:
        return int(self.q.shape[2])

    def to_value(self) -> dict[str, Any]:
        """Plain data for the shared cache (arrays, strings, numbers: no pickle)."""
        return {"sha256": self.sha256, "kind": self.kind, "q": self.q, "k": self.k, "v": self.v, "meta": self.meta}

    @classmethod
    def from_value(cls, value: Mapping[str, Any]) -> Upload:
        return cls(str(value["sha256"]), str(value["kind"]), value["q"], value["k"], value["v"], dict(value["meta"]))


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def is_sha256(text: Any) -> bool:
    return isinstance(text, str) and len(text) == 64 and all(c in "0123456789abcdef" for c in text)


def file_format(filename: str) -> str:
    """``safetensors`` or ``npz`` from the file's name (nothing else is read)."""
    suffix = str(filename).rsplit(".", 1)[-1].lower() if "." in str(filename) else ""
    if suffix not in FORMATS:
        raise UploadError(f"the file must end in .safetensors or .npz; got {_short(filename)!r}")
    return suffix


def read_upload(data: bytes, filename: str, upload_limits: UploadLimits | None = None) -> Upload:
    """Validate and read an uploaded file's bytes. Raises ``UploadError`` (and nothing else) on a refused file."""
    bounds = upload_limits or UploadLimits()
    try:
        return _read(bytes(data), file_format(filename), bounds)
    except UploadError:
        raise
    except MemoryError:
        raise UploadError("the file's arrays do not fit in this server's memory") from None
    except Exception as exc:  # noqa: BLE001 - a hostile file must never raise anything but a clear refusal
        raise UploadError(f"the file could not be read ({type(exc).__name__}: {_short(str(exc))})") from None


def load(value: Mapping[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """q, k, v as float32 (heads, n, d) from a stored upload, q scaled by 1/sqrt(d) for q and k uploads (temperature
    1 is then the model's own attention); a logits upload's factors already multiply to the logits."""
    upload = Upload.from_value(value)
    q, k, v = (np.asarray(a, dtype=np.float32) for a in (upload.q, upload.k, upload.v))
    if upload.kind == "qkv":
        q = q / np.float32(math.sqrt(upload.d))
    return q, k, v


# ------------------------------------------------------------------ reading


@dataclass(frozen=True)
class _Entry:
    role: str  # q | k | v | logits
    name: str  # as in the file
    shape: tuple[int, ...]
    itemsize: int


def _read(data: bytes, fmt: str, bounds: UploadLimits) -> Upload:
    limit = bounds.byte_limit()
    if len(data) > limit:
        raise UploadError(f"the file has {_mb(len(data))}; uploads are limited to {_mb(limit)} ({_UPLOAD_MB})")
    digest = sha256(data)
    arrays = _read_safetensors(data, bounds) if fmt == "safetensors" else _read_npz(data, bounds)
    for role, array in arrays.items():
        _check_finite(role, array)
    meta: dict[str, Any] = {
        "format": fmt,
        "dtype": str(next(iter(arrays.values())).dtype),
        "names": sorted(arrays),
    }
    if "logits" in arrays:
        logits = _with_heads(arrays["logits"]).astype(np.float64)
        q, k, rank = _factor(logits, bounds)
        v = np.random.default_rng(VALUES_SEED).standard_normal(q.shape).astype(np.float32)
        meta["rank"] = rank
        return Upload(digest, "logits", q, k, v, meta)
    q, k, v = (_stored(_with_heads(arrays[role])) for role in ("q", "k", "v"))
    return Upload(digest, "qkv", q, k, v, meta)


def _read_safetensors(data: bytes, bounds: UploadLimits) -> dict[str, np.ndarray]:
    if len(data) < 8:
        raise UploadError("the .safetensors file is truncated: it has no header")
    header_bytes = int.from_bytes(data[:8], "little")
    if header_bytes > SAFETENSORS_HEADER_MAX:
        raise UploadError(f"the .safetensors header claims {header_bytes} bytes; a valid one here is under 1 MiB")
    if 8 + header_bytes > len(data):
        raise UploadError("the .safetensors file is truncated: its header runs past the end of the file")
    try:
        header = json.loads(data[8 : 8 + header_bytes].decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise UploadError("the .safetensors header is not valid JSON (a corrupt or truncated file)") from None
    if not isinstance(header, dict):
        raise UploadError("the .safetensors header is not a JSON object (a corrupt file)")
    header.pop("__metadata__", None)
    _check_member_count(len(header))
    payload = len(data) - 8 - header_bytes
    entries = []
    has_bf16 = False
    for name, info in header.items():
        role = _role(name)
        if not isinstance(info, dict) or not isinstance(info.get("shape"), list):
            raise UploadError(f"the .safetensors entry {_short(name)!r} has no shape (a corrupt file)")
        dtype = info.get("dtype")
        if dtype not in SAFETENSORS_DTYPES:
            raise UploadError(
                f"{role} has dtype {_short(str(dtype))}; allowed are float16, bfloat16, float32 and float64"
            )
        has_bf16 = has_bf16 or dtype == "BF16"
        shape = _shape(role, info["shape"])
        offsets = info.get("data_offsets")
        itemsize = SAFETENSORS_DTYPES[dtype]
        if (
            not isinstance(offsets, list)
            or len(offsets) != 2
            or not all(isinstance(x, int) and not isinstance(x, bool) for x in offsets)
            or not 0 <= offsets[0] <= offsets[1]
        ):
            raise UploadError(f"the .safetensors entry {role} has bad data offsets (a corrupt file)")
        entries.append(_Entry(role, name, shape, itemsize))
        _check_entries(entries, bounds)  # sizes first: a huge shape is refused before its byte count is compared
        if offsets[1] - offsets[0] != math.prod(shape) * itemsize:
            raise UploadError(f"the .safetensors entry {role} has {offsets[1] - offsets[0]} bytes for shape {shape}")
        if offsets[1] > payload:
            raise UploadError(f"the .safetensors file is truncated: {role}'s data runs past the end of the file")
    _check_content(entries)
    if has_bf16:
        import safetensors.torch

        tensors = safetensors.torch.load(data)
        loaded = {name: tensor.float().numpy() for name, tensor in tensors.items()}
    else:
        import safetensors.numpy

        loaded = safetensors.numpy.load(data)
    return {entry.role: np.asarray(loaded[entry.name]) for entry in entries}


def _read_npz(data: bytes, bounds: UploadLimits) -> dict[str, np.ndarray]:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        raise UploadError(
            "the .npz file is not a readable zip archive of .npy arrays (a corrupt or truncated file)"
        ) from None
    with archive:
        members = archive.infolist()
        _check_member_count(len(members))
        unpacked = sum(member.file_size for member in members)
        if unpacked > bounds.byte_limit() + 4096 * len(members):
            raise UploadError(
                f"the .npz archive would unpack to {_mb(unpacked)}; uploads are limited to {_mb(bounds.byte_limit())} "
                f"({_UPLOAD_MB})"
            )
        entries = []
        for member in members:
            if not member.filename.endswith(".npy"):
                raise UploadError(f"the .npz archive holds {_short(member.filename)!r}, which is not a .npy array")
            role = _role(member.filename[: -len(".npy")])
            if member.flag_bits & 0x1:
                raise UploadError(f"{role} is encrypted in the archive")
            with archive.open(member) as stream:
                version = np.lib.format.read_magic(stream)
                if version == (1, 0):
                    shape, _, dtype = np.lib.format.read_array_header_1_0(stream)
                elif version == (2, 0):
                    shape, _, dtype = np.lib.format.read_array_header_2_0(stream)
                else:
                    raise UploadError(f"{role} is a .npy of format version {version}; versions 1.0 and 2.0 are read")
            if dtype.hasobject:
                raise UploadError(f"{role} is an object array (pickled Python objects); only float arrays are read")
            if dtype.kind != "f" or dtype.itemsize not in NUMPY_FLOAT_SIZES:
                raise UploadError(f"{role} has dtype {dtype}; allowed are float16, float32 and float64")
            entries.append(_Entry(role, member.filename[: -len(".npy")], _shape(role, list(shape)), dtype.itemsize))
            _check_entries(entries, bounds)
        _check_content(entries)
    with np.load(io.BytesIO(data), allow_pickle=False) as npz:
        return {entry.role: np.asarray(npz[entry.name]) for entry in entries}


# ------------------------------------------------------------------ checks


def _role(name: Any) -> str:
    role = NAMES.get(str(name))
    if role is None:
        allowed = ", ".join(NAMES)
        raise UploadError(f"the file holds an array named {_short(str(name))!r}; allowed names are {allowed}")
    return role


def _check_member_count(count: int) -> None:
    if count == 0:
        raise UploadError("the file holds no arrays; it needs q, k and v (or logits)")
    if count > MAX_MEMBERS:
        raise UploadError(f"the file holds {count} arrays; at most {MAX_MEMBERS} are read (q, k and v, or logits)")


def _shape(role: str, shape: list[Any]) -> tuple[int, ...]:
    if not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in shape):
        raise UploadError(f"{role} has a malformed shape {_short(str(shape))}")
    if len(shape) not in (2, 3):
        allowed = "(heads, n, n) or (n, n)" if role == "logits" else "(heads, n, d) or (n, d)"
        raise UploadError(f"{role} has shape {tuple(shape)} (rank {len(shape)}); allowed are {allowed}")
    if 0 in shape:
        raise UploadError(f"{role} has shape {tuple(shape)}, with no entries along one axis")
    return tuple(shape)


def _dims(entry: _Entry) -> tuple[int, int, int]:
    """(heads, n, last) of an entry."""
    heads = entry.shape[0] if len(entry.shape) == 3 else 1
    return heads, entry.shape[-2], entry.shape[-1]


def _check_entries(entries: list[_Entry], bounds: UploadLimits) -> None:
    """Sizes against the app's limits, from the headers alone (no array data has been read)."""
    entry = entries[-1]
    heads, n, last = _dims(entry)
    if n < MIN_N or n > bounds.max_n:
        raise UploadError(
            f"n = {n} ({entry.role}'s rows) is outside what the app draws: n must be from {MIN_N} to {bounds.max_n} "
            f"(the dense n x n views); the largest n that fits is {bounds.max_n}"
        )
    if heads > bounds.max_heads:
        raise UploadError(
            f"heads = {heads} ({entry.role}) is above the limit; the largest heads that fits is {bounds.max_heads}"
        )
    if entry.role == "logits":
        if last != n:
            raise UploadError(f"logits has shape {entry.shape}; its last two axes must be equal (n, n)")
    elif last > bounds.max_d:
        raise UploadError(
            f"d = {last} ({entry.role}'s last axis) is above the limit; the largest d that fits is {bounds.max_d}"
        )
    declared = sum(math.prod(e.shape) * e.itemsize for e in entries)
    if declared > bounds.byte_limit():
        raise UploadError(
            f"the arrays hold {_mb(declared)}; uploads are limited to {_mb(bounds.byte_limit())} ({_UPLOAD_MB})"
        )


def _check_content(entries: list[_Entry]) -> None:
    """q, k and v, or logits alone; matching heads and n, and one d."""
    roles = [e.role for e in entries]
    repeated = sorted({r for r in roles if roles.count(r) > 1})
    if repeated:
        names = ", ".join(e.name for e in entries if e.role in repeated)
        raise UploadError(f"the file names the same array twice ({_short(names)}); give each of q, k, v once")
    found = set(roles)
    if "logits" in found:
        if found != {"logits"}:
            raise UploadError("the file holds logits and q, k or v; upload either q, k and v, or logits alone")
        return
    missing = [r for r in ("q", "k", "v") if r not in found]
    if missing:
        raise UploadError(f"the file holds {', '.join(sorted(found))} but no {', '.join(missing)}; it needs q, k and v")
    by_role = {e.role: e for e in entries}
    q_heads, q_n, q_d = _dims(by_role["q"])
    for role in ("k", "v"):
        heads, n, d = _dims(by_role[role])
        if (heads, n) != (q_heads, q_n):
            raise UploadError(
                f"mismatched shapes: q is {by_role['q'].shape} and {role} is {by_role[role].shape}; they need the "
                "same heads and n (for grouped-query attention, repeat k and v per query head first)"
            )
        if d != q_d:
            raise UploadError(
                f"mismatched shapes: q is {by_role['q'].shape} and {role} is {by_role[role].shape}; q, k and v "
                "need the same head dimension d"
            )


def _check_finite(role: str, array: np.ndarray) -> None:
    bad = ~np.isfinite(array)
    if bad.any():
        nans = int(np.isnan(array).sum())
        infinite = int(bad.sum()) - nans
        hint = " (for masked logits, upload the scores before the mask)" if role == "logits" and infinite else ""
        raise UploadError(f"{role} has {nans} NaN and {infinite} infinite entries; every entry must be finite{hint}")


def _with_heads(array: np.ndarray) -> np.ndarray:
    return array[None] if array.ndim == 2 else array


def _stored(array: np.ndarray) -> np.ndarray:
    """float16 as given (exact and half the bytes); everything else as float32, refusing values float32 cannot hold."""
    if array.dtype == np.float16:
        return np.ascontiguousarray(array)
    if array.dtype == np.float64 and np.abs(array).max() > np.finfo(np.float32).max:
        raise UploadError("an array has values beyond float32's range (3.4e38); the app computes in float32")
    return np.ascontiguousarray(array, dtype=np.float32)


def _factor(logits: np.ndarray, bounds: UploadLimits) -> tuple[np.ndarray, np.ndarray, int]:
    """Q, K (heads, n, rank) with Q K^T = logits up to float32 rounding, cut at the numerical rank.

    A seeded randomised range finder (Halko, Martinsson & Tropp) of width max_d + 16: exact for a matrix of rank at
    most max_d (real logits have the head dimension's rank), and O(n^2 max_d) instead of a full SVD's O(n^3)."""
    if np.abs(logits).max() > np.finfo(np.float32).max:
        raise UploadError("logits has values beyond float32's range (3.4e38); the app computes in float32")
    n = logits.shape[-1]
    width = min(n, bounds.max_d + RANGE_OVERSAMPLING)
    sketch = np.random.default_rng(VALUES_SEED).standard_normal((n, width))
    basis, _ = np.linalg.qr(logits @ sketch)  # (heads, n, width)
    u, s, vt = np.linalg.svd(basis.transpose(0, 2, 1) @ logits, full_matrices=False)
    floor = RANK_TOLERANCE * np.maximum(s[:, :1], np.finfo(np.float64).tiny)
    rank = int(max(1, (s > floor).sum(axis=-1).max()))
    too_high = UploadError(
        f"logits has rank above {bounds.max_d}: factored as q k^T it would need d > {bounds.max_d}, the largest d "
        "that fits; upload q, k and v instead"
    )
    if rank > bounds.max_d:
        raise too_high
    root = np.sqrt(s[:, :rank])[:, None, :]
    q = (basis @ u[:, :, :rank]) * root
    k = vt[:, :rank, :].transpose(0, 2, 1) * root
    residual = np.linalg.norm(logits - q @ k.transpose(0, 2, 1), axis=(1, 2))
    if (residual > FACTOR_TOLERANCE * np.maximum(np.linalg.norm(logits, axis=(1, 2)), 1e-300)).any():
        raise too_high
    return q.astype(np.float32), k.astype(np.float32), rank


_UPLOAD_MB = config.variable("upload_mb")


def _mb(nbytes: float) -> str:
    return f"{nbytes / MIB:.1f} MB ({int(nbytes):,} bytes)"


def _short(text: str, limit: int = 60) -> str:
    text = "".join(ch if ch.isprintable() else "?" for ch in str(text))
    return text if len(text) <= limit else text[:limit] + "…"
