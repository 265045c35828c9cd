"""Pure figure builders of the Rank vs heads page: (data) -> go.Figure, no Streamlit. Log axes label decades."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go

from core import rank_heads as rh
from core.rank_heads_study import FACT1_EXPONENTS, Cell, FactOneCurve, Reference, TheoremShapes
from ui.figures.axes import use_decades
from ui.figures.contrast import cell_text_colours
from ui.figures.palette import other_colour

GRID_SCALE = "YlOrRd"
REFERENCE_COLOURS = {"full_rank": "#111", "construction": "#777", "midpoint": "#c0392b", "degree1_floor": "#e67e22"}


def log_axis(fig: go.Figure, axis: str, values: Any, ticks: Sequence[float] | None = None) -> go.Figure:
    """A log axis with two labels at least (``ui.figures.axes.decade_axis``): decades, else ``ticks`` (e.g. the
    head counts plotted) or round numbers 1, 2, 3, 5 × 10^k, never Plotly's crowded minor-digit labels."""
    return use_decades(fig, axis, [v for v in finite_values(values) if v > 0], ticks)


def colour(index: int) -> str:
    """Curves of ranks and head counts are not methods: colours no method has (ui/figures/palette.py)."""
    return other_colour(index)


def base_figure(title: str, x_title: str, y_title: str, *, height: int = 380, legend_y: float = -0.18) -> go.Figure:
    """An empty white figure with a small title and the legend below the plot (as ``ui.line_figure``)."""
    fig = go.Figure()
    fig.update_layout(
        title={"text": title, "font": {"size": 14}},
        height=height,
        template="plotly_white",
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
        xaxis={"title": x_title},
        yaxis={"title": y_title},
        legend={"orientation": "h", "yanchor": "top", "y": legend_y, "x": 0},
    )
    return fig


def finite_values(values: Any) -> list[float]:
    """The finite numbers in ``values`` (any iterable or array, None as nan), flattened."""
    flat = np.ravel(np.asarray(list(values) if not isinstance(values, np.ndarray) else values, dtype=float))
    return [float(v) for v in flat if math.isfinite(float(v))]


def grid_heatmap(d: int, errors: Mapping[Cell, float]) -> go.Figure:
    """Final error over (log2 H, log2 r), with the equal-parameter diagonals r d H = d^(1+c)."""
    hs = sorted({h for _, h in errors})
    rs = sorted({r for r, _ in errors})
    z = np.full((len(rs), len(hs)), np.nan)
    for (r, h), error in errors.items():
        z[rs.index(r), hs.index(h)] = error
    xs, ys = [math.log2(h) for h in hs], [math.log2(r) for r in rs]
    logged = np.log10(np.clip(z, 1e-6, None))
    text = np.vectorize(lambda v: "" if np.isnan(v) else f"{v:.3f}")(z) if z.size else z
    # One colour range for the cells and their text colours (a single cell sits mid-scale, as Plotly draws it).
    finite = logged[np.isfinite(logged)]
    low, high = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    low, high = (low - 0.5, high + 0.5) if high - low < 1e-9 else (low, high)
    fig = go.Figure(
        go.Heatmap(
            x=xs,
            y=ys,
            z=logged,
            text=text,
            colorscale=GRID_SCALE,
            zmin=low,
            zmax=high,
            colorbar={"title": "log10 error"},
            hovertemplate="H = 2^%{x:.0f}, r = 2^%{y:.0f}<br>log10 error %{z:.2f}<extra></extra>",
        )
    )
    if finite.size:
        # The numbers as a text layer: black on light cells, white on dark ones (WCAG AA), per cell.
        colours = cell_text_colours(logged, GRID_SCALE, low, high)
        cells = [(i, j) for i in range(len(rs)) for j in range(len(hs)) if text[i][j]]
        fig.add_scatter(
            x=[xs[j] for _, j in cells],
            y=[ys[i] for i, _ in cells],
            text=[text[i][j] for i, j in cells],
            mode="text",
            textfont={"color": [colours[i][j] for i, j in cells], "size": 14},
            hoverinfo="skip",
            showlegend=False,
        )
    if xs:
        x_span = np.linspace(min(xs) - 0.5, max(xs) + 0.5, 50)
        for power, dash in zip(FACT1_EXPONENTS, ("solid", "dash", "dot"), strict=True):
            line_y = power * math.log2(d) - x_span
            keep = (line_y >= min(ys) - 0.5) & (line_y <= max(ys) + 0.5)
            if keep.any():
                fig.add_scatter(
                    x=x_span[keep],
                    y=line_y[keep],
                    mode="lines",
                    line={"color": "#2c3e50", "dash": dash, "width": 1.5},
                    opacity=0.55,
                    name=f"r·d·H = d^{1 + power:g}",
                    hoverinfo="name",
                )
    fig.update_layout(
        title={"text": "Final test error over (rank r, heads H); lines: equal parameters r·d·H", "font": {"size": 14}},
        height=420,
        template="plotly_white",
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
        xaxis={"title": "heads H", "tickvals": xs, "ticktext": [str(h) for h in hs]},
        yaxis={"title": "head rank r", "tickvals": ys, "ticktext": [str(r) for r in rs]},
        legend={"orientation": "h", "yanchor": "top", "y": -0.18, "x": 0},
    )
    return fig


def error_vs_heads(
    errors: Mapping[Cell, float], references: Sequence[Reference], heads: Sequence[int], *, preview: bool = False
) -> go.Figure:
    """Error against the number of heads, one line per rank, with dashed reference levels across ``heads``.

    ``preview``: nothing trained yet; the chart shows the levels the training will be read against.
    """
    title = "Error against the number of heads, per rank"
    if preview:
        title = "Before training: the levels the trained heads are read against"
    fig = base_figure(title, "heads H", "test error", height=420, legend_y=-0.22)
    for i, r in enumerate(sorted({r for r, _ in errors})):
        pts = sorted((h, e) for (rr, h), e in errors.items() if rr == r)
        fig.add_scatter(
            x=[p[0] for p in pts],
            y=[p[1] for p in pts],
            mode="lines+markers",
            name=f"r = {r}",
            line={"color": colour(i)},
        )
    span = [min(heads), max(heads)] if heads else [1, 1]
    for ref in references:
        fig.add_scatter(
            x=span,
            y=[ref.value, ref.value],
            mode="lines",
            name=ref.label,
            line={"color": REFERENCE_COLOURS.get(ref.kind, "#777"), "dash": "dash", "width": 1.5},
        )
    log_axis(fig, "x", span, ticks=heads)
    log_axis(fig, "y", [*errors.values(), *(r.value for r in references)])
    return fig


def training_curves(curves: Mapping[Cell, tuple[Sequence[int], Sequence[float]]]) -> go.Figure:
    """Test error during training, one line per (rank, heads) cell."""
    fig = base_figure("Test error during training", "step", "test error", height=380)
    values: list[float] = []
    for i, ((r, h), (steps, errors)) in enumerate(sorted(curves.items())):
        fig.add_scatter(x=list(steps), y=list(errors), mode="lines", name=f"r={r}, H={h}", line={"color": colour(i)})
        values += finite_values(errors)
    log_axis(fig, "y", values)
    return fig


def error_vs_n(d: int, errors: Mapping[tuple[int, int, int], float]) -> go.Figure:
    """Full rank (r = d, H = 1) against rank 1 (H = d) by the number of points N; keys (rank, heads, N)."""
    fig = base_figure("Error against the number of points N", "N", "test error")
    for i, (r, h) in enumerate(((d, 1), (1, d))):
        pts = sorted((n, e) for (rr, hh, n), e in errors.items() if (rr, hh) == (r, h))
        fig.add_scatter(
            x=[p[0] for p in pts],
            y=[p[1] for p in pts],
            mode="lines+markers",
            name=f"r = {r}, H = {h}",
            line={"color": colour(i)},
        )
    log_axis(fig, "x", [n for _, _, n in errors], ticks=[n for _, _, n in errors])
    log_axis(fig, "y", errors.values())
    return fig


def fact_one(curve: FactOneCurve, d: int, n_points: int) -> go.Figure:
    """Fact 1's head: error against c, a 1/c guide and 0.2 × the attention entropy."""
    fig = base_figure(f"Fact 1 head: error against c (d = {d}, N = {n_points})", "inverse temperature c", "error")
    fig.add_scatter(x=curve.c, y=curve.error, mode="lines+markers", name="softmax head, V = I, KQᵀ = c·I")
    guide = curve.error[-1] * curve.c[-1] / curve.c
    fig.add_scatter(x=curve.c, y=guide, mode="lines", name="∝ 1/c (guide)", line={"dash": "dot", "color": "#999"})
    fig.add_scatter(
        x=curve.c,
        y=0.2 * curve.entropy,
        mode="lines",
        name="0.2 × attention entropy (nats)",
        line={"dash": "dash", "color": "#e67e22"},
    )
    log_axis(fig, "x", curve.c)
    log_axis(fig, "y", [*finite_values(curve.error), *finite_values(guide), *finite_values(0.2 * curve.entropy)])
    return fig


def theorem_shapes(d: int, shapes: TheoremShapes) -> go.Figure:
    fig = base_figure(
        f"Heads needed by the lower bounds at d = {d} (shape, unknown constants)",
        "head rank r",
        "heads H (constants set to 1)",
        legend_y=-0.3,
    )
    fig.add_scatter(
        x=shapes.ranks, y=shapes.high_accuracy, mode="lines+markers", name="Thm 2(i): 2^(d − (r+1)·log2(2d/r))"
    )
    fig.add_scatter(
        x=shapes.ranks,
        y=shapes.high_dimension,
        mode="lines+markers",
        name=f"Thm 2(ii): (d/r)^(1/ε), ε = {shapes.eps:g}",
    )
    fig.add_scatter(
        x=shapes.ranks,
        y=shapes.usual,
        mode="lines",
        name="H = d/r (what transformers use)",
        line={"dash": "dot", "color": "#999"},
    )
    log_axis(fig, "x", shapes.ranks, ticks=shapes.ranks)
    log_axis(fig, "y", [*shapes.high_accuracy, *shapes.high_dimension, *shapes.usual])
    return fig


def paper_fig1(values: Mapping[str, Mapping[int, float]] = rh.PAPER_FIG1_L1) -> go.Figure:
    """The paper's Fig. 1 (one layer, d = 64): error against rank, one line per parameter budget."""
    fig = base_figure(
        "The paper's Fig. 1, one layer (d = 64): error against rank at fixed parameters", "head rank r", "error (paper)"
    )
    for i, (budget, by_rank) in enumerate(values.items()):
        fig.add_scatter(
            x=list(by_rank),
            y=list(by_rank.values()),
            mode="lines+markers",
            name=f"paper, r·d·H = {budget}",
            line={"color": colour(i)},
        )
    log_axis(fig, "x", [r for v in values.values() for r in v])
    log_axis(fig, "y", [e for v in values.values() for e in v.values()])
    return fig
