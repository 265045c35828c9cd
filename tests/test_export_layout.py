"""Exported maps keep each colour bar beside its map: the issue's Compare PNG had them far to the right.

Plotly keeps a map's pixels square (``scaleanchor``) by shrinking its axis domain (``constrain="domain"``) toward
``constraintoward``; the checks below redo that geometry for the export's width and height and measure the gap
between a map's right edge and its colour bar. No browser needed.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest

from ui.export import EXPORT_WIDTH, heatmap_width
from ui.figures import GridCell, heatmap, heatmap_grid
from ui.figures import compare as figs

MAX_GAP_PX = 20  # the colour bar's own offset from its map (Plotly's default 2% of the plot), and no more


def gaps_px(fig: go.Figure, width: int, height: int) -> list[float]:
    """For each heatmap, the pixels between its drawn (square-pixel) map and its colour bar's left edge."""
    m = fig.layout.margin
    left, right, top, bottom = (80 if v is None else v for v in (m.l, m.r, m.t, m.b))
    plot_w, plot_h = width - left - right, height - top - bottom
    out = []
    for trace in fig.data:
        xa, ya = fig.layout[f"xaxis{(trace.xaxis or 'x')[1:]}"], fig.layout[f"yaxis{(trace.yaxis or 'y')[1:]}"]
        (x0, x1), (y0, y1) = xa.domain or (0, 1), ya.domain or (0, 1)
        rows, cols = np.asarray(trace.z).shape
        domain_w, domain_h = (x1 - x0) * plot_w, (y1 - y0) * plot_h
        side = min(domain_w, domain_h * cols / rows)
        toward = xa.constraintoward or "center"
        offset = {"left": 0.0, "center": (domain_w - side) / 2, "right": domain_w - side}[toward]
        map_right = left + x0 * plot_w + offset + side
        bar_x = 1.02 if trace.colorbar.x is None else trace.colorbar.x  # Plotly's default sits past the plot
        out.append(left + bar_x * plot_w - map_right)
    return out


def compare_figure() -> go.Figure:
    rng = np.random.default_rng(0)
    return figs.method_figure("Performer", rng.random((128, 128)), rng.normal(size=(128, 128)), 4, True, "head 0")


def export_size(fig: go.Figure) -> tuple[int, int]:
    height = int(fig.layout.height)
    return heatmap_width(fig, height) or EXPORT_WIDTH, height


@pytest.mark.parametrize(
    "fig",
    [
        compare_figure(),
        heatmap(np.eye(64), "Exact softmax"),
        heatmap_grid([[GridCell(t, np.eye(32)) for t in "abc"], [GridCell("d", np.eye(32))]], columns=3),
    ],
    ids=["compare-method", "single-heatmap", "three-column-grid"],
)
def test_exported_colour_bars_sit_beside_their_maps(fig: go.Figure) -> None:
    width, height = export_size(fig)
    for gap in gaps_px(fig, width, height):
        assert 0 <= gap <= MAX_GAP_PX, (width, height, gap)
    # and at the old fixed export width, or any other: the map hugs its colour bar
    for gap in gaps_px(fig, EXPORT_WIDTH, height):
        assert 0 <= gap <= MAX_GAP_PX, (EXPORT_WIDTH, gap)


def test_export_width_fits_a_one_column_figure_and_leaves_others_alone() -> None:
    width, _ = export_size(compare_figure())
    assert width < EXPORT_WIDTH  # 260 px maps in one column: no 900 px page of white
    assert heatmap_width(go.Figure(go.Scatter(x=[1, 2], y=[1, 2])), 400) is None
