"""Regime map: which family wins over (beta, sigma) on clustered inputs, and the gain of sparse + low rank."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

import ui
from core import limits, regime, sweeps
from ui import compute
from ui.figures import regime as figs

ui.page("Regime map", icon=":material/grid_on:")
s = ui.sidebar(sources=("clustered",), show_head=False, show_heads=False, defaults={"n": 256, "heads": 1})

ui.explain(
    "Clustered inputs have two knobs: β (how sharply a query prefers its own cluster) and σ (how tight the "
    "clusters are). Each cell below runs a sparse, a low-rank and a sparse + low-rank method at the same budget "
    "and colours the cell by the winner; the second panel shows how much sparse + low rank cuts the error of "
    "the better single method.",
    r"\text{gain} = \frac{\min(e_{\text{sparse}}, e_{\text{low rank}}) - e_{\text{S+L}}}"
    r"{\min(e_{\text{sparse}}, e_{\text{low rank}})}",
)

BETA_OPTIONS = [
    b for b in sorted({round(m * 10.0**e, 6) for e in range(-1, 3) for m in (1, 1.5, 2, 3, 5, 7)}) if 0.1 <= b <= 200
]
SIGMA_OPTIONS = [round(0.05 * i, 2) for i in range(0, 41)]
registered = ui.registered_methods()

c = st.columns([2, 2, 1])
family = ui.choice(
    "Methods",
    "family",
    ["estimators", "oracles"],
    "estimators",
    where=c[2],
    widget="radio",
    help="estimators: LSH / Performer / Scatterbrain. oracles: top-k / SVD / RPCA, the best possible sparse, "
    "low-rank and sparse + low-rank matrices (RPCA is slow).",
)
beta_range = ui.range_slider("β range (inverse temperature)", "betas", BETA_OPTIONS, (1.0, 50.0), where=c[0])
beta_count = ui.int_slider("β values", "nb", 2, 16, 8, where=c[0])
sigma_range = ui.range_slider(
    "σ range (cluster spread)", "sigmas", SIGMA_OPTIONS, (0.1, 1.0), where=c[1], log=False, fmt=lambda x: f"{x:g}"
)
sigma_count = ui.int_slider("σ values", "ns", 2, 12, 5, where=c[1])

roles = dict(sweeps.ESTIMATORS if family == "estimators" else sweeps.ORACLES)
missing = [m for m in roles.values() if m not in registered]
if family == "oracles" and s.n > 256:
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

seeds = ui.int_slider(
    "Seeds averaged",
    "seeds",
    1,
    regime.MAX_SEEDS,
    3,
    where=c[2],
    help="Each cell's errors are averaged over this many seeds (input and methods redrawn); cells whose winner "
    "leads by at most two standard errors are faded and crossed (×). Time grows with the count.",
)
betas = (
    np.geomspace(beta_range[0], beta_range[1], beta_count)
    if beta_range[1] > beta_range[0]
    else np.array([beta_range[0]])
)
spreads = (
    np.linspace(sigma_range[0], sigma_range[1], sigma_count)
    if sigma_range[1] > sigma_range[0]
    else np.array([sigma_range[0]])
)
if not ui.state.within_limits(
    lambda: limits.check(
        "n",
        s.n,
        limits.sizes_up_to(s.n),
        lambda n: limits.regime_estimate(params, n, s.d, len(betas), len(spreads), seeds),
    )
):
    ui.finish()
    st.stop()
status = st.status(f"Computing {len(betas) * len(spreads)} cells × {seeds} seed(s)…", expanded=False)
key_params = tuple((m, ui.params_key(p)) for m, p in params.items())
args = (s.n, s.d, s.spec.clusters, tuple(map(float, betas)), tuple(map(float, spreads)), tuple(roles.items()))
args += (s.fraction, s.seed, key_params, s.device_name, seeds)
try:
    work = len(betas) * len(spreads) * seeds * s.n**2 * (len(roles) + 1) * (20 if "rpca" in roles.values() else 1)
    res: regime.AveragedRegimeMap = ui.run_heavy(
        "regime_map",
        args,
        lambda report: regime.averaged_regime_map(
            n=s.n,
            d=s.d,
            clusters=s.spec.clusters,
            betas=list(args[3]),
            spreads=list(args[4]),
            seeds=seeds,
            methods=roles,
            fraction=s.fraction,
            seed=s.seed,
            method_params=params,
            device=compute.resolve(s.device_name),
            progress=report,
        ),
        ui.estimate_seconds(work),
        title="The regime map",
    )
except (ValueError, RuntimeError) as exc:
    status.update(label="The map failed", state="error")
    st.error(f"The regime map could not run with these settings: {exc}")
    ui.finish()
    st.stop()
status.update(label=f"Done: {len(betas)} × {len(spreads)} cells, {seeds} seed(s) each", state="complete")

stats, role_list, winner = res.stats, res.roles, res.winner
hover = figs.hover_text(
    betas, spreads, res.entropy, res.errors, stats.stderr, roles, res.gain, stats.within_noise, seeds
)
ln_n, ln_d = math.log(s.n), math.log(max(s.d, 2))
view = figs.MapView(betas, spreads, hover, [(ln_n / ln_d, "β ≈ ln n / ln d"), (ln_n, "β ≈ ln n")])
view.star = (1 / s.tau, s.spec.spread)
table = pd.DataFrame(res.rows())
left, right = st.columns(2)
with left:
    ui.show_figure(
        figs.winner_figure(view, role_list, winner, stats.within_noise, seeds),
        "regime_winner",
        data=table,
        key="winner",
    )
with right:
    ui.show_figure(figs.gain_figure(view, res.gain), "regime_gain", data=table, key="gain")

counts = {figs.ROLE_NAMES[r]: int((winner == k).sum()) for k, r in enumerate(role_list)}
m = st.columns(len(counts) + 2)
for col, (name, count) in zip(m, counts.items(), strict=False):
    col.metric(f"cells won by {name}", count)
m[-2].metric("best gain of S+L", f"{100 * float(np.max(res.gain)):.0f}%")
m[-1].metric(
    "winner within noise",
    f"{int(stats.within_noise.sum())} of {winner.size} cells",
    help=f"Lead over the second-best method ≤ 2 standard errors across the {seeds} seed(s).",
)
st.caption(
    f"**Averaged over {seeds} seed(s)** ({s.seed} … {s.seed + seeds - 1}: each redraws the input and the "
    "methods' randomness). Faded cells with ×: the winner's mean lead over the second-best method is at most two "
    "standard errors of that lead across seeds, so another draw could change the winner."
)

st.subheader("Theorem 1's three regimes")
ui.explain(
    "The paper proves (for Process 1, as n grows) that at high temperature, β below about ln n / ln d, a "
    "low-rank matrix with few parameters is accurate and any sparse one is not; at low temperature, β above "
    "about ln n, a sparse matrix with O(n) entries is accurate and low rank is not; in between, only sparse + "
    "low rank is accurate with n^{1+o(1)} parameters. The dashed lines mark ln n / ln d and ln n for this n "
    "and d; the theorem fixes them only up to constants, so read them as where to look, not as exact borders.",
    r"\beta = o\!\left(\tfrac{\ln n}{\ln d}\right):\ \text{low rank}\qquad \beta = \Theta(\ln n):\ "
    r"\text{sparse + low rank}\qquad \beta = \Omega(\ln n):\ \text{sparse}",
)
st.caption(
    f"n = {s.n}, d = {s.d}, {s.spec.clusters} clusters, seeds {s.seed}–{s.seed + seeds - 1}, "
    f"budget {ui.fmt_fraction(s.fraction)}; "
    f"ln n / ln d = {ln_n / ln_d:.2f}, ln n = {ln_n:.2f}. The star marks the sidebar's β = 1/τ and σ."
)
with st.expander("Numbers behind the maps"):
    st.dataframe(table, hide_index=True, width="stretch")

ui.finish()
