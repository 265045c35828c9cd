"""Uploaded heads in the app (AppTest): a link with the upload's sha256 opens Compare on the file's numbers, and a
link whose upload has expired, or that names no valid upload, says so instead of failing.

AppTest cannot drive ``st.file_uploader``, so the file is stored the way the uploader's callback stores it
(``core.uploads.read_upload`` then ``service.uploads.store``); tests/browser/test_upload_browser.py uploads through
the real widget."""

from __future__ import annotations

import hashlib

import numpy as np
from safetensors.numpy import save

import core
from core.uploads import read_upload
from service import uploads

HEADS, N, D = 2, 48, 16


def topk_error(attention: np.ndarray, top_k: int) -> float:
    """Mean over heads of the best top-k approximation's relative Frobenius error, from NumPy alone."""
    kept = np.sort(attention, axis=-1)[..., -top_k:]
    dropped = (attention**2).sum(axis=(-2, -1)) - (kept**2).sum(axis=(-2, -1))
    return float(np.mean(np.sqrt(dropped) / np.linalg.norm(attention, axis=(-2, -1))))


def softmax(logits: np.ndarray) -> np.ndarray:
    z = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return z / z.sum(axis=-1, keepdims=True)


def stored_upload(arrays: dict[str, np.ndarray]) -> str:
    data = save(arrays)
    assert uploads.store(read_upload(data, "heads.safetensors"))
    return hashlib.sha256(data).hexdigest()


def test_a_link_with_the_upload_hash_opens_compare_on_the_files_numbers(open_compare) -> None:
    rng = np.random.default_rng(3)
    arrays = {name: (2 * rng.standard_normal((HEADS, N, D))).astype(np.float32) for name in ("q", "k", "v")}
    sha = stored_upload(arrays)
    at = open_compare(input="upload", upload=sha, methods=["topk", "performer"])
    assert not at.exception and not at.error
    assert at.selectbox(key="input").value == "upload" and at.text_input(key="upload").value == sha
    assert any(f"n = {N}, d = {D}, {HEADS} head(s)" in c.value for c in at.sidebar.caption)
    shown = {m.label: float(m.value) for m in at.metric}
    # τ = 1 on an upload is the model's own attention: softmax(q k^T / sqrt(d)).
    attention = softmax(np.einsum("hnd,hmd->hnm", arrays["q"], arrays["k"]).astype(np.float64) / np.sqrt(D))
    top_k = core.budget_params("topk", N, D, 1 / 8)["top_k"]
    label = core.registry.get("topk").label
    assert abs(shown[label] - topk_error(attention, top_k)) < 1e-3, (shown, topk_error(attention, top_k))


def test_a_logits_upload_gives_compare_the_matrix_itself(open_compare) -> None:
    rng = np.random.default_rng(4)
    q, k = rng.standard_normal((2, 1, N, 8))
    logits = (3 * q @ k.transpose(0, 2, 1)).astype(np.float32)[0]  # (n, n), rank 8
    sha = stored_upload({"logits": logits})
    at = open_compare(input="upload", upload=sha, methods=["topk"])
    assert not at.exception and not at.error
    assert any("Logits only" in c.value and "rank 8" in c.value for c in at.sidebar.caption)
    top_k = core.budget_params("topk", N, 8, 1 / 8)["top_k"]
    shown = float(at.metric[0].value)
    assert abs(shown - topk_error(softmax(logits.astype(np.float64))[None], top_k)) < 1e-3


def test_an_expired_upload_says_so_plainly(open_compare) -> None:
    at = open_compare(input="upload", upload="0" * 64)
    assert not at.exception
    errors = " ".join(e.value for e in at.error)
    assert "this upload has expired (uploads are kept 24 hours)" in errors and "upload the file again" in errors
    assert not at.metric


def test_a_link_without_a_valid_upload_asks_for_one(open_compare) -> None:
    at = open_compare(input="upload", upload="../../etc/passwd")
    assert not at.exception
    assert any("64 lowercase hexadecimal digits" in e.value for e in at.error)
    at = open_compare(input="upload")
    assert not at.exception and any("Upload a .safetensors or .npz" in i.value for i in at.info)


def test_the_pages_that_branch_on_the_input_take_an_upload(open_page) -> None:
    """Error vs entropy sweeps the upload's heads like a synthetic input (it has no MiniLM layers), VCC runs without
    tokens, and Kernels fits without a fresh draw (an upload has no other seed to draw)."""
    rng = np.random.default_rng(5)
    sha = stored_upload({name: rng.standard_normal((1, 64, 16)).astype(np.float32) for name in ("q", "k", "v")})
    for path in ("pages/3_Error_vs_entropy.py", "pages/5_VCC.py"):
        at = open_page(path, input="upload", upload=sha)
        assert not at.exception and not at.error, path
        assert any("n = 64, d = 16, 1 head(s)" in c.value for c in at.sidebar.caption), path
    from service.views import InputSpec

    assert not InputSpec("upload", 64, 16, 1, 0, 0.0, 0, upload=sha).drawn
    assert InputSpec("gaussian", 64, 16, 1, 0, 0.0, 0).drawn


def test_the_regime_map_places_every_uploaded_head(open_page) -> None:
    """The heads of an upload go on the regime's β axis like MiniLM's: all of them (the page hides its heads
    control), each with a link that opens it on Compare on the same upload."""
    rng = np.random.default_rng(6)
    sha = stored_upload({name: rng.standard_normal((3, 64, 16)).astype(np.float32) for name in ("q", "k", "v")})
    at = open_page("pages/4_Regime_map.py", input="upload", upload=sha)
    assert not at.exception and not at.error, [e.value for e in [*at.exception, *at.error]]
    won = {m.label: m.value for m in at.metric if m.label.startswith("heads won by")}
    assert sum(int(v.split(" / ")[0]) for v in won.values()) == 3
    links = next(df.value for df in at.dataframe if "open" in df.value.columns)
    assert list(links["head"]) == [0, 1, 2]
    assert links.iloc[2]["open"].startswith(f"./Compare?input=upload&upload={sha}&layer=0&head=2&")
