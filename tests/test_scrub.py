"""core.scrub: each frame of the temperature scrubber equals a single call at that temperature."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import core
from core import scrub

TAUS = [0.05, 0.2, 1.0]


@pytest.fixture(scope="module")
def head() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    x = core.data.clustered(n=96, d=16, clusters=6, spread=0.3, seed=3, heads=1)
    return x.q[0], x.k[0], x.v[0]


def test_every_frame_equals_a_single_call_at_that_temperature(head) -> None:  # type: ignore[no-untyped-def]
    q, k, v = head
    params = {"performer": {"features": 24}, "lsh": {"rounds": 2, "buckets": 4}}
    views = scrub.temperature_views(q, k, v, ["performer", "lsh"], TAUS, params=params, seed=5, side=96)
    assert views.factor == 1
    for index, tau in enumerate(TAUS):
        exact = core.approximate("exact", q, k, v, scale=1 / tau).attention()
        np.testing.assert_allclose(views.exact[index], exact.numpy(), rtol=1e-5, atol=1e-7)
        assert views.entropy[index] == pytest.approx(float(core.metrics.mean_row_entropy(exact)), rel=1e-5)
        for name in ("performer", "lsh"):
            single = core.approximate(name, q, k, v, scale=1 / tau, seed=5, **params[name]).attention()
            np.testing.assert_allclose(views.attention[name][index], single.numpy(), rtol=1e-5, atol=1e-7)
            np.testing.assert_allclose(views.error_map[name][index], (single - exact).numpy(), atol=1e-6)
            error = float(core.metrics.relative_frobenius_error(single, exact))
            assert views.error[name][index] == pytest.approx(error, rel=1e-5)


def test_entropy_rises_with_temperature(head) -> None:  # type: ignore[no-untyped-def]
    views = scrub.temperature_views(*head, ["performer"], [0.02, 0.1, 0.5, 2.0], side=32)
    assert np.all(np.diff(views.entropy) > 0)


def test_maps_are_block_reduced_to_the_side_and_keep_extremes(head) -> None:  # type: ignore[no-untyped-def]
    q, k, v = head
    views = scrub.temperature_views(q, k, v, ["performer"], TAUS, params={"performer": {"features": 8}}, side=32)
    assert views.factor == 3 and views.exact.shape == (3, 32, 32)
    exact = core.approximate("exact", q, k, v, scale=1 / TAUS[0]).attention()
    assert views.exact[0].max() == pytest.approx(float(exact.max()))  # block maximum keeps the peak
    signed = views.error_map["performer"]
    full = core.approximate("performer", q, k, v, scale=1 / TAUS[0], features=8).attention() - exact
    assert np.abs(signed[0]).max() == pytest.approx(float(full.abs().max()), rel=1e-5)  # largest |error| kept
    assert views.payload_bytes() == (3 * 32 * 32 * 3) * 4 + 3 * 3 * 8


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"taus": []}, "taus"),
        ({"taus": [0.1, float("nan")]}, "taus"),
        ({"taus": [0.0]}, "taus"),
        ({"side": 4}, "side"),
        ({"methods": ["nope"]}, "method"),
    ],
)
def test_bad_arguments_name_the_parameter(head, kwargs, name) -> None:  # type: ignore[no-untyped-def]
    args = {"methods": ["performer"], "taus": TAUS, **kwargs}
    with pytest.raises(core.ParameterError, match=name):
        scrub.temperature_views(*head, args.pop("methods"), args.pop("taus"), **args)


def test_large_n_is_refused_up_front() -> None:
    q = torch.zeros(scrub.MAX_N + 1, 4)
    with pytest.raises(core.ParameterError, match="n"):
        scrub.temperature_views(q, q, q, ["performer"], TAUS)


def test_scrubber_fig_has_one_frame_per_temperature_and_a_slider_on_the_grid(head) -> None:  # type: ignore[no-untyped-def]
    from ui.scrubber import scrub_figure, tau_grid

    views = scrub.temperature_views(*head, ["performer", "lsh"], TAUS, side=32)
    fig = scrub_figure(views, {"lsh": "LSH"}, start=1)
    assert [f.name for f in fig.frames] == ["0", "1", "2"]
    assert [step["label"] for step in fig.layout.sliders[0].steps] == ["0.05", "0.2", "1"]
    assert fig.layout.sliders[0].active == 1 and "τ = 0.2" in fig.layout.title.text
    # A frame replaces the heatmaps and moves the markers; the curves stay.
    assert len(fig.frames[0].data) == len(fig.frames[0].traces) == 1 + 2 + 2 + 2
    assert fig.frames[2].data[-1].y[0] == pytest.approx(views.error["lsh"][2])
    grid = tau_grid(0.2, [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0], half_width=2)
    assert grid == [0.05, 0.1, 0.2, 0.5, 1.0]
    assert tau_grid(0.01, [0.01, 0.02, 0.05, 0.1, 0.2], half_width=1) == [0.01, 0.02, 0.05]  # clamps at the edge


def test_compare_page_draws_the_scrubber_on_request(open_compare) -> None:
    at = open_compare(n="128", scrub="1", methods=["lsh", "performer"])
    assert not at.exception, [e.value for e in at.exception]
    caption = [c.value for c in at.caption if "temperatures from" in c.value]
    assert caption and "MB of numbers sent once" in caption[0]
    charts = [c for c in at.get("plotly_chart") if '"frames"' in c.proto.spec]
    assert len(charts) == 1


def test_every_split_frame_equals_a_single_scatterbrain_call(head) -> None:  # type: ignore[no-untyped-def]
    q, k, v = head
    params = {"features": 24, "rounds": 2, "buckets": 4}
    views = scrub.split_views(q, k, v, TAUS, params=params, seed=5, side=96)
    assert views.factor == 1
    for index, tau in enumerate(TAUS):
        exact = core.approximate("exact", q, k, v, scale=1 / tau).attention()
        single = core.approximate("scatterbrain", q, k, v, scale=1 / tau, seed=5, **params)
        np.testing.assert_allclose(views.exact[index], exact.numpy(), rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(views.parts["attention"][index], single.attention().numpy(), rtol=1e-5, atol=1e-7)
        for name in ("sparse", "low_rank", "naive_sum"):
            np.testing.assert_allclose(views.parts[name][index], single.parts[name].numpy(), rtol=1e-5, atol=1e-6)
        for name in ("attention", "naive_sum"):
            dense = single.attention() if name == "attention" else single.parts[name]
            error = float(core.metrics.relative_frobenius_error(dense, exact))
            assert views.error[name][index] == pytest.approx(error, rel=1e-5)
        support = single.parts["support"].bool()
        assert views.support_share[index] == pytest.approx(float(support.double().mean()))


def test_the_naive_sum_double_counts_the_support() -> None:
    # Scatterbrain's claim: on Ω the naive sum holds exp(q.k) + phi(q).phi(k), about twice exp(q.k), because the
    # random features are unbiased; with many features the mean over Ω is close to 2 at a moderate temperature.
    x = core.data.clustered(n=256, d=16, clusters=8, spread=0.3, seed=0, heads=1)
    views = scrub.split_views(x.q[0], x.k[0], x.v[0], [1.0, 2.0], params={"features": 256}, side=64)
    assert np.all(np.abs(views.double_count - 2.0) < 0.25), views.double_count
    assert np.all(views.error["naive_sum"] > views.error["attention"])


def test_split_scrubber_figure_moves_every_map_and_both_markers(head) -> None:  # type: ignore[no-untyped-def]
    from ui.scrubber import split_scrub_figure

    views = scrub.split_views(*head, TAUS, side=32)
    fig = split_scrub_figure(views, start=1)
    assert len(fig.frames) == len(TAUS)
    assert "τ = 0.2" in fig.layout.title.text
    moving = fig.frames[0].traces
    assert [fig.data[i].type for i in moving] == ["heatmap"] * 5 + ["scatter"] * 2
    assert all(fig.data[i].mode == "lines" for i in range(len(fig.data)) if i not in moving)
    np.testing.assert_allclose(fig.frames[2].data[5].y, [views.error["attention"][2]])
    assert views.payload_bytes() < 200_000


def test_sparse_plus_low_rank_page_draws_the_split_scrubber(open_page) -> None:
    at = open_page("pages/2_Sparse_plus_low_rank.py", timeout=300, n="128", scrub="true", scrub_px="32")
    assert not at.exception, [e.value for e in at.exception]
    assert any("13 temperatures from" in c.value and "maps 32 × 32" in c.value for c in at.caption)


def test_the_chunk_size_does_not_change_the_frames(head, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A CPU computes a few temperatures at a time (core.device.chunk_elements); how many must not matter beyond
    float32 rounding."""
    q, k, v = head
    n = q.shape[0]
    views = scrub.temperature_views(q, k, v, ["performer", "lsh"], TAUS, seed=5, side=48)
    split = scrub.split_views(q, k, v, TAUS, seed=5, side=48)
    monkeypatch.setattr(scrub, "chunk_elements", lambda device: n * n)  # one temperature per chunk
    cut_views = scrub.temperature_views(q, k, v, ["performer", "lsh"], TAUS, seed=5, side=48)
    cut_split = scrub.split_views(q, k, v, TAUS, seed=5, side=48)
    close = {"rtol": 1e-5, "atol": 1e-7}
    np.testing.assert_allclose(cut_views.exact, views.exact, **close)
    for name in ("performer", "lsh"):
        np.testing.assert_allclose(cut_views.attention[name], views.attention[name], **close)
        np.testing.assert_allclose(cut_views.error[name], views.error[name], **close)
    for name in split.parts:
        np.testing.assert_allclose(cut_split.parts[name], split.parts[name], **close)
    np.testing.assert_allclose(cut_split.error["attention"], split.error["attention"], **close)


def test_a_display_order_reorders_the_maps_before_the_reduction_and_leaves_the_numbers(head) -> None:  # type: ignore[no-untyped-def]
    q, k, v = head
    order = torch.randperm(q.shape[0], generator=torch.Generator().manual_seed(1))
    kwargs = {"params": {"lsh": {"rounds": 2, "buckets": 4}}, "seed": 5}
    real = scrub.temperature_views(q, k, v, ["lsh"], TAUS, side=96, **kwargs)
    drawn = scrub.temperature_views(q, k, v, ["lsh"], TAUS, side=96, order=order, **kwargs)
    index = order.numpy()
    np.testing.assert_array_equal(drawn.exact, real.exact[:, index][:, :, index])
    np.testing.assert_array_equal(drawn.error_map["lsh"], real.error_map["lsh"][:, index][:, :, index])
    np.testing.assert_array_equal(drawn.error["lsh"], real.error["lsh"])
    # Reduced: blocks of the reordered matrix, not a reordering of position-order blocks.
    small = scrub.temperature_views(q, k, v, ["lsh"], TAUS, side=32, order=order, **kwargs)
    exact = torch.from_numpy(real.exact[:, index][:, :, index])
    np.testing.assert_array_equal(small.exact, scrub._block_max(exact, 3).numpy())
    split = scrub.split_views(q, k, v, TAUS[:1], params={"features": 16}, side=96, order=order)
    split_real = scrub.split_views(q, k, v, TAUS[:1], params={"features": 16}, side=96)
    np.testing.assert_array_equal(split.parts["sparse"], split_real.parts["sparse"][:, index][:, :, index])
    with pytest.raises(core.ParameterError, match="order"):
        scrub.temperature_views(q, k, v, ["lsh"], TAUS, side=96, order=[0, 0, *range(2, q.shape[0])])
