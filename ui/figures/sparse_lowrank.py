"""Pure figure builders for the Sparse + low rank page: hash buckets, the spectrum and the paper's Fig. 4."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go

from core.sparse_lowrank import Fig4Curves
from ui.figures.axes import use_decades

MAX_LABELLED_DECADES = 6  # a 340 px log axis has room for about this many labels


def _figure(title: str, x_title: str, y_title: str, height: int) -> go.Figure:
    fig = go.Figure()
    fig.update_layout(
        title={"text": title, "font": {"size": 14}},
        height=height,
        template="plotly_white",
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
        xaxis={"title": x_title},
        yaxis={"title": y_title},
        legend={"orientation": "h", "yanchor": "top", "y": -0.18, "x": 0},
    )
    return fig


def buckets_figure(
    buckets: np.ndarray, labels: np.ndarray | None, colour: str, title: str, order: np.ndarray | None = None
) -> go.Figure:
    """Each query's raw hash code (the key a round sorts by) against its position; dots coloured by cluster when the
    input has clusters. Not the method's buckets: those are the equal chunks cut from the sorted order.

    order: the display order of the positions (e.g. by cluster); the hover still names the real position."""
    index = np.arange(len(buckets)) if order is None else np.asarray(order)
    fig = _figure(title, "position" if order is None else "position (in cluster order)", "hash code (sort key)", 320)
    fig.add_scatter(
        x=np.arange(len(buckets)),
        y=buckets[index],
        customdata=index,
        mode="markers",
        name="queries",
        marker={
            "size": 4,
            "color": labels[index] if labels is not None else colour,
            "colorscale": "Cividis" if labels is not None else None,
        },
        hovertemplate="position %{customdata}: hash code %{y}<extra>query</extra>",
    )
    return fig


def spectrum_figure(
    sv: np.ndarray, sv_low_rank: np.ndarray | None, budget_rank: int, colours: Sequence[str]
) -> go.Figure:
    """Singular values of the exact head (and of Scatterbrain's L), log y with decade ticks, the budget's rank."""
    fig = _figure("Singular values (exact attention, shown head)", "index i", "σᵢ", 340)
    shown = [np.maximum(sv, 1e-12)]
    fig.add_scatter(x=np.arange(1, len(sv) + 1), y=shown[0], mode="lines", name="exact", line={"color": colours[0]})
    if sv_low_rank is not None:
        shown.append(np.maximum(sv_low_rank, 1e-12))
        fig.add_scatter(
            x=np.arange(1, len(sv_low_rank) + 1),
            y=shown[1],
            mode="lines",
            name="Scatterbrain's low-rank part L",
            line={"color": colours[1], "dash": "dot"},
        )
    values = np.concatenate(shown)
    use_decades(fig, "y", values)
    span = float(np.log10(values.max() / values.min()))
    if span > MAX_LABELLED_DECADES:  # label every k-th decade so the labels never overlap
        fig.update_yaxes(dtick=math.ceil(span / MAX_LABELLED_DECADES), minor={"ticks": ""})
    fig.add_vline(
        x=budget_rank,
        line={"dash": "dash", "color": "#555"},
        annotation_text=f"rank the budget buys: {budget_rank}",
        annotation_position="top right",
        annotation_bgcolor="rgba(255,255,255,0.75)",
    )
    return fig


def fig4_figure(curves: Fig4Curves, labels: Mapping[str, str], colours: Sequence[str]) -> go.Figure:
    """Measured per-bin MSE (markers), Theorem 2 (lines) and the paper's setting (dotted, hidden at first)."""
    fig = _figure("Per-entry MSE of the estimate of exp(q·k)", "q·k", "mean squared error", 420)
    for i, name in enumerate(("performer", "lsh", "scatterbrain")):
        colour, label = colours[i], labels[name]
        fig.add_scatter(
            x=curves.centres,
            y=curves.measured[name],
            mode="markers",
            name=f"{label}: measured",
            marker={"color": colour, "size": 8},
            # ± one standard error across draws: how far a point may sit from its line by chance
            error_y={"type": "data", "array": curves.stderr.get(name), "visible": name in curves.stderr},
        )
        fig.add_scatter(
            x=curves.grid, y=curves.theory[name], mode="lines", name=f"{label}: theory", line={"color": colour}
        )
    for name, legend, colour in (
        ("lsh", "LSH: paper's setting (L=4, K=23)", colours[1]),
        ("scatterbrain", "Scatterbrain: paper's setting", colours[2]),
    ):
        fig.add_scatter(
            x=curves.grid,
            y=curves.paper[name],
            mode="lines",
            name=legend,
            line={"color": colour, "dash": "dot"},
            visible="legendonly",
        )
    return fig


HASHING_LABELS = {"angular": "angular (Reformer: cosine)", "xbox_e2lsh": "XBOX+ / E2LSH (SMYRF: inner product)"}


def hashing_figure(rows: Sequence[Mapping], labels: Mapping[str, str], colours: Sequence[str]) -> go.Figure:
    """Two panels over the methods: output error (lower is better) and top-key recall (higher is better), one bar per
    hashing, with the recall random chunks would get as a dashed mark."""
    from plotly.subplots import make_subplots

    methods = [labels.get(str(row["method"]), str(row["method"])) for row in rows]
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=("Output error (lower is better)", "Top keys found (higher is better)"),
        horizontal_spacing=0.12,
    )
    for index, (hashing, label) in enumerate(HASHING_LABELS.items()):
        for col, measure in ((1, "output_error"), (2, "top_key_recall")):
            values = [float(row[hashing][measure]) for row in rows]
            fig.add_bar(
                x=methods,
                y=values,
                name=label,
                legendgroup=hashing,
                showlegend=col == 1,
                marker_color=colours[index % len(colours)],
                text=[f"{v:.2f}" for v in values],
                textposition="outside",
                hovertemplate=f"{label}<br>%{{x}}: %{{y:.3f}}<extra></extra>",
                row=1,
                col=col,
            )
    fig.add_scatter(
        x=methods,
        y=[float(row["chance_recall"]) for row in rows],
        mode="markers",
        marker={"symbol": "line-ew-open", "size": 40, "color": "#555", "line": {"width": 3}},
        name="random chunks (chance)",
        hovertemplate="random balanced chunks find %{y:.2f} of them<extra></extra>",
        row=1,
        col=2,
    )
    fig.update_layout(
        barmode="group",
        height=380,
        template="plotly_white",
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
        legend={"orientation": "h", "yanchor": "top", "y": -0.15, "x": 0},
        font={"size": 15},
    )
    fig.update_yaxes(rangemode="tozero")
    fig.update_yaxes(range=[0, 1.08], row=1, col=2)
    return fig
