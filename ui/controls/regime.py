"""The Regime map's controls: the method family, the (beta, sigma) grid, each method's knobs and the seed count."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import streamlit as st

import ui
from core import regime, sweeps

BETA_OPTIONS = [
    b for b in sorted({round(m * 10.0**e, 6) for e in range(-1, 3) for m in (1, 1.5, 2, 3, 5, 7)}) if 0.1 <= b <= 200
]
SIGMA_OPTIONS = [round(0.05 * i, 2) for i in range(0, 41)]
ORACLE_MAX_N = 256  # robust PCA is too slow above this


@dataclass(frozen=True)
class RegimeControls:
    roles: dict[str, str]  # role -> method
    params: dict[str, dict[str, Any]]  # method -> its knobs
    betas: np.ndarray
    spreads: np.ndarray
    seeds: int


def regime_controls(s: ui.Settings, real: bool = False) -> RegimeControls:
    """Draws the controls in three columns and the knobs' expander; stops the page when a method is missing.

    ``real``: the real model's heads are placed on the regime, so the clustered grid (β, σ, seeds) is not drawn.
    """
    c = st.columns([2, 2, 1])
    family = ui.choice(
        "Methods",
        "family",
        ["estimators", "oracles", "routed"],
        "estimators",
        where=c[2],
        widget="radio",
        help="estimators: LSH / Performer / Scatterbrain. oracles: top-k / SVD / RPCA, the best possible sparse, "
        "low-rank and sparse + low-rank matrices (RPCA is slow). routed: the estimators and MoBA, a routed-sparse "
        "method.",
    )
    if real:
        beta_range, beta_count, sigma_range, sigma_count = (1.0, 50.0), 8, (s.spec.spread, s.spec.spread), 1
    else:
        beta_range = ui.range_slider("β range (inverse temperature)", "betas", BETA_OPTIONS, (1.0, 50.0), where=c[0])
        beta_count = ui.int_slider("β values", "nb", 2, 16, 8, where=c[0])
        sigma_range = ui.range_slider(
            "σ range (cluster spread)",
            "sigmas",
            SIGMA_OPTIONS,
            (0.1, 1.0),
            where=c[1],
            log=False,
            fmt=lambda x: f"{x:g}",
        )
        sigma_count = ui.int_slider("σ values", "ns", 2, 12, 5, where=c[1])

    roles = dict({"estimators": sweeps.ESTIMATORS, "oracles": sweeps.ORACLES, "routed": sweeps.ROUTED}[family])
    missing = [m for m in roles.values() if m not in ui.registered_methods()]
    if family == "oracles" and s.n > ORACLE_MAX_N:
        ui.notice("**Oracles**: robust PCA is only run for n ≤ 256 here; showing the estimators instead.")
        roles = dict(sweeps.ESTIMATORS)
    if missing:
        st.error(f"These methods are not available yet: {', '.join(missing)}.")
        ui.finish()
        st.stop()

    params: dict[str, dict[str, Any]] = {}
    with st.expander("Method knobs", expanded=False):
        tabs = st.tabs([ui.method_label(m) for m in roles.values()])
        for tab, method in zip(tabs, roles.values(), strict=True):
            with tab:
                params[method] = ui.method_controls(s, method, where=tab)

    seeds = (
        1
        if real
        else ui.int_slider(
            "Seeds averaged",
            "seeds",
            1,
            regime.MAX_SEEDS,
            3,
            where=c[2],
            help="Each cell's errors are averaged over this many seeds (input and methods redrawn); cells whose winner "
            "leads by at most two standard errors are faded and crossed (×). Time grows with the count.",
        )
    )
    return RegimeControls(
        roles=roles,
        params=params,
        betas=regime.grid(beta_range[0], beta_range[1], beta_count, log=True),
        spreads=regime.grid(sigma_range[0], sigma_range[1], sigma_count, log=False),
        seeds=seeds,
    )
