"""Pure helpers of the ui package: URL value parsers, block reduction, PNG export, figure builders."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from service import compute
from ui import figures, url_params


def test_int_parser_clamps_rounds_and_rejects_text() -> None:
    parse = url_params.int_parser("n", 16, 4096)
    assert parse(["512"]) == (512, None)
    value, note = parse(["99999"])
    assert value == 4096 and "maximum 4096" in note
    value, note = parse(["-3"])
    assert value == 16 and "minimum 16" in note
    value, note = parse(["100.6"])
    assert value == 101 and "rounded" in note
    value, note = parse(["abc"])
    assert value is None and "not a number" in note
    assert parse(["nan"])[0] is None and parse(["inf"])[0] is None


def test_snap_parser_snaps_in_log_space_and_accepts_fractions() -> None:
    options = [0.1, 0.2, 0.5, 1.0]
    parse = url_params.snap_parser("tau", options, lambda x: f"{x:g}", log=True)
    assert parse(["0.5"]) == (0.5, None)
    value, note = parse(["0.3"])  # log-nearest: |ln 0.3/0.2| = 0.405 < |ln 0.5/0.3| = 0.511
    assert value == 0.2 and "nearest" in note
    assert parse(["1/5"])[0] == 0.2
    value, note = parse(["-1"])
    assert value is None and "greater than 0" in note
    assert parse(["1e9"])[0] == 1.0


def test_choice_and_multi_parsers_accept_ids_and_labels() -> None:
    labels = {"real": "Real model", "gaussian": "Gaussian"}
    parse = url_params.choice_parser("input", ["gaussian", "real"], lambda o: labels[o])
    assert parse(["real"]) == ("real", None)
    assert parse(["Real model"]) == ("real", None)
    value, note = parse(["<script>" * 50])
    assert value is None and len(note) < 300
    multi = url_params.multi_parser("methods", ["lsh", "performer"], 5)
    value, note = multi(["performer", "bogus", "lsh", "performer"])
    assert value == ["performer", "lsh"] and "bogus" in note


def test_cut_makes_hostile_values_short_and_printable() -> None:
    text = url_params.cut_value("a`b\x00" + "x" * 500)
    assert "`" not in text and "\x00" not in text and len(text) <= url_params.NOTICE_VALUE_CHARS + 1


@pytest.mark.parametrize("n", [64, 100])
def test_block_reduce_keeps_peaks_and_signs(n: int) -> None:
    rng = np.random.default_rng(0)
    a = rng.random((2, n, n)).astype(np.float32)
    a[1, 3, 5] = 7.0
    reduced = compute.block_reduce(a, 8, "max")
    assert reduced.shape == (2, -(-n // 8), -(-n // 8))
    assert reduced[1, 0, 0] == 7.0
    assert np.isclose(reduced.max(), a.max())
    signed = np.zeros((n, n), np.float32)
    signed[9, 9] = -5.0
    signed[9, 10] = 2.0
    out = compute.block_reduce(signed, 8, "absmax")
    assert out[1, 1] == -5.0, "the signed entry of largest magnitude survives"
    assert compute.block_factor(4096) == 8 and compute.block_factor(512) == 1


@pytest.mark.parametrize("mode", ["max", "absmax", "mean", "any"])
@pytest.mark.parametrize("shape", [(3, 100, 100), (64, 64), (2, 37, 41)])
def test_block_reduce_of_a_tensor_gives_the_numpy_numbers(mode: str, shape: tuple[int, ...]) -> None:
    """Maps are reduced on their device before the copy to the host (service.compute): the torch path must draw the same
    picture as the NumPy one, padding and ties included."""
    import torch

    a = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    a[..., 0, :3] = a[..., 0, :1]  # ties inside a block: the first one wins in both
    if mode == "any":
        a = a > 1
    for factor in (2, 3, 8):
        expected = compute.block_reduce(a, factor, mode)
        got = compute.block_reduce(torch.from_numpy(a), factor, mode)
        assert isinstance(got, torch.Tensor) and got.numpy().dtype == expected.dtype
        if mode == "mean":  # float sums in another order
            np.testing.assert_allclose(got.numpy(), expected, rtol=1e-6, atol=1e-7)
        else:
            np.testing.assert_array_equal(got.numpy(), expected)
    order = np.random.default_rng(2).permutation(shape[-1]) if shape[-1] == shape[-2] else None
    if order is not None:
        expected_in_order = compute.reduce_in_cluster_order(a, 8, mode, order)
        got_in_order = compute.reduce_in_cluster_order(torch.from_numpy(a), 8, mode, order)
        np.testing.assert_allclose(got_in_order, expected_in_order, rtol=1e-6, atol=1e-7)


def test_png_bytes_has_one_pixel_per_entry_and_uses_the_colormap() -> None:
    a = np.linspace(0, 1, 30 * 20, dtype=np.float32).reshape(30, 20)
    image = Image.open(io.BytesIO(figures.png_bytes(a)))
    assert image.size == (20, 30) and image.mode == "RGB"
    first, last = image.getpixel((0, 0)), image.getpixel((19, 29))
    assert first == (68, 1, 84) and last == (253, 231, 37), (first, last)  # viridis ends
    error = figures.png_bytes(np.array([[-1.0, 0.0, 1.0]]), "error")
    pixels = Image.open(io.BytesIO(error))
    red_side, blue_side = pixels.getpixel((2, 0)), pixels.getpixel((0, 0))
    assert red_side[0] > red_side[2] and blue_side[2] > blue_side[0], "positive = red, negative = blue"


def test_heatmap_keeps_original_indices_and_symmetric_error_range() -> None:
    a = np.random.default_rng(1).normal(size=(16, 16)).astype(np.float32)
    fig = figures.heatmap(a, "err", kind="error", factor=4)
    trace = fig.data[0]
    assert list(trace.x[:3]) == [0, 4, 8]
    assert trace.zmin == -trace.zmax and trace.zmax == pytest.approx(figures.error_bound(a))
    attention = figures.heatmap(np.full((4, 4), 0.25), "a", log=True)
    assert attention.data[0].colorscale[0][1] == "#440154"
