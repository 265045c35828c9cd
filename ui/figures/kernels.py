"""Pure figure builders of the Kernels page: (data) -> go.Figure, no Streamlit. Log axes label decades."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from core import kernels as K
from core.kernel_study import AttentionStudy, RatioMap, TheoryCurve
from ui.figures.palette import OTHER
from ui.figures.rank_heads import base_figure, colour, finite_values, log_axis

# Performer's feature variants are not methods: colours no method has (ui/figures/palette.py).
VARIANT_COLOURS = {
    "positive iid": OTHER[0],
    "positive orthogonal": OTHER[3],
    "trig iid": OTHER[4],
    "trig orthogonal": OTHER[1],
}


def _positive(values: Any) -> list[float]:
    return [v for v in finite_values(values) if v > 0]


def kernel_mse(d: int, theory: Sequence[TheoryCurve], measured: Sequence[K.KernelMSECurve] | None = None) -> go.Figure:
    """Kernel MSE against m: measured points (when given), Lemma 2 (iid, dashed) and the ORF bound (dotted)."""
    true_value = theory[0].true_value if theory else math.nan
    fig = base_figure(
        f"Kernel MSE against m (d = {d}, exp(x·y) = {true_value:.3g})",
        "features m",
        "mean squared error",
        height=440,
        legend_y=-0.2,
    )
    values: list[float] = []
    for curve in measured or []:
        fig.add_scatter(
            x=curve.features,
            y=curve.measured,
            mode="markers",
            name=f"{curve.label} (measured)",
            marker={
                "color": VARIANT_COLOURS[curve.label],
                "size": 9,
                "symbol": "circle" if "iid" in curve.label else "diamond",
            },
        )
        values += _positive(curve.measured)
    for line in theory:
        if "iid" in line.label:
            fig.add_scatter(
                x=line.features,
                y=line.lemma2,
                mode="lines",
                name=f"{line.label.split()[0]}: Lemma 2",
                line={"color": VARIANT_COLOURS[line.label], "dash": "dash"},
            )
            values += _positive(line.lemma2)
        bounds = [(m, b) for m, b in zip(line.features, line.bound, strict=True) if b is not None and b > 0]
        if bounds:
            fig.add_scatter(
                x=[m for m, _ in bounds],
                y=[b for _, b in bounds],
                mode="lines",
                name="positive orthogonal: ORF bound",
                line={"color": VARIANT_COLOURS[line.label], "dash": "dot"},
            )
            values += _positive([b for _, b in bounds])
    log_axis(fig, "x", theory[0].features if theory else None)
    log_axis(fig, "y", values)
    return fig


def kernel_mse_table(measured: Sequence[K.KernelMSECurve]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"variant": c.label, "m": m, "measured_mse": a, "lemma2_iid_mse": b}
            for c in measured
            for m, a, b in zip(c.features, c.measured, c.theory, strict=True)
        ]
    )


def ratio_map(ratio: RatioMap, angle: float, length: float) -> go.Figure:
    """log10(MSE_trig / MSE_positive) over (angle, length), its ratio = 1 contour and the page's pair."""
    fig = go.Figure(
        go.Heatmap(
            x=ratio.angles,
            y=ratio.lengths,
            z=np.clip(ratio.log10_ratio, -8, 8),
            colorscale="RdBu_r",
            zmid=0,
            colorbar={"title": "log10 MSE_trig/MSE_pos"},
            hovertemplate="φ %{x:.2f} rad, l %{y:.2f}<br>log10 ratio %{z:.2f}<extra></extra>",
        )
    )
    fig.add_contour(
        x=ratio.angles,
        y=ratio.lengths,
        z=ratio.log10_ratio,
        contours={"start": 0, "end": 0, "size": 1, "coloring": "none"},
        line={"color": "black", "width": 2},
        showscale=False,
        name="ratio = 1",
        hoverinfo="skip",
    )
    fig.add_scatter(x=[angle], y=[length], mode="markers", marker={"color": "black", "size": 10}, name="this pair")
    fig.update_layout(
        height=380,
        template="plotly_white",
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        xaxis={"title": "angle φ (rad)"},
        yaxis={"title": "length l"},
        title={"text": "Red: positive features more accurate; blue: trig more accurate", "font": {"size": 14}},
    )
    return fig


def entry_error(bins: K.EntryErrorBins, features: int, tau: float) -> go.Figure:
    """Median relative error of the normalised attention by true entry size (category x axis)."""
    fig = base_figure(
        f"Relative error by true entry size (m = {features}, τ = {tau:g})",
        "true entry A × n",
        "median |Â − A| / A",
        height=420,
    )
    labels = bins.bin_labels()
    values: list[float] = []
    for label, medians in bins.medians.items():
        fig.add_scatter(x=labels, y=medians, mode="lines+markers", name=label, line={"color": VARIANT_COLOURS[label]})
        values += _positive(medians)
    fig.update_xaxes(type="category")
    log_axis(fig, "y", values)
    return fig


def entry_error_table(bins: K.EntryErrorBins) -> pd.DataFrame:
    labels = bins.bin_labels()
    return pd.DataFrame(
        [
            {"variant": v, "bin": b, "entries": c, "median_relative_error": m}
            for v, medians in bins.medians.items()
            for b, c, m in zip(labels, bins.counts, medians, strict=True)
        ]
    )


def trig_nonpositive(fraction: np.ndarray, features: Sequence[int], taus: Sequence[float], tau: float) -> go.Figure:
    """Share of rows with a trig normaliser <= 0 against the temperature, one line per m."""
    fig = base_figure("Rows with a trig normaliser ≤ 0", "temperature τ", "fraction of rows", height=400)
    for i, m in enumerate(features):
        fig.add_scatter(x=list(taus), y=fraction[i], mode="lines+markers", name=f"m = {m}", line={"color": colour(i)})
    fig.add_vline(x=tau, line={"dash": "dot", "color": "#999"})
    # Annotations on a log axis take log10 coordinates (add_vline's own annotation lands at the wrong place).
    fig.add_annotation(
        x=math.log10(tau), y=1, yref="paper", text=f"sidebar τ = {tau:g}", showarrow=False, xanchor="left"
    )
    log_axis(fig, "x", taus)
    return fig


def trig_nonpositive_table(fraction: np.ndarray, features: Sequence[int], taus: Sequence[float]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"m": m, "tau": t, "fraction": float(fraction[i, j])}
            for i, m in enumerate(features)
            for j, t in enumerate(taus)
        ]
    )


def attention_error(study: AttentionStudy, d: int, tau: float) -> go.Figure:
    """Mean row TV against m per variant (median line, 10–90% band) and ELU+1 at m = d."""
    fig = base_figure(f"Attention error against m (τ = {tau:g})", "features m", "mean row TV", height=440)
    ms = study.features
    values: list[float] = [study.elu_tv]
    for curve in study.curves:
        fill = VARIANT_COLOURS[curve.label]
        fig.add_scatter(
            x=ms + ms[::-1],
            y=list(curve.tv_high) + list(curve.tv_low)[::-1],
            fill="toself",
            line={"width": 0},
            fillcolor=fill,
            opacity=0.15,
            showlegend=False,
            hoverinfo="skip",
        )
        fig.add_scatter(x=ms, y=curve.tv_median, mode="lines+markers", name=curve.label, line={"color": fill})
        values += _positive([*curve.tv_low, *curve.tv_high])
    fig.add_scatter(
        x=[d],
        y=[study.elu_tv],
        mode="markers",
        name="ELU+1 linear (m = d)",
        marker={"symbol": "x", "size": 12, "color": "black"},
    )
    log_axis(fig, "x", [*ms, d])
    log_axis(fig, "y", values)
    return fig


def attention_error_table(study: AttentionStudy) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"variant": c.label, "m": m, "tv_median": a, "tv_p10": b, "tv_p90": e, "output_error_median": o}
            for c in study.curves
            for m, a, b, e, o in zip(
                study.features, c.tv_median, c.tv_low, c.tv_high, c.output_error_median, strict=True
            )
        ]
    )


def fitting_curve(curves: Mapping[str, Sequence[float]], rows: Sequence[Mapping[str, Any]]) -> go.Figure:
    """Training KL of each learned variant, with ELU+1 and the Performer as horizontal references."""
    fig = base_figure(
        "Fitting curve: row-wise KL(A ‖ Â) on this input", "Adam step", "mean row KL (nats)", height=400, legend_y=-0.3
    )
    values: list[float] = []
    for i, (variant, curve) in enumerate(curves.items()):
        fig.add_scatter(
            x=list(range(1, len(curve) + 1)),
            y=list(curve),
            mode="lines",
            name=f"learned {variant}",
            line={"color": colour(i)},
        )
        values += _positive(curve)
    ref = {str(row["method"]).split(" (")[0]: row for row in rows}
    span = [1, max((len(c) for c in curves.values()), default=1)]
    for name, line_colour in (("ELU+1 linear", "#111"), ("Performer", "#888")):
        if name in ref:
            # A trace rather than add_hline: Plotly misplaces hline annotations on log axes.
            fig.add_scatter(
                x=span,
                y=[ref[name]["kl"]] * 2,
                mode="lines",
                name=f"{name} (m = {ref[name]['features']}): {ref[name]['kl']:.3f}",
                line={"dash": "dash", "color": line_colour},
            )
            values += _positive([ref[name]["kl"]])
    log_axis(fig, "y", values)
    return fig


def comparison_bars(rows: Sequence[Mapping[str, Any]], features: int, heldout: bool) -> go.Figure:
    """Mean row TV of every method, on the fitted input and (``heldout``) on a fresh draw."""
    labels = [str(row["method"]).split(" (")[0] + f" (m={row['features']})" for row in rows]
    fig = base_figure(
        f"Mean row TV against softmax at m = {features} (lower is better)",
        "",
        "mean row TV",
        height=400,
        legend_y=-0.25,
    )
    fig.add_bar(x=labels, y=[row["tv"] for row in rows], name="on this input (fitted here)")
    if heldout:
        fig.add_bar(x=labels, y=[row["tv_heldout"] for row in rows], name="on a fresh draw (seed + 1)")
    fig.update_layout(barmode="group")
    return fig


def penalty_quality(penalties: Sequence[float], tv: Sequence[float]) -> go.Figure:
    fig = base_figure("Fit quality against λ (ff variant)", "λ", "mean row TV", height=360)
    fig.add_scatter(x=[str(p) for p in penalties], y=list(tv), mode="lines+markers", name="TV")
    fig.update_xaxes(type="category")
    return fig


def penalty_sweep_table(sweep: K.PenaltySweep) -> pd.DataFrame:
    return pd.DataFrame({"lambda": sweep.penalties, "tv": sweep.tv, "kl": sweep.kl})


def penalty_spectrum(penalties: Sequence[float], singular_values: Sequence[Sequence[float]]) -> go.Figure:
    fig = base_figure("Singular values of W (first head)", "index", "singular value", height=360)
    values: list[float] = []
    for i, (p, sv) in enumerate(zip(penalties, singular_values, strict=True)):
        fig.add_scatter(y=list(sv), mode="lines+markers", name=f"λ = {p}", line={"color": colour(i)})
        values += _positive(sv)
    log_axis(fig, "y", values)
    return fig


def paper_table1(paper: pd.DataFrame) -> go.Figure:
    fig = base_figure("Paper's Table 1 (reported, not reproduced)", "", "accuracy (%)", height=420, legend_y=-0.3)
    for i, task in enumerate(K.PAPER_TABLE1_COLUMNS[1:]):
        fig.add_bar(x=paper["Model"], y=paper[task], name=task, marker_color=colour(i))
    fig.update_layout(barmode="group")
    return fig
