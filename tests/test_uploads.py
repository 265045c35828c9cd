"""Uploaded heads (core/uploads.py, service/uploads.py): hostile and malformed files get a clear message and nothing
else (no other exception, no file written), good files round-trip, uploads are addressed by their sha256 and expire."""

from __future__ import annotations

import hashlib
import io
import json
import os
import struct
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.numpy import save
from safetensors.torch import save as save_torch

from core import uploads
from core.uploads import UploadError, read_upload
from service import result_cache
from service import uploads as stored
from service.views import InputSpec

RNG = np.random.default_rng(0)
HEADS, N, D = 2, 32, 8


def qkv(heads: int = HEADS, n: int = N, d: int = D, dtype: type = np.float32) -> dict[str, np.ndarray]:
    return {name: RNG.standard_normal((heads, n, d)).astype(dtype) for name in ("q", "k", "v")}


def npz(compressed: bool = False, **arrays: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buffer, **arrays)
    return buffer.getvalue()


def safetensors_header_only(entries: dict[str, dict[str, object]], payload: int = 16) -> bytes:
    """A .safetensors file whose header claims ``entries`` over ``payload`` bytes of data (none of it real)."""
    header = json.dumps(entries).encode()
    return struct.pack("<Q", len(header)) + header + bytes(payload)


def npy_header_only(shape: tuple[int, ...], dtype: str = "<f4") -> bytes:
    """A .npy member that claims ``shape`` and holds 64 bytes of data."""
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"descr": dtype, "fortran_order": False, "shape": shape})
    return buffer.getvalue() + bytes(64)


def zipped(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def object_array_npz() -> bytes:
    buffer = io.BytesIO()
    arrays = qkv()
    arrays["q"] = np.array([{"a": 1}, [1, 2]], dtype=object)  # np.save pickles it
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def with_nan() -> bytes:
    arrays = qkv()
    arrays["k"][0, 3, 1] = np.nan
    arrays["k"][1, 0, 0] = np.inf
    return save(arrays)


def huge_shape_safetensors() -> bytes:
    # 10^9 elements per array, claimed by the header over 16 bytes.
    entry = {"dtype": "F32", "shape": [64, 15625, 1000], "data_offsets": [0, 4 * 10**9]}
    return safetensors_header_only({"q": entry, "k": entry, "v": entry})


def too_many_bytes_npz() -> bytes:
    # Every size within its own limit, together far above the byte bound.
    return zipped({f"{name}.npy": npy_header_only((64, 4096, 256)) for name in ("q", "k", "v")})


def zip_bomb(limit_bytes: int) -> bytes:
    """A deflated member whose central directory says it unpacks to twice the upload limit."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        with archive.open("q.npy", "w", force_zip64=True) as member:
            member.write(npy_header_only((1, 16, 16)))
            chunk = bytes(1 << 20)
            for _ in range(2 * limit_bytes // len(chunk) + 1):
                member.write(chunk)
    return buffer.getvalue()


# (file name, bytes, words the message must contain)
BAD_FILES: dict[str, tuple[str, Callable[[], bytes], tuple[str, ...]]] = {
    "pickled object array": ("a.npz", object_array_npz, ("q", "object array")),
    "NaN and inf": ("a.safetensors", with_nan, ("k has 1 NaN and 1 infinite",)),
    "inf in masked logits": (
        "a.safetensors",
        lambda: save({"logits": np.triu(np.full((N, N), -np.inf, np.float32), 1)}),
        ("logits has 0 NaN and 496 infinite", "before the mask"),
    ),
    "10^9-element shape": ("a.safetensors", huge_shape_safetensors, ("n = 15625", "largest n that fits is 4096")),
    "too many bytes in total": ("a.npz", too_many_bytes_npz, ("ATTN_EXPLORER_UPLOAD_MB",)),
    "d above the limit": ("a.npz", lambda: npz(**qkv(d=300)), ("d = 300", "largest d that fits is 256")),
    "n above the limit": (
        "a.safetensors",
        lambda: safetensors_header_only({"q": {"dtype": "F16", "shape": [5000, 4], "data_offsets": [0, 40000]}}),
        ("n = 5000", "the largest n that fits is 4096"),
    ),
    "heads above the limit": (
        "a.npz",
        lambda: zipped({"q.npy": npy_header_only((65, 16, 4))}),
        ("heads = 65", "largest heads that fits is 64"),
    ),
    "truncated npz": ("a.npz", lambda: npz(**qkv())[:-100], ("not a readable zip",)),
    "truncated npz member": (
        "a.npz",
        lambda: zipped({"q.npy": npy_header_only((1, 16, 64)), "k.npy": b"", "v.npy": b""}),
        ("could not be read",),
    ),
    "truncated safetensors": ("a.safetensors", lambda: save(qkv())[:-10], ("truncated", "v")),
    "safetensors without a header": ("a.safetensors", lambda: b"\x01\x02", ("truncated",)),
    "safetensors header past the end": ("a.safetensors", lambda: struct.pack("<Q", 500) + b"{}", ("truncated",)),
    "safetensors header of a gigabyte": ("a.safetensors", lambda: struct.pack("<Q", 2**30) + b"{}", ("header",)),
    "safetensors header not JSON": ("a.safetensors", lambda: struct.pack("<Q", 4) + b"\xff{x]", ("not valid JSON",)),
    "empty file": ("a.npz", lambda: b"", ("not a readable zip",)),
    "not a zip": ("a.npz", lambda: b"PK\x03\x04 certainly not a zip" * 10, ("not a readable zip",)),
    "a .pt file": ("weights.pt", lambda: b"\x80\x04", (".safetensors or .npz",)),
    "a pickle named .npz": ("a.npz", lambda: b"\x80\x04\x95" + bytes(40), ("not a readable zip",)),
    "unknown name": ("a.npz", lambda: npz(**qkv(), extra=np.zeros((2, 2))), ("'extra'", "allowed names")),
    "too many members": (
        "a.npz",
        lambda: npz(
            **qkv(),
            **{name: np.zeros((N, D), np.float32) for name in ("query", "key", "value")},
            logits=np.zeros((N, N), np.float32),
            scores=np.zeros((N, N), np.float32),
            x=np.zeros(1),
        ),
        ("holds 9 arrays", "at most 8"),
    ),
    "missing v": ("a.npz", lambda: npz(q=qkv()["q"], k=qkv()["k"]), ("no v",)),
    "q twice": ("a.npz", lambda: npz(**qkv(), query=qkv()["q"]), ("same array twice",)),
    "logits and q": ("a.npz", lambda: npz(**qkv(), logits=np.zeros((N, N), np.float32)), ("either",)),
    "wrong rank": ("a.npz", lambda: npz(**{**qkv(), "q": np.zeros((1, 2, N, D), np.float32)}), ("rank 4",)),
    "a vector": ("a.safetensors", lambda: save({**qkv(), "v": np.zeros(N, np.float32)}), ("rank 1",)),
    "mismatched n": ("a.npz", lambda: npz(**{**qkv(), "v": qkv(n=N + 1)["v"]}), ("mismatched", "same heads and n")),
    "mismatched d": ("a.npz", lambda: npz(**{**qkv(), "k": qkv(d=D + 1)["k"]}), ("mismatched", "head dimension")),
    "non-square logits": ("a.npz", lambda: npz(logits=np.zeros((N, N + 1), np.float32)), ("(n, n)",)),
    "integer dtype": ("a.npz", lambda: npz(**{**qkv(), "q": np.zeros((HEADS, N, D), np.int32)}), ("int32",)),
    "complex dtype": ("a.npz", lambda: npz(**{**qkv(), "q": np.zeros((HEADS, N, D), np.complex64)}), ("complex64",)),
    "integer safetensors": ("a.safetensors", lambda: save({**qkv(), "v": np.zeros((HEADS, N, D), np.int64)}), ("I64",)),
    "beyond float32": ("a.npz", lambda: npz(**{**qkv(), "q": np.full((HEADS, N, D), 1e300)}), ("float32's range",)),
    "an empty axis": ("a.npz", lambda: npz(**qkv(n=0)), ("no entries",)),
    "logits of full rank": (
        "a.safetensors",
        lambda: save({"logits": RNG.standard_normal((300, 300)).astype(np.float32)}),
        ("rank above 256", "upload q, k and v instead"),
    ),
}


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    where = tmp_path / "cache"
    monkeypatch.setenv("ATTN_EXPLORER_CACHE_DIR", str(where))
    monkeypatch.delenv("ATTN_EXPLORER_CACHE_BYTES", raising=False)
    monkeypatch.delenv("ATTN_EXPLORER_UPLOAD_HOURS", raising=False)
    yield where


@pytest.fixture
def nothing_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The test runs in an empty working directory with an empty temporary directory; both must stay empty."""
    work, scratch = tmp_path / "cwd", tmp_path / "tmp"
    work.mkdir()
    scratch.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    for variable in ("TMPDIR", "TEMP", "TMP"):
        monkeypatch.setenv(variable, str(scratch))
    yield
    assert not os.listdir(work) and not os.listdir(scratch), "reading an upload wrote a file"


@pytest.mark.parametrize("kind", list(BAD_FILES))
def test_a_bad_file_gets_a_clear_message_and_nothing_else(
    kind: str, nothing_written: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    filename, make, words = BAD_FILES[kind]
    with pytest.raises(UploadError) as refused:  # any other exception fails the test
        read_upload(make(), filename)
    message = str(refused.value)
    assert message.startswith("upload: ")
    for word in words:
        assert word in message, (kind, message)
    assert "Traceback" not in message and len(message) < 400


def test_a_zip_bomb_is_refused_from_the_central_directory(
    nothing_written: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ATTN_EXPLORER_UPLOAD_MB", "1")
    bomb = zip_bomb(uploads.upload_limit_bytes())
    assert len(bomb) < uploads.upload_limit_bytes() // 50  # a few KB that would unpack to 3 MB
    with pytest.raises(UploadError, match=r"would unpack to 3\.0 MB.*limited to 1\.0 MB.*ATTN_EXPLORER_UPLOAD_MB"):
        read_upload(bomb, "bomb.npz")


def test_a_file_over_the_byte_limit_names_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTN_EXPLORER_UPLOAD_MB", "0.01")
    with pytest.raises(UploadError, match="limited to 0.0 MB .10,485 bytes. .ATTN_EXPLORER_UPLOAD_MB"):
        read_upload(save(qkv(n=128)), "a.safetensors")
    monkeypatch.setenv("ATTN_EXPLORER_MEMORY_LIMIT", str(8 * 2**20))  # an eighth of the job's memory: 1 MiB
    monkeypatch.setenv("ATTN_EXPLORER_UPLOAD_MB", "64")
    assert uploads.upload_limit_bytes() == 2**20 and uploads.upload_limit_mb() == 1


def test_damaged_files_never_raise_anything_but_a_refusal(nothing_written: None) -> None:
    """Seeded byte flips and cuts anywhere in valid files: each is read or refused with UploadError."""
    rng = np.random.default_rng(1)
    sources = {"a.safetensors": save(qkv(n=8)), "a.npz": npz(**qkv(n=8)), "b.npz": npz(True, **qkv(n=8))}
    outcomes = {"read": 0, "refused": 0}
    for name, good in sources.items():
        for _ in range(60):
            data = bytearray(good)
            if rng.random() < 0.3:
                data = data[: int(rng.integers(0, len(data)))]
            else:
                for at in rng.integers(0, len(data), size=int(rng.integers(1, 4))):
                    data[at] = int(rng.integers(0, 256))
            try:
                read_upload(bytes(data), name)
                outcomes["read"] += 1
            except UploadError:
                outcomes["refused"] += 1
    assert outcomes["refused"] > 50 and outcomes["read"] > 5, outcomes


@pytest.mark.parametrize(
    ("name", "make", "dtype"),
    [
        ("f32.safetensors", lambda a: save(a), np.float32),
        ("f16.safetensors", lambda a: save({k: v.astype(np.float16) for k, v in a.items()}), np.float16),
        ("f64.npz", lambda a: npz(**{k: v.astype(np.float64) for k, v in a.items()}), np.float32),
        ("aliases.npz", lambda a: npz(True, query=a["q"], key=a["k"], value=a["v"]), np.float32),
        ("one_head.npz", lambda a: npz(**{k: v[0] for k, v in a.items()}), np.float32),
    ],
)
def test_good_files_round_trip(name: str, make: Callable, dtype: type, nothing_written: None) -> None:
    arrays = qkv()
    data = make(arrays)
    upload = read_upload(data, name)
    assert upload.kind == "qkv" and upload.sha256 == hashlib.sha256(data).hexdigest()
    heads = 1 if name.startswith("one_head") else HEADS
    assert (upload.heads, upload.n, upload.d) == (heads, N, D)
    for role in ("q", "k", "v"):
        got = getattr(upload, role)
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, arrays[role][:heads].astype(dtype))


def test_bfloat16_safetensors_are_read_exactly(nothing_written: None) -> None:
    tensors = {name: torch.from_numpy(a).to(torch.bfloat16) for name, a in qkv().items()}
    upload = read_upload(save_torch(tensors), "bf16.safetensors")
    assert upload.q.dtype == np.float32
    np.testing.assert_array_equal(upload.v, tensors["v"].float().numpy())


def test_logits_are_factored_exactly_and_values_are_seeded(nothing_written: None) -> None:
    q, k = qkv()["q"], qkv()["k"]
    logits = np.einsum("hnd,hmd->hnm", q, k) / np.sqrt(D)
    upload = read_upload(save({"scores": logits}), "layer.safetensors")
    assert upload.kind == "logits" and upload.meta["rank"] == D and upload.q.shape == (HEADS, N, D)
    got_q, got_k, got_v = uploads.load(upload.to_value())
    np.testing.assert_allclose(np.einsum("hnd,hmd->hnm", got_q, got_k), logits, atol=1e-5)
    again = read_upload(save({"scores": logits}), "layer.safetensors")
    np.testing.assert_array_equal(again.v, upload.v)


def test_q_is_scaled_so_temperature_one_is_the_models_attention() -> None:
    arrays = qkv()
    q, k, v = uploads.load(read_upload(save(arrays), "a.safetensors").to_value())
    np.testing.assert_allclose(q, arrays["q"] / np.sqrt(D), rtol=1e-6)
    np.testing.assert_array_equal(k, arrays["k"])


def test_an_upload_is_stored_under_its_sha256_and_loads_as_the_input(cache_dir: Path) -> None:
    arrays = qkv()
    data = save(arrays)
    upload = read_upload(data, "a.safetensors")
    assert stored.store(upload)
    sha = hashlib.sha256(data).hexdigest()
    assert stored.exists(sha) and stored.describe(sha)["heads"] == HEADS
    assert not stored.exists(hashlib.sha256(data + b" ").hexdigest())
    assert not stored.exists("../../etc/passwd") and not stored.exists("")
    with pytest.raises(ValueError, match="sha256"):
        stored.cache_key("../x")
    spec = InputSpec("upload", N, D, 1, 0, 0.0, 0, upload=sha)
    inputs = spec.compute()
    np.testing.assert_allclose(inputs.q, arrays["q"][:1] / np.sqrt(D), rtol=1e-6)
    assert inputs.tokens is None and inputs.labels is None
    # The upload is the input: its arrays are not stored a second time under the "inputs" view.
    assert not spec.shared()
    assert not result_cache.contains(spec.cache_name, spec.key())
    # Only the cache's own bytes: an npz archive, never a pickle.
    raw = result_cache.get_cache().get(stored.cache_key(sha), read=True)
    head = raw.read(2) if hasattr(raw, "read") else raw[:2]
    assert head == b"PK"


def test_an_upload_expires(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTN_EXPLORER_UPLOAD_HOURS", str(1.0 / 3600))  # one second
    upload = read_upload(save(qkv()), "a.safetensors")
    assert stored.store(upload) and stored.exists(upload.sha256)
    time.sleep(1.3)
    assert not stored.exists(upload.sha256)
    with pytest.raises(stored.UploadMissing, match=r"has expired \(uploads are kept 0.000277778 hours\).*again"):
        stored.describe(upload.sha256)
    with pytest.raises(stored.UploadMissing, match="upload the file again"):
        InputSpec("upload", N, D, HEADS, 0, 0.0, 0, upload=upload.sha256).compute()
    # Expired entries leave the disk at the next upload, not only when evicted.
    other = read_upload(save(qkv()), "b.safetensors")
    stored.store(other)
    keys = list(result_cache.get_cache().iterkeys())
    assert not any(upload.sha256 in str(key) for key in keys)


def test_an_upload_expires_in_redis(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from redis_server import RedisServer

    server = RedisServer().start()
    try:
        monkeypatch.setenv("ATTN_EXPLORER_CACHE_URL", server.url)
        monkeypatch.setenv("ATTN_EXPLORER_UPLOAD_HOURS", "2")
        upload = read_upload(save(qkv()), "a.safetensors")
        assert stored.store(upload)
        ttl = server.client().ttl(result_cache.REDIS_RESULTS + stored.cache_key(upload.sha256))
        assert 7190 <= ttl <= 7200
        assert stored.exists(upload.sha256)
        np.testing.assert_array_equal(stored.fetch(upload.sha256)["v"], upload.v)
    finally:
        server.stop()


def test_the_readme_snippet_exports_heads_the_uploader_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's export snippet, run on the embedded MiniLM (a BERT-style model) instead of a download: its file is
    accepted, and at τ = 1 the upload's attention is the model's own."""
    import core.data

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    block = readme.split("**Your own heads.**", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    assert '"bert-base-uncased"' in block
    monkeypatch.chdir(tmp_path)
    exec(block.replace('"bert-base-uncased"', repr(str(core.data.default_model_path()))), {})  # noqa: S102
    upload = read_upload((tmp_path / "heads.safetensors").read_bytes(), "heads.safetensors")
    q, k, _ = uploads.load(upload.to_value())
    model = core.data.real("Attention is all you need.")
    assert (upload.heads, upload.n, upload.d) == (12, len(model.tokens), 32)
    logits = torch.from_numpy(q) @ torch.from_numpy(k).transpose(1, 2)
    torch.testing.assert_close(torch.softmax(logits, -1), model.attentions[3], atol=1e-5, rtol=1e-4)


def test_results_computed_on_an_upload_expire_with_it(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from service import views

    monkeypatch.setenv("ATTN_EXPLORER_UPLOAD_HOURS", str(1.0 / 3600))  # one second
    upload = read_upload(save(qkv()), "a.safetensors")
    assert stored.store(upload)
    spec = InputSpec("upload", N, D, HEADS, 0, 0.0, 0, upload=upload.sha256)
    exact = views.ExactAttention(spec, 1.0, "cpu")
    run = views.MethodRun.of(spec, 1.0, "cpu", "performer", {}, 0)
    assert exact.expire_seconds() == pytest.approx(1.0) and run.expire_seconds() == pytest.approx(1.0)
    assert views.ExactAttention(spec.replace(source="clustered", upload=""), 1.0, "cpu").expire_seconds() is None
    views.cached(exact)
    views.store(run, {"kept": 1})
    assert result_cache.contains(exact.cache_name, exact.key()) and result_cache.contains(run.cache_name, run.key())
    time.sleep(1.3)
    assert not result_cache.contains(exact.cache_name, exact.key())
    assert not result_cache.contains(run.cache_name, run.key())
