"""ui.figures.vcc: each VCC figure built from small hand-made data, no server."""

from __future__ import annotations

import math

import numpy as np
import pytest

from core.vcc_study import CostCurve, StorageEntry, SweepPoint
from core.vcc_tree import TreeNode
from ui.figures import vcc


def node(id: int, level: int, first: int, last: int, status: str, parent: int, row: int = -1) -> TreeNode:
    count = last - first + 1
    return TreeNode(
        id=id,
        level=level,
        index=id,
        start=first,
        size=count,
        count=count,
        first=first,
        last=last,
        log_mu=float(id),
        score=math.nan if level == 0 else 0.5,
        status=status,
        parent=parent,
        row=row,
    )


def traces_by_name(fig) -> dict:
    return {trace.name: trace for trace in fig.data if trace.name}


def test_tree_figure_draws_levels_leaves_and_vip_stars() -> None:
    # 8 tokens, VIPs at 0 and 1; C = positions 2..7: the root split into two blocks of 3, one refined further.
    nodes = [
        node(0, 0, 2, 7, "split", -1),
        node(1, 1, 2, 4, "leaf", 0, row=0),
        node(2, 1, 5, 7, "split", 0),
        node(3, 2, 5, 5, "leaf", 2, row=1),
        node(4, 2, 6, 6, "leaf", 2, row=2),
        node(5, 2, 7, 7, "leaf", 2, row=3),
    ]
    resolution = np.array([1, 1, 3, 3, 3, 1, 1, 1])
    fig = vcc.tree_figure(nodes, resolution, [0, 1], tokens=[f"w{i}" for i in range(8)])
    traces = traces_by_name(fig)
    assert list(traces["refined (split)"].x) == [4.5, 6.0]  # centres of the covered positions
    assert len(traces["leaf = compressed row"].x) == 4
    assert "padding pass-through (free)" not in traces  # no such node here
    assert list(traces["VIP token (exact)"].x) == [0, 1]
    assert traces["VIP token (exact)"].text == ("0 · w0", "1 · w1")
    assert "row 0 of S<sub>c</sub>C" in traces["leaf = compressed row"].text[0]
    strip = next(t for t in fig.data if t.type == "heatmap")
    z = np.asarray(strip.z[0], dtype=float)
    assert np.isnan(z[:2]).all() and z[2] == np.log2(3) and z[5] == 0  # VIPs blank, others log2 block length
    assert fig.layout.yaxis.autorange == "reversed"
    assert list(fig.layout.yaxis.ticktext) == ["root", "s = 3", "s = 1"]
    assert fig.layout.xaxis2.title.text == "position"


def test_the_tree_caption_names_the_colours_the_figure_draws() -> None:
    """The caption said "refined nodes have an orange ring" and "dark = single token, bright = long block" while the
    ring was dark grey and plotly.py's "Greys" drew single tokens white and long blocks black."""
    nodes = [node(0, 0, 2, 7, "split", -1), node(1, 1, 2, 4, "leaf", 0, row=0), node(2, 1, 5, 7, "split", 0)]
    resolution = np.array([1, 1, 3, 3, 3, 1, 1, 1])
    fig = vcc.tree_figure(nodes, resolution, [0, 1])
    caption = vcc.tree_caption(resolution)
    ring = hex_rgb(vcc.SPLIT_RING)
    assert "dark grey ring" in caption and max(ring) < 100 and max(ring) - min(ring) < 30  # grey, and dark
    assert traces_by_name(fig)["refined (split)"].marker.line.color == vcc.SPLIT_RING
    strip = next(t for t in fig.data if t.type == "heatmap")
    scale = {float(stop): hex_rgb(colour) for stop, colour in strip.colorscale}
    # a single token (z = log2 1 = zmin) black, the longest block (z = zmax = log2 3) a light grey
    assert strip.zmin == 0 and strip.zmax == pytest.approx(np.log2(3))
    assert scale[0.0] == (0, 0, 0) and "black for a single token" in caption
    assert min(scale[1.0]) > 180 and "light grey for the longest block (s = 3)" in caption


def hex_rgb(colour: str) -> tuple[int, ...]:
    return tuple(int(colour.lstrip("#")[i : i + 2], 16) for i in (0, 2, 4))


def sweep_points() -> list[SweepPoint]:
    points = []
    for selector in vcc.SELECTOR_LABELS:
        for with_d in (True, False):
            for h, r in ((0, 16.0), (2, 48.0), (4, 64.0)):
                points.append(SweepPoint(selector, with_d, h, r, vip_error=1 - r / 64, all_error=2 * (1 - r / 64)))
    return points


def test_error_budget_figure_has_one_curve_per_selector_and_d() -> None:
    fig = vcc.error_budget_figure(sweep_points(), n=64, rows="all", current_r=48, mean_over_heads=True)
    traces = traces_by_name(fig)
    assert len(fig.data) == 2 * len(vcc.SELECTOR_LABELS) + 1
    curve = traces["mu (eq. 53)"]
    assert list(curve.x) == [0.25, 0.75, 1.0]
    assert list(curve.y) == [1.5, 0.5, 0.0]  # "all" rows read all_error
    assert curve.line.dash == "solid" and traces["mu (eq. 53), no D"].line.dash == "dot"
    assert traces["mu (eq. 53), no D"].visible is True  # µ without D is shown for comparison ...
    assert traces["random, no D"].visible == "legendonly"  # ... the other selectors without D are not
    assert traces["full budget = exact"].x == (1.0,)
    assert "mean over heads" in fig.layout.title.text
    assert fig.layout.shapes[0].x0 == 0.75  # the current budget
    vip_fig = vcc.error_budget_figure(sweep_points(), n=64, rows="vip", current_r=16)
    assert list(traces_by_name(vip_fig)["bottom mu"].y) == [0.75, 0.25, 0.0]
    assert "one head" in vip_fig.layout.title.text


def test_cost_figure_uses_decade_log_axes_on_both_panels() -> None:
    lengths = np.array([256, 1024, 4096, 16384])
    cost = CostCurve(n=lengths, r=lengths // 16, flops=lengths * 100, exact_flops=lengths**2 * 100)
    fig = vcc.cost_figure(cost, n=1024)
    assert len(fig.data) == 4
    assert [a.text for a in fig.layout.annotations] == ["compressed length r", "FLOPs per head"]
    for axis in (fig.layout.xaxis, fig.layout.xaxis2, fig.layout.yaxis, fig.layout.yaxis2):
        assert axis.type == "log" and axis.dtick == 1 and axis.exponentformat == "power"
    assert fig.layout.xaxis.title.text == "sequence length n"
    assert list(traces_by_name(fig)["VCC"].y) == [16, 64, 256, 1024]
    assert [shape.x0 for shape in fig.layout.shapes] == [1024, 1024]


def test_storage_figure_splits_kept_and_rewritten_entries() -> None:
    positions_c = [2, 3, 4, 5]  # VIPs at 0 and 1
    entries = [
        StorageEntry(0, 0, 0, 4, 4, True, 1.0, 2.0),
        StorageEntry(1, 0, 0, 2, 2, True, 0.1, 0.2),
        StorageEntry(1, 1, 2, 2, 2, False, 0.3, 0.3),
        StorageEntry(2, 3, 3, 1, 1, False, 0.0, 0.0),
    ]
    fig = vcc.storage_figure(entries, positions_c)
    traces = traces_by_name(fig)
    rewritten, kept = traces["rewritten by the update"], traces["kept (below a leaf, or untouched)"]
    assert list(rewritten.x) == [3.5, 2.5] and list(rewritten.y) == [0, 1]
    assert list(kept.x) == [4.5, 5.0]
    assert rewritten.text[0].startswith("root mean") and "level 1, node 0" in rewritten.text[1]
    assert list(fig.layout.yaxis.ticktext) == ["root: mean", "Δ, s = 2", "Δ, s = 1"]
    assert fig.layout.yaxis.autorange == "reversed"
