"""The Regime map's result sections: the two maps, the cell counts and Theorem 1's three regimes."""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import streamlit as st

import service.views
import ui
from core import real_heads, regime
from ui import sweep_runs as runs
from ui.figures import regime as figs
from ui.url_params import keep_presenter

THEOREM_TEXT = (
    "The paper proves (for Process 1, as n grows) that at high temperature, β below about ln n / ln d, a low-rank "
    "matrix with few parameters is accurate and any sparse one is not; at low temperature, β above about ln n, a "
    "sparse matrix with O(n) entries is accurate and low rank is not; in between, only sparse + low rank is "
    "accurate with n^{1+o(1)} parameters. The dashed lines mark ln n / ln d and ln n for this n and d; the theorem "
    "fixes them only up to constants, so read them as where to look, not as exact borders."
)
THEOREM_LATEX = (
    r"\beta = o\!\left(\tfrac{\ln n}{\ln d}\right):\ \text{low rank}\qquad \beta = \Theta(\ln n):\ "
    r"\text{sparse + low rank}\qquad \beta = \Omega(\ln n):\ \text{sparse}"
)


ESTIMATORS_NOTE = (
    "**Estimators** (LSH, Performer, Scatterbrain) at equal budget. Red gain cells are where Scatterbrain's "
    "sparse + low-rank estimate is worse than the better single method: splitting one budget leaves each part "
    "fewer buckets or features, and both parts' sampling noise adds up. The gain the paper's Fig. 1 shows is for "
    "the best possible matrices: choose **oracles** under Methods (top-k, SVD, robust PCA) to see it; robust PCA "
    "is slow, so lower n (e.g. 64) or the seed count if the server's limits refuse it."
)
ORACLES_NOTE = (
    "**Oracles** (top-k, SVD, robust PCA): the best sparse, low-rank and sparse + low-rank matrices at this budget, "
    "as in the paper's Fig. 1. Blue gain cells are where the best split beats both single families; choose "
    "**estimators** under Methods for what LSH, Performer and Scatterbrain reach at the same budget."
)


ROUTED_NOTE = (
    "**Routed** (LSH, MoBA, Performer, Scatterbrain): the estimators with MoBA, a routed-sparse method (each query "
    "scores key blocks by q · mean(K) and keeps the top k, where LSH hashes q and k into buckets), at the same "
    "budget. Where MoBA wins, picking blocks by score found the large entries that hashing missed; the gain map "
    "still compares Scatterbrain with the better of LSH and Performer."
)


def family_note(res: regime.AveragedRegimeMap) -> str:
    """What the maps show for the chosen family, and what its red gain cells mean."""
    if "routed_sparse" in res.methods:
        return ROUTED_NOTE
    return ORACLES_NOTE if "rpca" in res.methods.values() else ESTIMATORS_NOTE


def draw_maps(res: regime.AveragedRegimeMap, view: figs.MapView, table: pd.DataFrame, seeds: int) -> None:
    """The winner map and the gain map side by side, under a line on what the chosen family shows."""
    st.info(family_note(res), icon=":material/info:")
    left, right = st.columns(2)
    with left:
        ui.show_figure(
            figs.winner_figure(view, res.roles, res.winner, res.stats.within_noise, seeds),
            "regime_winner",
            data=table,
            key="winner",
        )
    with right:
        ui.show_figure(figs.gain_figure(view, res.gain), "regime_gain", data=table, key="gain")


def draw_summary(res: regime.AveragedRegimeMap, seeds: int, first_seed: int) -> None:
    """Cells won per role, the best gain and how many winners are within the seeds' noise."""
    # Headline numbers from the cells outside the seeds' noise only (a faded × cell could flip with another draw).
    counts = {figs.ROLE_NAMES[role]: count for role, count in res.clear_win_counts().items()}
    every = {figs.ROLE_NAMES[role]: count for role, count in res.win_counts().items()}
    m = st.columns(len(counts) + 2)
    for col, (name, count) in zip(m, counts.items(), strict=False):
        col.metric(
            f"cells won by {name}",
            count,
            help=f"Won by more than the seeds' noise; {every[name] - count} more cell(s) within it.",
        )
    gain = res.best_clear_gain()
    m[-2].metric(
        "best gain of S+L",
        "–" if gain is None else f"{100 * gain:.0f}%",
        help="Over the cells whose winner is outside the seeds' noise.",
    )
    m[-1].metric(
        "winner within noise",
        f"{int(res.stats.within_noise.sum())} / {res.winner.size}",  # "19 of 40 cells" was cut off at 1400 px
        help=f"Cells whose winner leads the second-best method by ≤ 2 standard errors across the {seeds} seed(s), "
        f"out of all {res.winner.size} cells.",
    )
    st.caption(
        f"**Averaged over {seeds} seed(s)** ({first_seed} … {first_seed + seeds - 1}: each redraws the input and "
        "the methods' randomness). Faded cells with ×: the winner's mean lead over the second-best method is at "
        "most two standard errors of that lead across seeds, so another draw could change the winner."
    )


def draw_theorem(s: ui.Settings, seeds: int, boundaries: tuple[float, float]) -> None:
    """Theorem 1's regimes and where its boundaries fall for the sidebar's n and d."""
    low, high = boundaries
    st.subheader("Theorem 1's three regimes")
    ui.explain(THEOREM_TEXT, THEOREM_LATEX)
    st.caption(
        f"n = {s.n}, d = {s.d}, {s.spec.clusters} clusters, seeds {s.seed}–{s.seed + seeds - 1}, "
        f"budget {ui.fmt_fraction(s.fraction)}; "
        f"ln n / ln d = {low:.2f}, ln n = {high:.2f}. The star marks the sidebar's β = 1/τ and σ."
    )


@dataclass
class RealHeadsRegime:
    """Every real head with its winner and fitted β, the per-method table behind it and the methods refused."""

    table: pd.DataFrame  # (method, layer, head, entropy, attention_error, output_error)
    heads: pd.DataFrame  # core.real_heads.place_heads
    refused: list[tuple[str, str]]


def real_heads_regime(
    s: ui.Settings, roles: Mapping[str, str], params: dict[str, dict[str, Any]], metric: str
) -> RealHeadsRegime:
    """All heads of the real model run with the roles' methods (cached per layer and method), placed on the regime."""
    progress = st.progress(0.0, text="Running every layer…")
    layers = len(runs.heads_layers(s))
    table, refused = runs.real_heads_table(
        s,
        list(roles.values()),
        params,
        lambda layer: progress.progress(min(1.0, (layer + 1) / layers), text=f"layer {layer + 1} of {layers} done"),
    )
    progress.empty()
    curve_view = service.views.ClusteredEntropyCurve(
        n=s.n, d=s.d, clusters=min(s.spec.clusters, s.n), spread=s.spec.spread, seed=s.seed
    )
    betas, curve = service.views.run(curve_view, ui.estimate_seconds(real_heads.GRID_POINTS * s.n**2))
    if refused or table.empty:
        return RealHeadsRegime(table, pd.DataFrame(), refused)
    return RealHeadsRegime(table, real_heads.place_heads(table, roles, betas, curve, metric), refused)


def compare_link(s: ui.Settings, layer: int, head: int, methods: Sequence[str]) -> str:
    """The Compare page on the real input at this head, with the sidebar's τ and budget and the given methods."""
    source = [("input", "upload"), ("upload", s.spec.upload)] if s.spec.source == "upload" else [("input", "real")]
    pairs = [
        *source,
        ("layer", str(layer)),
        ("head", str(head)),
        ("tau", f"{s.tau:g}"),
        ("budget", f"{s.fraction:g}"),
    ] + [("methods", m) for m in methods]
    return keep_presenter("./Compare?" + urllib.parse.urlencode(pairs, safe=",/"))


def draw_real_heads(s: ui.Settings, res: RealHeadsRegime, roles: Mapping[str, str], metric: str) -> None:
    """The heads on the regime's β axis, the heads won per family, the Spearman correlations and a link per head."""
    for method, message in res.refused:
        ui.notice(f"**{ui.method_label(method)}**: {message}")
    if res.heads.empty:
        st.info("No head could be run with these methods.")
        return
    low, high = regime.theorem_boundaries(s.n, s.d)
    fitted = res.heads["fitted_beta"].dropna()
    beta_range = (
        min(1.0, float(fitted.min()) if len(fitted) else 1.0),
        max(50.0, float(fitted.max()) if len(fitted) else 50.0),
    )
    fig = figs.heads_on_regime_figure(
        res.heads,
        roles,
        [(low, "β ≈ ln n / ln d"), (high, "β ≈ ln n")],
        beta_range,
        ui.fmt_fraction(s.fraction),
    )
    ui.show_figure(fig, "regime_real_heads", data=res.heads, key="real_heads")
    counts = real_heads.win_counts(res.heads, list(roles))
    cols = st.columns(len(counts) + 1)
    for col, (role, count) in zip(cols, counts.items(), strict=False):
        col.metric(f"heads won by {figs.ROLE_NAMES[role]}", f"{count} / {len(res.heads)}")
    cols[-1].metric(
        "heads without a fitted β",
        int(res.heads["fitted_beta"].isna().sum()),
        help="Their entropy lies outside the clustered input's entropy range over β in [0.01, 1000] "
        f"(n = {s.n}, d = {s.d}, {s.spec.clusters} clusters, σ = {s.spec.spread:g}); drawn as × at the edge.",
    )
    st.caption(
        f"Winner: the lowest {metric} error of the three methods on each head at budget "
        f"{ui.fmt_fraction(s.fraction)}, τ = {s.tau:g}. Fitted β: the β at which a clustered Process-1 input "
        f"(n = {s.n}, d = {s.d}, {s.spec.clusters} clusters, σ = {s.spec.spread:g}, seed {s.seed}) has the head's "
        "mean row entropy. Dashed lines: Theorem 1's scales for this n and d."
    )
    rows = []
    for metric_name in ("attention", "output"):
        corr = real_heads.entropy_correlations(res.table, metric_name)
        rows += [
            {"method": ui.method_label(m), "error": metric_name, "Spearman ρ with head entropy": round(v, 3)}
            for m, v in corr.items()
        ]
    st.markdown("**Does a method's error rise or fall with the head's entropy?** (Spearman ρ over the heads)")
    st.dataframe(pd.DataFrame(rows), hide_index=True)
    links = res.heads.assign(
        open=[compare_link(s, int(r.layer), int(r.head), list(roles.values())) for r in res.heads.itertuples()],
        winner=[figs.ROLE_NAMES[w] for w in res.heads["winner"]],
    )
    st.markdown("**Open a head on Compare** (the chart reports no clicks; each row links to that head):")
    st.dataframe(
        links[["layer", "head", "entropy", "fitted_beta", "winner", *[f"error_{r}" for r in roles], "open"]],
        hide_index=True,
        column_config={"open": st.column_config.LinkColumn("Compare", display_text="open on Compare")},
        height=320,
    )
