"""Pure figure builders for the Block sparsity page: entries kept against tiles touched, a support's entry map beside
its tile map, and the measured time of the block-sparse computation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ui.figures import MASK_SCALE, method_colour
from ui.figures.palette import other_colour

HEIGHT = 460


def fractions_figure(
    rows: Sequence[Mapping[str, Any]], labels: Mapping[str, str], colours: Mapping[str, str]
) -> go.Figure:
    """One point per method: x the fraction of entries its support keeps, y the fraction of tiles a block-sparse
    kernel computes. On the diagonal every touched tile is full; on the top line the kernel saves nothing."""
    fig = go.Figure()
    fig.add_scatter(
        x=[0, 1], y=[0, 1], mode="lines", line={"dash": "dot", "color": "#888"}, name="tiles = entries (full tiles)"
    )
    fig.add_scatter(x=[0, 1], y=[1, 1], mode="lines", line={"dash": "dash", "color": "#222"}, name="every tile")
    for row in rows:
        method = row["method"]
        fig.add_scatter(
            x=[row["entries_kept"]],
            y=[row["blocks_touched"]],
            mode="markers",
            marker={
                "size": 14,
                "color": colours.get(method, method_colour(method)),
                "line": {"color": "#222", "width": 1},
            },
            name=labels.get(method, method),
            hovertemplate=f"{labels.get(method, method)}<br>entries kept %{{x:.3f}}<br>tiles touched %{{y:.3f}}"
            "<extra></extra>",
        )
    block = rows[0]["block"] if rows else ""
    fig.update_layout(
        title={"text": f"Entries kept vs {block} × {block} tiles a kernel computes", "font": {"size": 14}},
        xaxis={
            "title": "fraction of the n² entries kept",
            "range": [0, max(0.3, *(r["entries_kept"] for r in rows)) * 1.15],
        },
        yaxis={"title": "fraction of tiles touched", "range": [0, 1.05]},
        height=HEIGHT,
        template="plotly_white",
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
        legend={"orientation": "h", "yanchor": "top", "y": -0.18, "x": 0},
    )
    return fig


def maps_figure(entries: np.ndarray, blocks: np.ndarray, *, label: str, block: int, factor: int) -> go.Figure:
    """The support's entries (head 0; any-pooled by ``factor`` when large) beside its tiles at size ``block``."""
    left = "entries kept" + (f" (each pixel {factor} × {factor} entries)" if factor > 1 else "")
    fig = make_subplots(
        rows=1, cols=2, subplot_titles=(left, f"{block} × {block} tiles touched"), horizontal_spacing=0.08
    )
    for col, grid in ((1, entries), (2, blocks)):
        fig.add_trace(
            go.Heatmap(
                z=np.asarray(grid, dtype=float),
                colorscale=MASK_SCALE,
                zmin=0,
                zmax=1,
                showscale=False,
                hovertemplate="row %{y}, column %{x}: %{z:.0f}<extra></extra>",
            ),
            row=1,
            col=col,
        )
        fig.update_yaxes(autorange="reversed", scaleanchor=f"x{'' if col == 1 else col}", row=1, col=col)
    touched, drawn = float(np.mean(blocks)), float(np.mean(entries))
    fig.update_layout(
        title={"text": f"{label}: where its support falls, as entries and as tiles", "font": {"size": 14}},
        height=HEIGHT,
        template="plotly_white",
        margin={"l": 10, "r": 10, "t": 60, "b": 10},
        meta={"tiles_touched": touched, "entries_drawn": drawn},
    )
    return fig


def timing_figure(
    rows: Sequence[Mapping[str, Any]], labels: Mapping[str, str], colours: Mapping[str, str], *, device: str
) -> go.Figure:
    """Measured time of the block-sparse computation on each method's tiles, beside the same computation on every
    tile and dense attention (torch SDPA)."""
    if not rows:
        return go.Figure()
    names = ["dense (SDPA)", "every tile", *(labels.get(r["method"], r["method"]) for r in rows)]
    times = [rows[0]["dense_s"], rows[0]["all_tiles_s"], *(r["block_sparse_s"] for r in rows)]
    bar_colours = [
        other_colour(1),
        other_colour(0),
        *(colours.get(r["method"], method_colour(r["method"])) for r in rows),
    ]
    touched = ["", "1.00", *(f"{r['blocks_touched']:.2f}" for r in rows)]
    fig = go.Figure(
        go.Bar(
            x=names,
            y=[1000 * t for t in times],
            marker_color=bar_colours,
            text=[f"{1000 * t:.1f} ms" for t in times],
            textposition="outside",
            customdata=touched,
            hovertemplate="%{x}: %{y:.2f} ms (tiles touched %{customdata})<extra></extra>",
        )
    )
    fig.update_layout(
        title={
            "text": f"Time of one head on this {device.upper()} (the fastest of the warm runs)",
            "font": {"size": 14},
        },  # fmt: skip
        yaxis={"title": "milliseconds"},
        height=HEIGHT,
        template="plotly_white",
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
        showlegend=False,
    )
    return fig
