"""VCC: VIP-token centric compression. The selection tree, the mixed-resolution attention, error vs budget,
cost, and the storage tree T(C) with the entries one layer update rewrites."""

from __future__ import annotations

import streamlit as st

import core
import service.views
import ui
from core import vcc_study
from ui import computed
from ui.controls.vcc import vcc_controls
from ui.panels import vcc as panels

ui.page("VCC", icon=":material/account_tree:")
s = ui.sidebar(
    max_n=1024,
    show_budget=False,
    # Position order by default: VCC compresses runs of real positions, whose tiles cluster order would scatter.
    defaults={"n": 256, "d": 32, "heads": 1, "tau": 0.3, "spread": 0.3, "clusters": 8, "sort_clusters": False},
)
panels.intro()
tokens = computed.inputs(s).tokens
controls = vcc_controls(s, tokens)


# ------------------------------------------------------------------ the service's VCC run (shared cache, placement)
vcc = service.views.VccView(s.spec, s.beta, ui.params_key(controls.params()), s.seed, s.head)
try:
    with st.spinner("Running VCC…"):
        # One VCC call (the engine's own estimate, as its error sweep's); light ones compute at once.
        view: vcc_study.VccView = service.views.run(vcc, vcc_study.sweep_seconds(1, s.spec.heads, s.n), title="VCC")
except core.ParameterError as exc:
    st.error(f"VCC cannot run with these settings: {exc}")
    ui.finish()
    st.stop()
if view.info.get("notice"):
    ui.notice(f"**Budget**: {view.info['notice']}")


# Two sections have controls of their own (the log colour of the maps; the rows of the error): each is a fragment,
# so its control reruns that section, not the sidebar, the VCC run and the other figures.
@st.fragment
def heatmaps() -> None:
    panels.heatmaps(view, s.head, s.n, tokens, computed.cluster_order(s))
    ui.finish_fragment(share=False)  # the share box is drawn by ui.finish at the end of a full run


@st.fragment
def error_vs_budget() -> None:
    panels.error_vs_budget(s, controls, view.compressed_length(s.head))
    ui.finish_fragment(share=False)


panels.summary(view, s.head, s.heads, s.n)
panels.selection_tree(view, tokens)
heatmaps()
error_vs_budget()
cost = vcc_study.cost_curve(
    vcc_study.COST_LENGTHS, s.d, s.d, controls.n_p, controls.mode, controls.block_size, controls.budget
)
panels.cost(cost, s.n, controls)
panels.storage_tree(view)
panels.why_vip_and_d()

ui.finish()
