"""The "Order positions by cluster" sidebar toggle only reorders what is drawn; numbers stay on real positions. It is
on by default, so the default views show the clusters as blocks (issue #28), including maps reduced before drawing."""

from __future__ import annotations

import base64
import json
from typing import Any

import numpy as np
from streamlit.testing.v1 import AppTest

import core
from service import compute, views
from service.views import ExactAttention, MethodRun


def _z(trace: dict[str, Any]) -> np.ndarray:
    z = trace["z"]
    if isinstance(z, dict):  # plotly's binary encoding of numpy arrays
        flat = np.frombuffer(base64.b64decode(z["bdata"]), dtype=np.dtype(z["dtype"]))
        return flat.reshape([int(s) for s in str(z["shape"]).split(",")])
    return np.asarray(z, dtype=np.float64)


def heatmaps(at: AppTest) -> list[np.ndarray]:
    """Every heatmap trace's z on the page, in page order."""
    found = []
    for chart in at.get("plotly_chart"):
        spec = json.loads(chart.proto.spec)
        found += [_z(trace).astype(np.float64) for trace in spec["data"] if trace.get("type") == "heatmap"]
    return found


def first_heatmap(at: AppTest) -> np.ndarray:
    found = heatmaps(at)
    assert found, "no heatmap on the page"
    return found[0]


def adjacent_row_correlation(z: np.ndarray) -> float:
    """Mean Pearson correlation of each drawn row with the next: near 1 when neighbouring rows are in one cluster,
    near 0 when they are unrelated positions."""
    z = np.where(np.isfinite(z), z, np.nan)
    pairs = [(a, b) for a, b in zip(z[:-1], z[1:], strict=True) if np.nanstd(a) > 0 and np.nanstd(b) > 0]
    return float(np.mean([np.corrcoef(np.nan_to_num(a), np.nan_to_num(b))[0, 1] for a, b in pairs]))


def test_the_default_compare_view_shows_the_clusters_and_false_gives_position_order(open_compare) -> None:
    shown = open_compare()  # the default link: n = 512, 32 clusters, 128-pixel heatmaps (blocks of 4 positions)
    position = open_compare(sort_clusters="false")
    assert not shown.exception and not position.exception
    assert shown.toggle(key="sort_clusters").value is True
    assert "sort_clusters" not in shown.query_params  # the default stays out of the link
    exact_sorted, exact_real = first_heatmap(shown), first_heatmap(position)
    assert exact_sorted.shape == exact_real.shape == (128, 128)
    assert adjacent_row_correlation(exact_sorted) > 0.5
    assert abs(adjacent_row_correlation(exact_real)) < 0.2
    assert any("cluster order" in c.value for c in shown.caption)
    assert not any("cluster order" in c.value for c in position.caption)


def test_maps_reduced_by_the_engine_are_sorted_before_the_reduction(open_compare) -> None:
    # n = 1024: each method's maps are block-reduced (2 x 2) by the engine before they reach the page.
    at = open_compare(n="1024", heads="1", clusters="64", methods=["lsh"], res="512")
    assert not at.exception
    assert not any("keeps the real positions" in m.value for m in [*at.warning, *at.info]), "a map stayed unsorted"
    maps = heatmaps(at)  # exact, then the method's attention and error maps
    assert len(maps) >= 2
    assert all(m.shape == (512, 512) for m in maps[:2])
    assert adjacent_row_correlation(maps[1]) > 0.5


def test_sorting_reorders_the_heatmap_and_leaves_the_metrics_alone(open_compare) -> None:
    common = {"n": "64", "heads": "1", "clusters": "8", "methods": ["local"]}
    real = open_compare(**common, sort_clusters="false")
    ordered = open_compare(**common, sort_clusters="true")
    assert not real.exception and not ordered.exception
    assert ordered.toggle(key="sort_clusters").value is True
    assert real.metric and {m.label: m.value for m in real.metric} == {m.label: m.value for m in ordered.metric}
    table_real, table_sorted = real.table[0].value, ordered.table[0].value
    assert list(table_real["attention error"]) == list(table_sorted["attention error"])
    labels = core.data.clustered(64, 64, 8, 0.3, seed=0).labels
    assert labels is not None
    order = np.argsort(labels.numpy(), kind="stable")
    shown_real, shown_sorted = first_heatmap(real), first_heatmap(ordered)
    assert not np.allclose(shown_real, shown_sorted)
    np.testing.assert_allclose(shown_sorted, shown_real[order][:, order], equal_nan=True)


def test_the_engine_reduces_a_copy_in_cluster_order_from_the_full_matrix() -> None:
    spec = views.InputSpec("clustered", 640, 16, 1, 8, 0.3, 0, "", 0)  # n = 640: reduced in blocks of 2
    beta = 1 / 0.3
    res = compute.run_method(MethodRun(spec, beta, "cpu", "local", (), 0))
    assert res.factor == 2 and res.in_cluster_order is not None
    full = compute.full_attention(MethodRun(spec, beta, "cpu", "local", (), 0), 0)
    order = compute.cluster_order(spec)
    assert order is not None and not np.array_equal(order, np.arange(640))
    expected = compute.block_reduce(full[order][:, order], 2, "max")
    np.testing.assert_allclose(res.in_cluster_order["attention"][0], expected, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(res.attention[0], compute.block_reduce(full, 2, "max"), rtol=1e-5, atol=1e-7)
    gaussian = views.InputSpec("gaussian", 640, 16, 1, 8, 0.3, 0, "", 0)
    assert compute.run_method(MethodRun(gaussian, beta, "cpu", "local", (), 0)).in_cluster_order is None
    big = views.InputSpec("clustered", 1040, 16, 1, 8, 0.3, 0, "", 0)  # above the cached full size
    exact = compute.exact(ExactAttention(big, beta, "cpu"))
    assert exact.reduced and exact.attention_in_cluster_order is not None
    full = compute.full_attention(MethodRun(big, beta, "cpu", "exact", (), 0), 0)
    order = compute.cluster_order(big)
    assert order is not None
    expected = compute.display(full[order][:, order])
    np.testing.assert_allclose(exact.attention_in_cluster_order[0], expected, rtol=1e-5, atol=1e-7)


def test_sparse_plus_low_rank_maps_are_sorted_above_the_engines_display_size(open_page) -> None:
    # n = 768 is above 512, where the engine would reduce the parts; sorted, they come at full resolution first.
    def run(sort: str) -> AppTest:
        return open_page("pages/2_Sparse_plus_low_rank.py", n="768", heads="1", res="256", sort_clusters=sort)

    shown, position = run("true"), run("false")
    assert not shown.exception and not position.exception
    assert not any("keeps the real positions" in w.value for w in shown.warning)
    sorted_maps, real_maps = heatmaps(shown), heatmaps(position)
    assert len(sorted_maps) == len(real_maps) >= 8  # two support maps and the six maps of the split
    assert all(adjacent_row_correlation(m) > 0.5 for m in sorted_maps)
    assert all(adjacent_row_correlation(m) < 0.3 for m in real_maps)


def test_the_all_heads_grid_is_sorted_too(open_compare) -> None:
    common = {"n": "64", "heads": "2", "clusters": "8", "methods": ["local"], "view": "all"}
    shown, position = open_compare(**common), open_compare(**common, sort_clusters="false")
    assert not shown.exception and not position.exception
    order = compute.cluster_order(views.InputSpec("clustered", 64, 64, 2, 8, 0.1, 0))
    assert order is not None
    for drawn, real in zip(heatmaps(shown), heatmaps(position), strict=True):  # every cell: exact and local, per head
        np.testing.assert_allclose(drawn, real[order][:, order])


def test_a_second_session_on_one_link_draws_the_first_ones_maps_without_reducing_them_again(
    open_compare, monkeypatch
) -> None:
    """A class opening one link: each method's maps are reordered and block-reduced once per server process
    (``ui.computed.shared_drawn``), not once per student; the same link in position order, or another head, is
    drawn on its own, and the shared maps cannot be changed by the session that reads them."""
    from ui import computed
    from ui.figures import compare as figs

    reduced: list[tuple[int, ...]] = []  # each method's error map (exact attention's map has no error map)
    shrink = figs.shrink

    def counted(a: np.ndarray, resolution: int, base: int, mode: str) -> tuple[np.ndarray, int]:
        if mode == "absmax":
            reduced.append(a.shape)
        return shrink(a, resolution, base, mode)

    monkeypatch.setattr(figs, "shrink", counted)
    computed.clear_shared_drawn()
    link = {"methods": ["performer", "lsh"], "seed": "4321"}
    first = open_compare(**link)
    assert not first.exception and len(reduced) == 2  # two methods
    again = open_compare(**link)
    assert not again.exception and len(reduced) == 2  # the second session reduced nothing
    assert [z.tobytes() for z in heatmaps(again)] == [z.tobytes() for z in heatmaps(first)]
    open_compare(**link, sort_clusters="false")
    assert len(reduced) == 4  # position order: maps of their own
    open_compare(**link, head="1")
    assert len(reduced) == 6  # another head
    shared = [v for v in computed._shared_drawn._lru.values()]  # type: ignore[union-attr]
    assert shared and all(not m[0].flags.writeable for value in shared for m in value.values())
