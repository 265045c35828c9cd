"""Pure figure builders of the Inside a model page: a method's error through the model's layers (beside its error on
its own), and retrieval accuracy and embedding cosine per method against budget, with the exact model beside them.

Randomised methods carry one row per seed: the line is their mean and the band (or error bar) spans the seeds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ui.figures import method_colour
from ui.figures.axes import use_decades

FONT = 16
HEIGHT = 480
EXACT_COLOUR = method_colour("exact")


def _band(colour: str) -> str:
    red, green, blue = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({red},{green},{blue},0.18)"


def _spread(frame: pd.DataFrame, by: str, column: str) -> pd.DataFrame:
    """Mean, min and max of ``column`` over the seeds, per value of ``by`` (sorted)."""
    return frame.groupby(by)[column].agg(["mean", "min", "max"]).reset_index().sort_values(by)


def layer_error_figure(
    rows: Sequence[Mapping[str, Any]], labels: Mapping[str, str], colours: Mapping[str, str]
) -> go.Figure:
    """Left: each layer's output error inside the model (solid, band over seeds). Right: in the swapped layers, the
    attention-map and attention-output errors of the method on its own (dotted, open markers) against its attention
    output inside the model (solid), where it also reads the errors of the layers below."""
    frame = pd.DataFrame(list(rows))
    fig = make_subplots(
        rows=1,
        cols=2,
        horizontal_spacing=0.1,
        subplot_titles=("Each layer's output, inside the model", "Attention alone (○ map, □ output) vs inside (■)"),
    )
    for method in dict.fromkeys(frame["method"]) if len(frame) else ():
        mine = frame[frame["method"] == method]
        colour, label = colours[method], labels[method]
        hidden = _spread(mine, "layer", "hidden_error")
        x = hidden["layer"] + 1
        seeds = mine["seed"].nunique()
        if seeds > 1:
            fig.add_trace(
                go.Scatter(
                    x=[*x, *x[::-1]],
                    y=[*hidden["max"], *hidden["min"][::-1]],
                    fill="toself",
                    fillcolor=_band(colour),
                    mode="lines",
                    line={"width": 0},
                    hoverinfo="skip",
                    showlegend=False,
                    legendgroup=method,
                ),
                row=1,
                col=1,
            )
        fig.add_trace(
            go.Scatter(
                x=x,
                y=hidden["mean"],
                mode="lines+markers",
                name=label,
                legendgroup=method,
                line={"color": colour, "width": 3},
                hovertemplate=f"{label}<br>layer %{{x}}: output error %{{y:.3g}}<extra></extra>",
            ),
            row=1,
            col=1,
        )
        swapped = mine[mine["swapped"]]
        for column, dash, symbol, what in (
            ("own_map_error", "dot", "circle-open", "map alone"),
            ("own_output_error", "dash", "square-open", "output alone"),
            ("inside_attention_error", "solid", "square", "output inside"),
        ):
            part = _spread(swapped, "layer", column)
            fig.add_trace(
                go.Scatter(
                    x=part["layer"] + 1,
                    y=part["mean"],
                    error_y={
                        "type": "data",
                        "symmetric": False,
                        "array": part["max"] - part["mean"],
                        "arrayminus": part["mean"] - part["min"],
                        "visible": seeds > 1,
                    },
                    mode="lines+markers",
                    name=f"{label}: {what}",
                    legendgroup=method,
                    showlegend=False,
                    line={"color": colour, "dash": dash, "width": 2},
                    marker={"symbol": symbol, "size": 10},
                    hovertemplate=f"{label}, attention {what}<br>layer %{{x}}: %{{y:.3g}}<extra></extra>",
                ),
                row=1,
                col=2,
            )
    for col, title in ((1, "relative error of the layer's output"), (2, "relative error (mean over heads)")):
        fig.update_xaxes(title_text="layer", tickvals=list(range(1, 7)), range=[0.7, 6.3], row=1, col=col)
        fig.update_yaxes(title_text=title, row=1, col=col)
    columns = ["hidden_error", "own_map_error", "own_output_error", "inside_attention_error"]
    values = frame[columns].to_numpy().ravel() if len(frame) else []
    use_decades(fig, "y", values=values)
    fig.update_layout(
        height=HEIGHT,
        font={"size": FONT},
        margin={"l": 70, "r": 20, "t": 50, "b": 60},
        legend={"orientation": "h", "y": 1.16, "x": 0},
    )
    return fig


def retrieval_figure(
    rows: Sequence[Mapping[str, Any]], labels: Mapping[str, str], colours: Mapping[str, str]
) -> go.Figure:
    """Top-1 accuracy, top-5 accuracy, the embedding's cosine to the exact model's and how often the nearest second
    half is the exact model's, per method against budget (error bars over seeds); the exact model is the dashed line."""
    frame = pd.DataFrame(list(rows))
    panels = (
        ("top1", "top-1 accuracy"),
        ("top5", "top-5 accuracy"),
        ("cosine", "cosine to exact embedding"),
        ("agree_top1", "same top-1 as exact"),
    )
    fig = make_subplots(rows=1, cols=4, horizontal_spacing=0.06, subplot_titles=[title for _, title in panels])
    exact = frame[frame["method"] == "exact"]
    methods = [m for m in dict.fromkeys(frame["method"]) if m != "exact"] if len(frame) else []
    budgets = sorted(frame.loc[frame["method"] != "exact", "fraction"].unique()) if methods else [1 / 8]
    for col, (column, title) in enumerate(panels, start=1):
        if len(exact):
            value = float(exact[column].iloc[0])
            fig.add_trace(
                go.Scatter(
                    x=[min(budgets), max(budgets)],
                    y=[value, value],
                    mode="lines",
                    name="exact model",
                    legendgroup="exact",
                    showlegend=col == 1,
                    line={"color": EXACT_COLOUR, "dash": "dash", "width": 2},
                    hovertemplate=f"exact model: {title} %{{y:.3g}}<extra></extra>",
                ),
                row=1,
                col=col,
            )
        for method in methods:
            part = _spread(frame[frame["method"] == method], "fraction", column)
            fig.add_trace(
                go.Scatter(
                    x=part["fraction"],
                    y=part["mean"],
                    error_y={
                        "type": "data",
                        "symmetric": False,
                        "array": part["max"] - part["mean"],
                        "arrayminus": part["mean"] - part["min"],
                    },
                    mode="lines+markers",
                    name=labels[method],
                    legendgroup=method,
                    showlegend=col == 1,
                    line={"color": colours[method], "width": 3},
                    marker={"size": 10},
                    hovertemplate=f"{labels[method]}<br>budget %{{x:.3g}}: {title} %{{y:.3g}}<extra></extra>",
                ),
                row=1,
                col=col,
            )
        ticks = [float(b) for b in budgets]
        fig.update_xaxes(
            title_text="budget (of n²)",
            type="log",
            tickvals=ticks,
            ticktext=[_budget_text(b) for b in ticks],
            row=1,
            col=col,
        )
        fig.update_yaxes(range=[-0.03, 1.03] if column != "cosine" else None, row=1, col=col)
    fig.update_layout(
        height=HEIGHT,
        font={"size": FONT},
        margin={"l": 60, "r": 20, "t": 50, "b": 70},
        legend={"orientation": "h", "y": 1.18, "x": 0},
    )
    return fig


def _budget_text(fraction: float) -> str:
    inverse = 1 / fraction
    return f"1/{inverse:.0f}" if np.isclose(inverse, round(inverse)) else f"{fraction:g}"
