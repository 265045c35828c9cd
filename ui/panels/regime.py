"""The Regime map's result sections: the two maps, the cell counts and Theorem 1's three regimes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

import ui
from core import regime
from ui.figures import regime as figs

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


def family_note(res: regime.AveragedRegimeMap) -> str:
    """What the maps show for the chosen family, and what its red gain cells mean."""
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
    counts = {figs.ROLE_NAMES[role]: count for role, count in res.win_counts().items()}
    m = st.columns(len(counts) + 2)
    for col, (name, count) in zip(m, counts.items(), strict=False):
        col.metric(f"cells won by {name}", count)
    m[-2].metric("best gain of S+L", f"{100 * float(np.max(res.gain)):.0f}%")
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
