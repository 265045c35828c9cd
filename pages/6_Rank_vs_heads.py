"""Rank vs heads: one attention layer trained live on the nearest-neighbour target (Amsel, Yehudai & Bruna 2024)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

import service.views
import ui
from core import rank_heads_study as study
from ui.controls.rank_heads import RankHeadsControls, rank_heads_controls
from ui.figures import rank_heads as figs
from ui.navigation import navigation
from ui.panels import rank_heads as panels

N_SWEEP = [str(n) for n in (2, 4, 8, 16, 64, 256)]

ui.page("Rank vs heads", icon=":material/view_column:")
bar = st.sidebar
nav_box = bar.container()
ui.explain(panels.INTRO, panels.FORMULA)
c = rank_heads_controls(bar)
d, seeds = c.settings.d, c.settings.seeds

tab_grid, tab_n, tab_c, tab_theory, tab_paper = st.tabs(panels.TABS)
with tab_grid:
    cells = study.grid_cells(d, c.ranks, c.head_counts)
    grid_ok = panels.grid_allowed(c, cells)
    if not c.ranks or not c.head_counts:
        st.info("Pick at least one rank and one head count.")
    results = panels.train_grid(c, cells, grid_ok)
    shown = {cell: r for cell, r in results.items() if cell[0] in c.ranks and cell[1] in c.head_counts}
    refs = study.reference_levels(c.settings, results.get((d, 1)))
    table = pd.DataFrame(study.grid_rows(d, results))
    if results:
        panels.trained_caption(results, seeds)
    if shown:
        heat = figs.grid_heatmap(d, {cell: r.error for cell, r in shown.items()})
        ui.show_figure(heat, "rank_heads_heatmap", data=table, key="heat")
    errors = {cell: r.error for cell, r in shown.items()}
    vs_heads = figs.error_vs_heads(errors, refs, c.head_counts or [1], preview=not shown)
    ui.show_figure(vs_heads, "error_vs_heads", data=table, key="vs_heads")
    panels.low_rank_line(study.low_rank_summary(d, results.get((d, 1)), shown), refs)
    if results:
        curves = {cell: (r.curve_steps, r.curve) for cell, r in results.items()}
        ui.show_figure(figs.training_curves(curves), "training_curves", key="curves")
        panels.numbers_table(table)


# Each tab below with controls of its own is a fragment: its control reruns that tab, not the grid or the sidebar.
@st.fragment
def n_sweep_tab(c: RankHeadsControls) -> None:
    d = c.settings.d
    panels.n_sweep_intro(d)
    n_values = [int(n) for n in ui.multiselect("N values", "nsweep", N_SWEEP, ["2", "4", "16", "64"])]
    found = panels.train_n_sweep(c, study.n_sweep_cells(d, n_values))
    if found:
        frame = pd.DataFrame(study.n_sweep_rows(found))
        fig = figs.error_vs_n(d, {run: v.error for run, v in found.items()})
        ui.show_figure(fig, "error_vs_n", data=frame, key="vs_n")
        st.dataframe(frame.pivot(index="N", columns="setting", values="error"), width="stretch")
    ui.finish_fragment(share=False)


@st.fragment
def construction_tab(c: RankHeadsControls) -> None:
    d = c.settings.d
    st.markdown(panels.FACT1_TEXT)
    c_points = ui.int_slider("N for this panel", "cpoints", 2, 256, 16, help="Fact 1 draws N i.i.d. points.")
    if panels.fact_one_allowed(d, c_points):
        cc = service.views.run(
            service.views.FactOneConstruction(d, c_points, c.settings.target),
            ui.estimate_seconds(study.fact_one_elements(d, c_points)),
            title="Evaluating the construction",
        )
        data = pd.DataFrame({"c": cc.c, "error": cc.error, "entropy_nats": cc.entropy})
        ui.show_figure(figs.fact_one(cc, d, c_points), "fact1_temperature", data=data, key="fact1")
        panels.fact_one_line(cc)
    ui.finish_fragment(share=False)


@st.fragment
def theory_tab(d: int) -> None:
    st.markdown(panels.THEORY_TEXT)
    eps = ui.log_slider("Target error ε", "eps", [0.05, 0.1, 0.15, 0.2, 0.3], 0.1, help="For Theorem 2(ii).")
    ui.show_figure(figs.theorem_shapes(d, study.theorem_shapes(d, eps)), "theorem_shapes", key="theory")
    st.caption(panels.THEORY_CAPTION)
    ui.finish_fragment(share=False)


with tab_n:
    n_sweep_tab(c)
with tab_c:
    construction_tab(c)
with tab_theory:
    theory_tab(d)

with tab_paper:
    st.markdown(panels.PAPER_TEXT)
    fig1 = pd.DataFrame(study.paper_fig1_rows())
    ui.show_figure(figs.paper_fig1(), "paper_fig1", data=fig1, key="paper1")
    fig4 = pd.DataFrame(study.paper_fig4_rows())
    st.markdown(panels.FIG4_TEXT)
    st.dataframe(fig4.pivot(index="N", columns="rank", values="error (paper)"), width="stretch")

navigation(nav_box)
ui.finish()
