"""Pure builders for the Compare and Error vs entropy pages: metric rows, block reduction for display, the
all-heads grid, the temperature sweep chart and the per-head scatter. No Streamlit; tested without a server.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from core import compare
from service.downsampling import block_reduce
from ui.figures import GridCell, heatmap_grid, line_figure, method_colour
from ui.figures.axes import use_decades
from ui.figures.contrast import parse_colour

# ------------------------------------------------------------------ Compare


def metric_rows(
    results: Mapping[str, Any], labels: Mapping[str, str], full_memory: int, times: Mapping[str, str]
) -> list[dict[str, Any]]:
    """One row per method that ran (MethodResult-like: metrics, memory, flops, device, params, error_message).

    times: each method's time text (a warm median with its spread, or one cold measurement).
    """
    rows = []
    for method, res in results.items():
        if res.error_message:
            continue
        rows.append(
            {
                "method": labels[method],
                "attention error": float(np.mean(res.metrics["attention_error"])),
                "output error": float(np.mean(res.metrics["output_error"])),
                "row KL (nats)": float(np.mean(res.metrics["row_kl"])),
                "memory (% of full)": 100.0 * res.memory / full_memory,
                "FLOPs (M)": res.flops / 1e6,
                f"time on {res.device}": times.get(method, f"{1000 * res.seconds:.3g} ms (one cold measurement)"),
                "parameters": ", ".join(f"{k}={v}" for k, v in res.params.items()),
            }
        )
    return rows


# The metrics table's columns that answer a predict-then-reveal question (which method has the lower error).
ERROR_COLUMNS = ("attention error", "output error", "row KL (nats)")


def metrics_table(rows: Sequence[Mapping[str, Any]], show_errors: bool = True) -> pd.DataFrame:
    """The metrics table of ``metric_rows``; without the error columns while a class room hides the answer."""
    table = pd.DataFrame(list(rows))
    return table if show_errors else table.drop(columns=list(ERROR_COLUMNS), errors="ignore")


def head_error_title(head: int, error: float, kl: float, show_errors: bool = True) -> str:
    """A method figure's error-map title: the shown head's own error and row KL (the tiles average over heads)."""
    return f"head {head}: error {error:.3f} · KL {kl:.2f}" if show_errors else f"head {head}: error against exact"


def row_title(label: str, error: float, show_errors: bool = True) -> str:
    """A map's title in the presenter view's row: the method's short name and the shown head's error."""
    name = label.split(" (")[0]
    return f"{name}: {error:.3f}" if show_errors else name


def maps_row_caption(head: int, factor: int, n: int, *, shared_colour: bool, show_errors: bool) -> str:
    """What the presenter view's row of maps shows: whose head, what each title's number is, and the colours."""
    parts = [f"Head {head} of exact attention and of each method"]
    if show_errors:
        parts.append("beside each method's name, its relative error ‖Â − A‖_F / ‖A‖_F on this head")
    parts.append("one colour range, the exact map's, for every map" if shared_colour else "each map on its own colours")
    if factor > 1:
        parts.append(f"each pixel the largest value of a {factor} × {factor} block of the {n} × {n} map")
    return "; ".join(parts) + "."


def best_error(rows: Sequence[Mapping[str, Any]]) -> float | None:
    return min((float(r["attention error"]) for r in rows), default=None)


def number_columns(table: pd.DataFrame) -> list[str]:
    """The numeric columns of a metrics table (formatted as numbers; text columns stay as they are)."""
    return [c for c in table.columns if pd.api.types.is_float_dtype(table[c])]


def shrink(a: np.ndarray, resolution: int, base: int, mode: str) -> tuple[np.ndarray, int]:
    """Block-reduce a (possibly already reduced) map to at most ``resolution`` per side; returns it and the block
    size in original positions (``base`` times the extra block)."""
    extra = max(1, -(-a.shape[-1] // resolution))
    return block_reduce(a, extra, mode), base * extra


def method_figure(
    label: str,
    attention: np.ndarray,
    error: np.ndarray,
    factor: int,
    log_colour: bool,
    error_title: str = "",
    zmax: float | None = None,
) -> go.Figure:
    """A method's (block-reduced) attention map (top) over its error against exact, as one figure of two square
    heatmaps. factor: block size of the reduction; error_title: default "<label> − exact"; zmax: the attention map's
    colour top (``attention_top``) when the maps share one range."""
    return heatmap_grid(
        [
            [GridCell(label, attention, log=log_colour, factor=factor, name=label, zmax=zmax)],
            [
                GridCell(
                    error_title or f"{label} − exact",
                    error,
                    kind="error",
                    factor=factor,
                    hover_label="error",
                    name=f"{label} − exact",
                    x_title=True,
                )
            ],
        ],
        columns=1,
    )


def maps_row(
    maps: Mapping[str, np.ndarray], titles: Mapping[str, str], factor: int, log_colour: bool, zmax: float | None
) -> go.Figure:
    """The exact map and each method's attention map side by side in one row (the presenter view's first picture),
    on one colour range and one colour bar when ``zmax`` is given (the maps then compare by colour alone, and are
    wider without a bar each). maps: label -> (block-reduced) map; titles: label -> map title."""
    cells = [
        GridCell(titles.get(label, label), z, log=log_colour, factor=factor, name=label, zmax=zmax, x_title=True)
        for label, z in maps.items()
    ]
    return heatmap_grid([cells], columns=max(1, len(cells)), map_px=230, one_colour_bar=zmax is not None)


def heads_grid(
    maps: Mapping[str, np.ndarray], heads: int, log_colour: bool
) -> tuple[go.Figure, dict[str, np.ndarray], int]:
    """Every head of every method (rows; "exact" first) as a grid of small heatmaps.

    maps: method -> (heads, n', n') attention. Returns the figure, the downsampled arrays and the cell side.
    """
    names = list(maps)
    grid_side = 64 if heads > 6 else 96
    fig = make_subplots(
        rows=len(names),
        cols=heads,
        horizontal_spacing=0.01,
        vertical_spacing=0.03,
        subplot_titles=[f"h{h}" if r == 0 else "" for r in range(len(names)) for h in range(heads)],
    )
    data = {}
    for r, method in enumerate(names):
        for h in range(heads):
            matrix = maps[method][h]
            small = block_reduce(matrix, max(1, -(-matrix.shape[-1] // grid_side)), "max")
            data[f"{method}_head{h}"] = small
            z = np.log10(np.clip(small, 1e-6, None)) if log_colour else small
            fig.add_heatmap(
                z=z,
                row=r + 1,
                col=h + 1,
                colorscale="Viridis",
                showscale=False,
                zmin=-6 if log_colour else 0,
                hovertemplate=f"{method} head {h}<br>i %{{y}}, j %{{x}}<br>value %{{z:.3g}}<extra></extra>",
            )
        fig.update_yaxes(title_text=method, row=r + 1, col=1)
    fig.update_yaxes(autorange="reversed", showticklabels=False)
    fig.update_xaxes(showticklabels=False)
    cell = max(50, min(150, 1000 // heads))  # square cells in a ~1000 px wide main area
    fig.update_layout(
        height=(cell + 12) * len(names) + 60, margin={"l": 10, "r": 10, "t": 30, "b": 10}, template="none"
    )
    return fig, data, grid_side


# ------------------------------------------------------------------ Error vs entropy


def sweep_figure(
    result: Mapping[str, Any],
    methods: Sequence[str],
    *,
    metric: str,
    labels: Mapping[str, str],
    families: Mapping[str, str],
    budget_label: str,
    log_y: bool,
    current_entropy: float,
    tau: float,
    n: int,
) -> tuple[go.Figure, pd.DataFrame, str]:
    """The error-against-entropy chart of a temperature sweep, its tidy table, and the crossover sentence.

    result: {"entropy", "betas", "attention", "output"} as the page's sweep returns it.
    """
    entropy, betas = np.asarray(result["entropy"]), np.asarray(result["betas"])
    errors = result[metric]
    fig = line_figure(
        f"{metric.capitalize()} error against mean row entropy (equal budget {budget_label})",
        "mean row entropy H (nats)",
        f"relative {metric} error",
        log_y=log_y,
        height=460,
    )
    rows = []
    draws = result.get(f"{metric}_draws", {})
    for method in methods:
        spread = np.asarray(draws[method]) if method in draws and len(draws[method]) > 1 else None
        if spread is not None:  # the band the redraws of a randomised method span, behind its curve
            low, high = spread.min(axis=0), spread.max(axis=0)
            fig.add_scatter(
                x=np.concatenate([entropy, entropy[::-1]]),
                y=np.concatenate([high, low[::-1]]),
                fill="toself",
                fillcolor=_transparent(method_colour(method), 0.2),
                line={"width": 0},
                hoverinfo="skip",
                showlegend=False,
                legendgroup=method,
                name=f"{labels[method]}: {len(spread)} draws",
            )
        fig.add_scatter(
            x=entropy,
            y=errors[method],
            mode="lines+markers",
            legendgroup=method,
            name=labels[method],
            line={"color": method_colour(method), "dash": "dot" if families[method] == "oracle" else "solid"},
            customdata=np.stack([1 / betas, betas], axis=-1),
            hovertemplate="H %{x:.2f} nats<br>τ %{customdata[0]:.3g}, β %{customdata[1]:.3g}"
            "<br>error %{y:.4f}<extra>" + labels[method] + "</extra>",
        )
        for t, beta in enumerate(betas):
            rows.append(
                {
                    "method": method,
                    "tau": 1 / beta,
                    "beta": beta,
                    "entropy": entropy[t],
                    "attention_error": result["attention"][method][t],
                    "output_error": result["output"][method][t],
                    f"{metric}_error_min_over_draws": float(spread[:, t].min()) if spread is not None else None,
                    f"{metric}_error_max_over_draws": float(spread[:, t].max()) if spread is not None else None,
                }
            )
    if log_y:  # two labelled ticks at least, whatever the errors' span
        use_decades(fig, "y", [v for m in methods for v in np.ravel(errors[m])])
    text = crossover_text(entropy, errors, methods, labels, fig)
    fig.add_vline(
        x=current_entropy,
        line={"dash": "dot", "color": "#999"},
        annotation_text=f"sidebar τ = {tau:g}",
        annotation_position="bottom right",
    )
    fig.add_vline(
        x=float(np.log(n)),
        line={"color": "#ccc"},
        annotation_text="ln n (uniform rows)",
        annotation_position="top right",
    )
    return fig, pd.DataFrame(rows), text


def _transparent(colour: str, alpha: float) -> str:
    """``colour`` as ``rgba`` with ``alpha``."""
    r, g, b = (int(round(channel)) for channel in parse_colour(colour))
    return f"rgba({r}, {g}, {b}, {alpha})"


def crossover_text(
    entropy: np.ndarray,
    errors: Mapping[str, np.ndarray],
    methods: Sequence[str],
    labels: Mapping[str, str],
    fig: go.Figure | None = None,
) -> str:
    """The sentence under the sweep (and the dashed crossover line on ``fig`` when there is one)."""
    sparse, low_rank = compare.first_of_family(methods, "sparse"), compare.first_of_family(methods, "low-rank")
    if not (sparse and low_rank):
        return "Pick a sparse and a low-rank method to see their crossover."
    diff = np.asarray(errors[sparse]) - np.asarray(errors[low_rank])
    cross = compare.first_crossing(np.asarray(entropy).tolist(), diff.tolist())
    if cross is None:
        winner = sparse if float(np.mean(diff)) < 0 else low_rank
        return f"No crossover in this τ range: {labels[winner]} wins everywhere. Widen the temperature range."
    if fig is not None:
        fig.add_vline(
            x=cross,
            line={"dash": "dash", "color": "#444"},
            annotation_text=f"crossover H ≈ {cross:.2f}",
            annotation_position="top left",
        )
    return (
        f"{labels[sparse]} and {labels[low_rank]} cross at H ≈ {cross:.2f} nats: below it the sparse method wins, "
        "above it the low-rank one."
    )


def heads_scatter(table: pd.DataFrame, methods: Sequence[str], labels: Mapping[str, str], metric: str) -> go.Figure:
    """One point per head and method of the real model: error against the head's entropy."""
    fig = line_figure(
        f"{metric.capitalize()} error of each head against its entropy",
        "mean row entropy H (nats)",
        f"relative {metric} error",
        height=460,
    )
    for method in methods:
        part = table[table["method"] == method]
        fig.add_scatter(
            x=part["entropy"],
            y=part[f"{metric}_error"],
            mode="markers",
            name=labels[method],
            marker={"color": method_colour(method), "size": 7, "opacity": 0.8},
            customdata=np.stack([part["layer"], part["head"]], axis=-1),
            hovertemplate="layer %{customdata[0]}, head %{customdata[1]}<br>H %{x:.2f}<br>error "
            "%{y:.4f}<extra>" + labels[method] + "</extra>",
        )
    return fig
