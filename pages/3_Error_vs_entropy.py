"""Error vs entropy: sweep the temperature (or, for the real model, take all 72 heads) at equal budget."""

from __future__ import annotations

from typing import Any

import numpy as np
import streamlit as st
import torch

import core
import ui
from core import sweeps
from ui import computed
from ui import sweep_runs as runs
from ui.figures import compare as figs
from ui.figures import regime as regime_figs
from ui.panels import regime as regime_panels
from ui.presets import EVE_METHODS, EVE_POINTS, EVE_REDRAWS, EVE_TAUS, MAX_REDRAWS
from ui.scrubber import scrubber_section

ui.page("Error vs entropy", icon=":material/show_chart:")
s = ui.sidebar(causal=True)

ORACLES = ["topk", "svd"]
registered = ui.registered_methods()

ui.explain(
    "Lowering the temperature makes every row more peaked, so its entropy falls. Sparse methods like peaked "
    "rows (a few keys hold all the weight) and low-rank methods like flat rows, so their error curves cross; "
    "sparse + low rank aims to stay below both, with the biggest gain in the middle (the paper's Fig. 1).",
    r"H(\tau) = -\frac1n\sum_{i,j} A_{ij}(\tau)\ln A_{ij}(\tau),\qquad A(\tau) = "
    r"\mathrm{softmax}(QK^\top/\tau)",
)

c = st.columns([2.5, 1.6, 1])
methods = ui.method_picker(
    "Methods", "methods", EVE_METHODS, n=s.n, where=c[0], exclude=("exact", "topk", "svd", "rpca")
)
oracles = ui.toggle(
    "Oracles (top-k, SVD)",
    "oracles",
    False,
    where=c[1],
    help="The best possible sparse (top-k per row) and low-rank (truncated SVD) matrices at the "
    "same budget, as in the paper's Fig. 1.",
)
metric = ui.choice("Error of", "metric", ["attention", "output"], "attention", where=c[2], widget="radio")
with_rpca = ui.toggle("Add the robust-PCA oracle (sparse + low rank; slow, n ≤ 256)", "rpca", False)

params: dict[str, dict[str, Any]] = {}
chosen = list(methods)
if oracles:
    chosen += [m for m in ORACLES if m in registered and m not in chosen]
if with_rpca and "rpca" in registered:
    if s.n <= 256:
        chosen.append("rpca")
    else:
        ui.notice("**RPCA oracle**: only offered for n ≤ 256 on this page (it runs many SVDs per temperature).")
chosen = ui.causal_only(s, chosen)
if chosen:
    with st.expander("Method knobs", expanded=False):
        tabs = st.tabs([ui.method_label(m) for m in chosen])
        for tab, method in zip(tabs, chosen, strict=True):
            with tab:
                params[method] = ui.method_controls(s, method, where=tab)


# The sweep's own controls (τ range, point count, log axis) rerun this section only; the sweep is cached, so a
# change redraws the chart without the sidebar, the method knobs or the scrubber below.
@st.fragment
def sweep_section(s: ui.Settings, chosen: list[str], params: dict[str, dict[str, Any]], metric: str) -> None:
    taus_range = ui.range_slider("Temperature range τ", "taus", ui.TAU_OPTIONS, EVE_TAUS)
    points = ui.int_slider("Temperatures in the sweep", "points", 4, 40, EVE_POINTS)
    log_y = ui.toggle("Log error axis", "logy", False)
    redraws = ui.int_slider(
        "Draws of the random methods",
        "redraws",
        1,
        MAX_REDRAWS,
        EVE_REDRAWS,
        help="Performer, LSH, Scatterbrain (and the other randomised methods) are run with this many seeds (seed, "
        "seed + 1, ...); the shaded band spans their errors, the line is the sidebar seed's draw.",
    )
    taus = runs.taus_between(taus_range[0], taus_range[1], points)

    if not chosen:
        st.info("Pick at least one method.")
    elif not ui.within_limits(runs.sweep_check(s, chosen, params, len(taus), redraws)):
        pass
    else:
        status = ui.StatusLine("Sweeping the temperature…")
        try:
            res = runs.temperature_sweep(s, taus, chosen, params, redraws)
        except (ValueError, RuntimeError, torch.cuda.OutOfMemoryError) as exc:
            status.update(label="The sweep failed", state="error")
            st.error(f"The sweep could not run with these settings: {exc}")
            st.stop()
        status.update(label=f"Sweep done: {len(taus)} temperatures × {len(chosen)} methods", state="complete")
        labels = {m: ui.method_label(m) for m in chosen}
        fig, table, crossover_text = figs.sweep_figure(
            res,
            chosen,
            metric=metric,
            labels=labels,
            families={m: registered[m].family for m in chosen},
            budget_label=ui.fmt_fraction(s.fraction),
            log_y=log_y,
            current_entropy=computed.entropy(s),
            tau=s.tau,
            n=s.n,
        )
        errors = res[metric]
        ui.show_figure(fig, "error_vs_entropy", data=table, key="sweep")
        st.markdown(crossover_text)
        draws = res.get(f"{metric}_draws", {})
        if res.get("redraws", 1) > 1:
            st.caption(
                f"Shaded: the span of each random method's error over {res['redraws']} draws (seeds {s.seed} to "
                f"{s.seed + res['redraws'] - 1}); the line is seed {s.seed}. ± on the cards: the standard deviation of "
                "the sweep's mean error over the draws."
            )
        st.caption(f"{metric.capitalize()} error, **mean over the sweep's {len(res['betas'])} temperatures**:")
        cols = st.columns(max(1, len(chosen)))
        for col, method in zip(cols, chosen, strict=False):
            value = f"{float(np.mean(errors[method])):.3f}"
            if method in draws and len(draws[method]) > 1:
                value += f" ± {float(np.std(np.mean(draws[method], axis=1))):.3f}"
            col.metric(ui.method_label(method), value, help="Mean error over the sweep (± over the draws).")
        with ui.on_demand("Numbers behind the chart", "numbers_sweep") as open_:
            if open_:
                st.dataframe(table, hide_index=True, width="stretch")
                st.caption(
                    "Budgeted parameters used: "
                    + "; ".join(
                        f"{ui.method_label(m)}: " + ", ".join(f"{k}={v}" for k, v in p.items())
                        for m, p in res["params"].items()
                    )
                )
    ui.finish_fragment(share=False)  # the scrubber's controls come after: ui.finish draws the share box


if s.spec.source != "real":
    sweep_section(s, chosen, params, metric)
    st.subheader("The same sweep, frame by frame")
    scrubber_section(s, [m for m in chosen if m != "rpca"], params)
else:
    st.subheader(f"All 72 heads of MiniLM at τ = {s.tau:g}: one point per head and method")
    st.caption(
        "For the real model the entropy comes from the heads themselves: every head of every layer is "
        "one point, computed at the sidebar temperature (τ = 1 is the model's own attention)."
    )
    if not chosen:
        st.info("Pick at least one method.")
    else:
        progress = st.progress(0.0, text="Running every layer…")
        table, refused = runs.real_heads_table(
            s, chosen, params, lambda layer: progress.progress((layer + 1) / 6, text=f"layer {layer + 1} of 6 done")
        )
        for method, message in refused:
            ui.notice(f"**{ui.method_label(method)}**: {message}")
        progress.empty()
        fig = figs.heads_scatter(table, chosen, {m: ui.method_label(m) for m in chosen}, metric)
        # The Regime map's winner per head (same roles and runs, cached per layer and method), as coloured rings.
        # MoBA chosen: the routed-sparse family joins the rings (the Regime map's "routed" methods).
        roles = dict(sweeps.ORACLES if "rpca" in chosen else sweeps.ROUTED if "moba" in chosen else sweeps.ESTIMATORS)
        role_params = {
            m: params.get(m) or registered[m].validate(core.budget_params(m, s.n, s.d, s.fraction), s.n, s.d)
            for m in roles.values()
        }
        placed = regime_panels.real_heads_regime(s, roles, role_params, metric)
        if not placed.heads.empty:
            regime_figs.add_winner_rings(fig, placed.heads, {r: f"error_{r}" for r in roles})
        ui.show_figure(fig, "heads_error_vs_entropy", data=table, key="heads")
        if not placed.heads.empty:
            st.caption(
                "Rings: the family whose method ("
                + ", ".join(f"{regime_figs.ROLE_NAMES[r]}: {ui.method_label(m)}" for r, m in roles.items())
                + f") has the lowest {metric} error on that head at this budget, drawn at that error; the Regime "
                "map page places the same heads on the clustered β axis."
            )
        st.caption(f"{metric.capitalize()} error, **mean over the 72 heads**:")
        cols = st.columns(max(1, len(chosen)))
        for col, method in zip(cols, chosen, strict=False):
            part = table[table["method"] == method]
            col.metric(ui.method_label(method), f"{part[f'{metric}_error'].mean():.3f}", help="Mean over the 72 heads.")
        with ui.on_demand("Numbers behind the chart", "numbers_heads") as open_:
            if open_:
                st.dataframe(table, hide_index=True, width="stretch")

ui.finish()
