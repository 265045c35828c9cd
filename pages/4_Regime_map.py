"""Regime map: which family wins over (beta, sigma) on clustered inputs, and the gain of sparse + low rank."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

import ui
from core import limits, sweeps
from ui import compute

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


def regime(
    n: int,
    d: int,
    clusters: int,
    betas: tuple[float, ...],
    spreads: tuple[float, ...],
    roles: tuple[tuple[str, str], ...],
    fraction: float,
    seed: int,
    params: tuple,
    device_name: str,
    _progress: Any = None,
) -> dict[str, Any]:
    result = sweeps.regime_map(
        n=n,
        d=d,
        clusters=clusters,
        betas=list(betas),
        spreads=list(spreads),
        methods=dict(roles),
        fraction=fraction,
        seed=seed,
        method_params={m: compute._params_dict(p) for m, p in params},
        device=compute.resolve(device_name),
        progress=_progress,
    )
    return {
        "errors": result.errors,
        "entropy": result.entropy,
        "winner": result.winner,
        "gain": result.gain,
        "roles": result.roles,
    }


if not ui.state.within_limits(
    lambda: limits.check(
        "n",
        s.n,
        limits.sizes_up_to(s.n),
        lambda n: limits.sweep_estimate(params, n, s.d, 1, len(betas), rows=len(spreads)),
    )
):
    ui.finish()
    st.stop()
status = st.status(f"Computing {len(betas) * len(spreads)} cells…", expanded=False)
try:
    args = (
        s.n,
        s.d,
        s.spec.clusters,
        tuple(float(b) for b in betas),
        tuple(float(x) for x in spreads),
        tuple(roles.items()),
        s.fraction,
        s.seed,
        tuple((m, ui.params_key(p)) for m, p in params.items()),
        s.device_name,
    )
    work = len(betas) * len(spreads) * s.n**2 * (len(roles) + 1) * (20 if "rpca" in roles.values() else 1)
    res = ui.run_heavy(
        "regime_map",
        args,
        lambda report: regime(*args, _progress=report),
        ui.estimate_seconds(work),
        title="The regime map",
    )
except (ValueError, RuntimeError) as exc:
    status.update(label="The map failed", state="error")
    st.error(f"The regime map could not run with these settings: {exc}")
    ui.finish()
    st.stop()
status.update(label=f"Done: {len(betas)} × {len(spreads)} cells", state="complete")

ROLE_NAMES = {"sparse": "sparse", "low_rank": "low rank", "sparse_low_rank": "sparse + low rank"}
ROLE_COLOURS = {"sparse": "#E69F00", "low_rank": "#56B4E9", "sparse_low_rank": "#009E73"}
role_list = list(res["roles"])
winner = res["winner"]
errors = res["errors"]
hover = np.empty(winner.shape, dtype=object)
for i in range(winner.shape[0]):
    for j in range(winner.shape[1]):
        parts = [f"β = {betas[j]:.3g}, σ = {spreads[i]:.2f}", f"entropy {res['entropy'][i, j]:.2f} nats"]
        parts += [f"{ROLE_NAMES[r]} ({roles[r]}): {errors[r][i, j]:.4f}" for r in role_list]
        parts.append(f"gain of S+L: {100 * res['gain'][i, j]:.1f}%")
        hover[i, j] = "<br>".join(parts)

ln_n, ln_d = math.log(s.n), math.log(max(s.d, 2))
boundaries = [(ln_n / ln_d, "β ≈ ln n / ln d"), (ln_n, "β ≈ ln n")]


# The beta axis is drawn in log10 units (evenly spaced cells), labelled with beta itself.
log_betas = np.log10(betas)
tick_text = [f"{b:.3g}" for b in betas]


def annotate(fig: go.Figure) -> None:
    for x, label in boundaries:
        if betas.min() <= x <= betas.max():
            fig.add_vline(
                x=math.log10(x),
                line={"dash": "dash", "color": "#333"},
                annotation_text=label,
                annotation_position="bottom right",
            )
    fig.update_xaxes(tickvals=log_betas, ticktext=tick_text, title="β = 1/τ (log scale)")
    fig.add_scatter(
        x=[math.log10(1 / s.tau)],
        y=[s.spec.spread],
        mode="markers",
        name="sidebar (β, σ)",
        marker={"symbol": "star", "size": 14, "color": "white", "line": {"color": "black", "width": 1}},
        hovertemplate=f"sidebar: β {1 / s.tau:.3g}, σ {s.spec.spread:.2f}<extra></extra>",
    )


discrete = []
for index, role in enumerate(role_list):
    lo, hi = index / len(role_list), (index + 1) / len(role_list)
    discrete += [[lo, ROLE_COLOURS[role]], [hi, ROLE_COLOURS[role]]]
win_fig = go.Figure(
    go.Heatmap(
        z=winner,
        x=log_betas,
        y=spreads,
        colorscale=discrete,
        zmin=-0.5,
        zmax=len(role_list) - 0.5,
        text=hover,
        hovertemplate="%{text}<extra></extra>",
        colorbar={
            "tickvals": list(range(len(role_list))),
            "ticktext": [ROLE_NAMES[r] for r in role_list],
            "title": "winner",
        },
    )
)
win_fig.update_layout(
    title="Which method wins",
    yaxis={"title": "cluster spread σ"},
    height=430,
    template="plotly_white",
    margin={"l": 10, "r": 10, "t": 40, "b": 10},
    showlegend=False,
)
annotate(win_fig)

gain = np.clip(res["gain"], -1, 1)
gain_fig = go.Figure(
    go.Heatmap(
        z=100 * gain,
        x=log_betas,
        y=spreads,
        colorscale="RdBu",
        zmid=0,
        zmin=-100,
        zmax=100,
        text=hover,
        hovertemplate="%{text}<extra></extra>",
        colorbar={"title": "gain %"},
    )
)
gain_fig.update_layout(
    title="Error cut by sparse + low rank vs the better single method",
    yaxis={"title": "cluster spread σ"},
    height=430,
    template="plotly_white",
    margin={"l": 10, "r": 10, "t": 40, "b": 10},
    showlegend=False,
)
annotate(gain_fig)

rows = []
for i, sigma in enumerate(spreads):
    for j, beta in enumerate(betas):
        row = {
            "beta": beta,
            "sigma": sigma,
            "entropy": res["entropy"][i, j],
            "winner": role_list[winner[i, j]],
            "gain": res["gain"][i, j],
        }
        row.update({f"error_{r}": errors[r][i, j] for r in role_list})
        rows.append(row)
table = pd.DataFrame(rows)

left, right = st.columns(2)
with left:
    ui.show_figure(win_fig, "regime_winner", data=table, key="winner")
with right:
    ui.show_figure(gain_fig, "regime_gain", data=table, key="gain")

counts = {ROLE_NAMES[r]: int((winner == k).sum()) for k, r in enumerate(role_list)}
m = st.columns(len(counts) + 1)
for col, (name, count) in zip(m, counts.items(), strict=False):
    col.metric(f"cells won by {name}", count)
m[-1].metric("best gain of S+L", f"{100 * float(np.max(res['gain'])):.0f}%")

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
    f"n = {s.n}, d = {s.d}, {s.spec.clusters} clusters, seed {s.seed}, budget {ui.fmt_fraction(s.fraction)}; "
    f"ln n / ln d = {ln_n / ln_d:.2f}, ln n = {ln_n:.2f}. The star marks the sidebar's β = 1/τ and σ."
)
with st.expander("Numbers behind the maps"):
    st.dataframe(table, hide_index=True, width="stretch")

ui.finish()
