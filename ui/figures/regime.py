"""Pure figure builders for the Regime map page: the winner map (cells within noise faded and crossed) and the gain map.

The beta axis is drawn in log10 units (evenly spaced cells), with ticks at 1-2-5 steps (decades only over
wider ranges), labelled with beta itself.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ui.figures.palette import family_colour

ROLE_NAMES = {
    "sparse": "sparse",
    "routed_sparse": "routed sparse",
    "low_rank": "low rank",
    "sparse_low_rank": "sparse + low rank",
}
# The families' colours (ui/figures/palette.py): "sparse wins" is LSH's orange here as on every page.
ROLE_COLOURS = {
    "sparse": family_colour("sparse"),
    "routed_sparse": family_colour("routed-sparse"),
    "low_rank": family_colour("low-rank"),
    "sparse_low_rank": family_colour("sparse+low-rank"),
}
NOISE_COLOUR = "#404040"
BOUNDARY_DASHES = ("dash", "dot")
HEIGHT = 520


@dataclass
class MapView:
    """What both maps share: the grid, hover text, the theory's boundaries and the sidebar's point."""

    betas: np.ndarray  # (T,)
    spreads: np.ndarray  # (S,)
    hover: np.ndarray  # (S, T) of str
    boundaries: Sequence[tuple[float, str]]  # (beta, label) dashed lines
    star: tuple[float, float] | None = None  # the sidebar's (beta, sigma)


def beta_ticks(betas: Sequence[float] | np.ndarray) -> tuple[list[float], list[str]]:
    """Tick positions (log10 beta) and labels: 1, 2, 5 per decade, or decades only over more than 2 decades."""
    lo, hi = float(min(betas)), float(max(betas))
    steps = (1, 2, 5) if math.log10(hi / lo) <= 2 else (1,)
    values = [m * 10.0**e for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1) for m in steps]
    values = [v for v in values if lo * (1 - 1e-9) <= v <= hi * (1 + 1e-9)]
    if len(values) < 2:  # a narrow range: label its ends
        values = sorted({lo, hi})
    return [math.log10(v) for v in values], [f"{v:g}" for v in values]


def hover_text(
    betas: Sequence[float],
    spreads: Sequence[float],
    entropy: np.ndarray,
    errors: Mapping[str, np.ndarray],
    stderr: Mapping[str, np.ndarray],
    methods: Mapping[str, str],
    gain: np.ndarray,
    within_noise: np.ndarray,
    seeds: int,
) -> np.ndarray:
    """(S, T) hover strings: the cell, its entropy, each role's mean error ± standard error, the gain."""
    out = np.empty(gain.shape, dtype=object)
    for i, sigma in enumerate(spreads):
        for j, beta in enumerate(betas):
            parts = [f"β = {beta:.3g}, σ = {sigma:.2f}", f"entropy {entropy[i, j]:.2f} nats"]
            for role, method in methods.items():
                se = stderr[role][i, j]
                spread = f" ± {se:.4f}" if seeds > 1 and np.isfinite(se) else ""
                parts.append(f"{ROLE_NAMES[role]} ({method}): {errors[role][i, j]:.4f}{spread}")
            parts.append(f"gain of S+L: {100 * gain[i, j]:.1f}%")
            if within_noise[i, j]:
                parts.append(f"winner within noise over {seeds} seed(s)")
            out[i, j] = "<br>".join(parts)
    return out


def _frame(fig: go.Figure, view: MapView, title: str) -> go.Figure:
    x = np.log10(view.betas)
    tickvals, ticktext = beta_ticks(view.betas)
    # The theory's boundaries are dashed lines named in the legend (never text in the plot, which collides
    # with the other line or the cells in a narrow column).
    lo, hi = float(view.spreads.min()), float(view.spreads.max())
    pad = _half_step(np.asarray(view.spreads, dtype=float))
    for index, (beta, label) in enumerate(view.boundaries):
        if view.betas.min() <= beta <= view.betas.max():
            fig.add_scatter(
                x=[math.log10(beta)] * 2,
                y=[lo - pad, hi + pad],
                mode="lines",
                line={"dash": BOUNDARY_DASHES[index % len(BOUNDARY_DASHES)], "color": "#222", "width": 2},
                name=f"{label} = {beta:.2f}",
                hoverinfo="skip",
            )
    if view.star is not None:
        beta, sigma = view.star
        fig.add_scatter(
            x=[math.log10(beta)],
            y=[sigma],
            mode="markers",
            name="sidebar (β, σ)",
            marker={"symbol": "star", "size": 14, "color": "white", "line": {"color": "black", "width": 1}},
            hovertemplate=f"sidebar: β {beta:.3g}, σ {sigma:.2f}<extra></extra>",
        )
    fig.update_xaxes(
        tickvals=tickvals,
        ticktext=ticktext,
        title="β = 1/τ (log scale)",
        range=[x.min() - _half_step(x), x.max() + _half_step(x)],
    )
    spreads = np.asarray(view.spreads, dtype=float)
    fig.update_yaxes(range=[spreads.min() - _half_step(spreads), spreads.max() + _half_step(spreads)])
    fig.update_layout(
        title={"text": title, "font": {"size": 14}},
        yaxis={"title": "cluster spread σ"},
        height=HEIGHT,
        template="plotly_white",
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
        showlegend=True,
        legend={"orientation": "h", "yanchor": "top", "y": -0.16, "x": 0, "font": {"size": 11}},
    )
    return fig


def _half_step(x: np.ndarray) -> float:
    return float(np.min(np.diff(np.sort(x)))) / 2 if len(x) > 1 else 0.5


def winner_figure(
    view: MapView, roles: Sequence[str], winner: np.ndarray, within_noise: np.ndarray, seeds: int
) -> go.Figure:
    """Cells coloured by the winning role; cells whose winner leads by at most 2 standard errors faded and crossed."""
    discrete: list[list[float | str]] = []
    for index, role in enumerate(roles):
        lo, hi = index / len(roles), (index + 1) / len(roles)
        discrete += [[lo, ROLE_COLOURS[role]], [hi, ROLE_COLOURS[role]]]
    x = np.log10(view.betas)
    fig = go.Figure(
        go.Heatmap(
            z=winner,
            x=x,
            y=view.spreads,
            colorscale=discrete,
            zmin=-0.5,
            zmax=len(roles) - 0.5,
            text=view.hover,
            hovertemplate="%{text}<extra></extra>",
            showlegend=False,
            colorbar={
                "tickvals": list(range(len(roles))),
                "ticktext": [ROLE_NAMES[r] for r in roles],
                "title": "winner",
            },
        )
    )
    # Cells whose winner is within noise: faded (a white veil) and crossed, so the winner colour stays legible.
    fig.add_heatmap(
        z=np.where(within_noise, 1.0, np.nan),
        x=x,
        y=view.spreads,
        colorscale=[[0, "white"], [1, "white"]],
        opacity=0.5,
        showscale=False,
        hoverinfo="skip",
        showlegend=False,
        name="within noise",
    )
    rows, cols = np.nonzero(within_noise)
    size = max(5.0, min(11.0, 100 / max(winner.shape)))  # crosses shrink with the cells so they stay apart
    fig.add_scatter(
        x=x[cols],
        y=view.spreads[rows],
        mode="markers",
        marker={"symbol": "x-thin", "size": size, "line": {"width": 2, "color": NOISE_COLOUR}, "color": NOISE_COLOUR},
        hoverinfo="skip",
        name=f"winner within noise (lead ≤ 2 SE, {seeds} seeds)"
        if seeds > 1
        else "exact tie (1 seed: no noise estimate)",
        showlegend=True,
    )
    return _frame(fig, view, "Which method wins")


def gain_figure(view: MapView, gain: np.ndarray) -> go.Figure:
    """Per cent of the better single method's error that sparse + low rank removes (clipped to ±100%)."""
    fig = go.Figure(
        go.Heatmap(
            z=100 * np.clip(gain, -1, 1),
            x=np.log10(view.betas),
            y=view.spreads,
            colorscale="RdBu",
            zmid=0,
            zmin=-100,
            zmax=100,
            text=view.hover,
            hovertemplate="%{text}<extra></extra>",
            colorbar={"title": "gain %"},
            showlegend=False,
        )
    )
    return _frame(fig, view, "Error cut by sparse + low rank vs the better single method")


def heads_on_regime_figure(
    heads: pd.DataFrame,
    methods: Mapping[str, str],
    boundaries: Sequence[tuple[float, str]],
    beta_range: tuple[float, float],
    fraction_label: str,
) -> go.Figure:
    """Every real head at its fitted β (log x) and layer (y, heads spread within the row), coloured by its winner.

    ``heads``: rows (layer, head, entropy, fitted_beta, winner, error_<role>...) as ``core.real_heads`` builds.
    Heads without a fitted β are drawn as crosses at the grid's edge nearest their entropy side.
    """
    fig = go.Figure()
    lo, hi = beta_range
    edge = {True: math.log10(lo), False: math.log10(hi)}
    median_entropy = float(heads["entropy"].median()) if len(heads) else 0.0
    head_count = max(1, int(heads["head"].max()) + 1) if len(heads) else 1
    for role, name in ROLE_NAMES.items():
        part = heads[heads["winner"] == role]
        if part.empty:
            continue
        fitted = part["fitted_beta"].notna().to_numpy()
        x = np.where(
            fitted,
            np.log10(part["fitted_beta"].fillna(1.0).clip(lower=1e-12)),
            [edge[h >= median_entropy] for h in part["entropy"]],
        )
        y = part["layer"].to_numpy() + (part["head"].to_numpy() - (head_count - 1) / 2) / (head_count + 2)
        hover = [
            f"layer {int(r.layer)}, head {int(r.head)}<br>entropy {r.entropy:.2f} nats<br>"
            + (
                f"fitted β {r.fitted_beta:.3g}"
                if np.isfinite(r.fitted_beta)
                else "no fitted β: entropy outside the clustered input's range"
            )
            + "".join(f"<br>{ROLE_NAMES[k]} ({m}): {getattr(r, f'error_{k}'):.4f}" for k, m in methods.items())
            + f"<br><b>winner: {name}</b>"
            for r in part.itertuples()
        ]
        fig.add_scatter(
            x=x,
            y=y,
            mode="markers",
            name=f"{name} wins ({len(part)})",
            marker={
                "color": ROLE_COLOURS[role],
                "size": 13,
                "symbol": np.where(fitted, "circle", "x").tolist(),
                "line": {"color": "#222", "width": 1},
            },
            hovertext=hover,
            hoverinfo="text",
        )
    for index, (beta, label) in enumerate(boundaries):
        fig.add_vline(
            x=math.log10(beta),
            line={"dash": BOUNDARY_DASHES[index % len(BOUNDARY_DASHES)], "color": "#222", "width": 2},
        )
        fig.add_scatter(
            x=[None],
            y=[None],
            mode="lines",
            line={"dash": BOUNDARY_DASHES[index % len(BOUNDARY_DASHES)], "color": "#222", "width": 2},
            name=f"{label} = {beta:.2f}",
        )
    tickvals, ticktext = beta_ticks([lo, hi])
    layers = sorted({int(v) for v in heads["layer"]}) if len(heads) else [0]
    fig.update_xaxes(
        tickvals=tickvals,
        ticktext=ticktext,
        title="fitted β: the clustered input's β with the head's entropy (log scale)",
        range=[math.log10(lo) - 0.1, math.log10(hi) + 0.1],
        title_font={"size": 16},
        tickfont={"size": 14},
    )
    fig.update_yaxes(
        tickvals=layers,
        ticktext=[f"layer {k}" for k in layers],
        range=[min(layers) - 0.6, max(layers) + 0.6],
        autorange="reversed",
        tickfont={"size": 14},
    )
    fig.update_layout(
        title={
            "text": f"Each real head on the regime's β axis, coloured by the family that wins it at "
            f"budget {fraction_label}",
            "font": {"size": 16},
        },
        height=HEIGHT,
        template="plotly_white",
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
        legend={"orientation": "h", "yanchor": "top", "y": -0.16, "x": 0, "font": {"size": 14}},
    )
    return fig


def add_winner_rings(fig: go.Figure, heads: pd.DataFrame, metric_column_of: Mapping[str, str]) -> go.Figure:
    """Rings in the winning family's colour around each head's winning error (entropy on x), one trace per family.

    ``metric_column_of``: role -> the column in ``heads`` holding that role's error on the chart's y axis.
    """
    for role, name in ROLE_NAMES.items():
        part = heads[heads["winner"] == role]
        if part.empty:
            continue
        fig.add_scatter(
            x=part["entropy"],
            y=part[metric_column_of[role]],
            mode="markers",
            name=f"{name} wins ({len(part)} heads)",
            marker={"symbol": "circle-open", "size": 15, "color": ROLE_COLOURS[role], "line": {"width": 2.5}},
            hoverinfo="skip",
        )
    return fig
