"""Kernels: the Performer's random features (positive vs trig, orthogonal vs iid) and a trainable feature map."""

from __future__ import annotations

import pandas as pd
import streamlit as st

import ui
from core import kernel_study as study
from core import kernels as K
from ui.controls.kernels import entry_controls, fit_controls, pair_controls, trig_controls
from ui.figures import kernels as figs
from ui.panels import kernels as panels

ui.page("Kernels", icon=":material/functions:")
s = ui.sidebar(
    max_n=1024,
    show_budget=False,
    show_head=False,
    defaults={"input": "gaussian", "n": 256, "d": 16, "heads": 1, "tau": 1.0},
)
ui.explain(panels.INTRO, panels.FORMULA)
panels.input_caption(s)


# Each tab with controls of its own is a fragment: a control reruns its tab, not the sidebar or the other tabs. The
# share box is drawn by ui.finish at the end of a full run (no tab holds all the page's controls).
@st.fragment
def pair_tab(s: ui.Settings) -> None:
    st.markdown(panels.PAIR_TEXT)
    pair = pair_controls()
    theory = study.kernel_mse_theory(s.d, pair.length, pair.angle)
    chart = st.empty()  # the closed forms at once; the measured points join them when the Monte Carlo is done
    ui.show_figure(figs.kernel_mse(s.d, theory), "kernel_mse_vs_m", key="mse_theory", where=chart.container())
    panels.ratio_line(K.mse_ratio(pair.angle, pair.length))
    with st.expander("Where each kernel wins: the Performer paper's Fig. 2 (closed form)"):
        ui.show_figure(figs.ratio_map(study.mse_ratio_map(), pair.angle, pair.length), "mse_ratio_map", key="ratio")
    measured = panels.pair_measurement(s, pair.length, pair.angle, pair.draws)
    if measured is not None:
        fig = figs.kernel_mse(s.d, theory, measured)
        ui.show_figure(fig, "kernel_mse_vs_m", data=figs.kernel_mse_table(measured), key="mse", where=chart.container())
    ui.finish_fragment(share=False)


@st.fragment
def entry_tab(s: ui.Settings) -> None:
    st.markdown(panels.ENTRY_TEXT)
    entry = entry_controls()
    bins = panels.entry_bins(s, entry.features, entry.redraws)
    if bins is not None:
        fig = figs.entry_error(bins, entry.features, s.tau)
        ui.show_figure(fig, "error_by_entry_size", data=figs.entry_error_table(bins), key="entries")
        panels.bin_counts(bins)
    ui.finish_fragment(share=False)


@st.fragment
def trig_tab(s: ui.Settings) -> None:
    st.markdown(panels.TRIG_TEXT)
    trig = trig_controls()
    if trig.features:
        frac = panels.trig_fraction(s, tuple(trig.features), trig.orthogonal)
        if frac is not None:
            fig = figs.trig_nonpositive(frac, trig.features, study.TAU_SWEEP, s.tau)
            data = figs.trig_nonpositive_table(frac, trig.features, study.TAU_SWEEP)
            ui.show_figure(fig, "trig_nonpositive", data=data, key="trig")
    else:
        st.info("Pick at least one feature count.")
    ui.finish_fragment(share=False)


@st.fragment
def attention_tab(s: ui.Settings) -> None:
    st.markdown(panels.ATTENTION_TEXT)
    att = panels.attention_curves(s, ui.int_slider("Redraws", "att_redraws", 1, 10, 4))
    if att is not None:
        fig = figs.attention_error(att, s.d, s.tau)
        ui.show_figure(fig, "attention_error_vs_m", data=figs.attention_error_table(att), key="attention")
    ui.finish_fragment(share=False)


@st.fragment
def fit_tab(s: ui.Settings) -> None:
    st.warning(panels.FIT_WARNING, icon=":material/info:")
    st.markdown(panels.VARIANTS_TEXT)
    fit = fit_controls(s.d)
    cmp = panels.kernel_comparison(s, fit)
    if cmp is not None:
        table = pd.DataFrame(cmp.rows)
        ui.show_figure(figs.fitting_curve(cmp.curves, cmp.rows), "learned_kernel_curve", data=table, key="lk_curve")
        fig = figs.comparison_bars(cmp.rows, fit.features, heldout=s.spec.drawn)
        ui.show_figure(fig, "kernel_comparison", data=table, key="lk_bars")
        st.dataframe(table, hide_index=True, width="stretch")
        st.caption(panels.COMPARISON_CAPTION)
        panels.penalty_section(s, fit)
    ui.finish_fragment(share=False)


tabs = st.tabs(panels.TABS)
with tabs[0]:
    pair_tab(s)
with tabs[1]:
    entry_tab(s)
with tabs[2]:
    trig_tab(s)
with tabs[3]:
    attention_tab(s)
with tabs[4]:
    fit_tab(s)

with tabs[5]:  # no controls: drawn by the full run only
    st.markdown(panels.PAPER_TEXT)
    paper = pd.DataFrame(K.PAPER_TABLE1 + K.LRA_BASELINES, columns=list(K.PAPER_TABLE1_COLUMNS))
    ui.show_figure(figs.paper_table1(paper), "paper_table1", data=paper, key="table1")
    st.dataframe(paper, hide_index=True, width="stretch")

ui.finish()
