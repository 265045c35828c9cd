"""Compare's exports: the data holds full-resolution numbers (not the 128 x 128 display copy) within the server
limits, with a clear note when refused; the figure's PNG and SVG carry axes, title and colour bar."""

from __future__ import annotations

import ci_env
import numpy as np
import pytest
import torch

import core
from service.downsampling import block_reduce
from service.views import InputSpec
from ui import downloads
from ui.export import chromium_path, static_image
from ui.figures import heatmap
from ui.settings import Settings

N = 256


def settings() -> Settings:
    spec = InputSpec("clustered", N, 16, 2, 8, 0.1, 0)
    return Settings(spec, 0.2, "cpu", torch.device("cpu"), 1 / 8, 1)


def test_data_export_is_the_full_resolution_head() -> None:
    s = settings()
    params = core.budget_params("performer", N, 16, 1 / 8)
    shown = np.zeros((128, 128), np.float32)
    extra = downloads.heatmap_exports(s, "performer", params, 1, "attention", shown, log=True)
    arrays = extra["data"]()
    assert arrays["attention"].shape == (N, N)
    x = core.data.clustered(N, 16, 8, 0.1, 0, heads=2)
    direct = core.approximate("performer", x.q[1], x.k[1], x.v[1], scale=5.0, seed=0, **params).attention()
    np.testing.assert_allclose(arrays["attention"], direct.numpy(), rtol=1e-5, atol=1e-7)
    assert f"{N} × {N}" in extra["data_note"]
    png = extra["png"]()
    assert (int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")) == (N, N)

    error = downloads.heatmap_exports(s, "performer", params, 1, "error", shown, log=True)["data"]()["error"]
    exact = core.approximate("exact", x.q[1], x.k[1], x.v[1], scale=5.0).attention().numpy()
    np.testing.assert_allclose(error, direct.numpy() - exact, atol=1e-6)


def test_data_export_over_the_server_limits_keeps_the_shown_copy_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTN_EXPLORER_MEMORY_LIMIT", str(2**20))  # 1 MiB: not even n = 256 fits
    shown = np.ones((128, 128), np.float32)
    extra = downloads.heatmap_exports(settings(), "lsh", {}, 0, "attention", shown, log=False)
    assert extra["data"]["attention"] is shown and "png" not in extra
    assert "128 × 128 display copy" in extra["data_note"] and "ATTN_EXPLORER_MEMORY_LIMIT" in extra["data_note"]


def test_figure_svg_carries_axes_title_and_colour_bar() -> None:
    ci_env.require(chromium_path() is not None, "static export needs Chromium (apt-get install -y chromium)")
    a = block_reduce(np.random.default_rng(0).random((256, 256)).astype(np.float32), 2, "max")
    svg = static_image(heatmap(a, "Exact softmax", factor=2, log=True), "svg").decode("utf-8")
    for text in ("Exact softmax", "key j", "query i", "colorbar", "1e-6"):
        assert text in svg, text
