"""Sparse + low rank: Scatterbrain's split step by step, the naive sum, the RPCA oracle, the spectrum, Fig. 4."""

from __future__ import annotations

import streamlit as st

import ui
from core import sparse_lowrank
from ui import computed
from ui.controls import sparse_lowrank as controls
from ui.panels import sparse_lowrank as panels
from ui.scrubber import split_scrubber_section

ui.page("Sparse + low rank", icon=":material/join_inner:", url_path="Sparse_plus_low_rank")
s = ui.sidebar(max_n=1024, defaults=sparse_lowrank.PAGE_DEFAULTS)
panels.intro()


@st.fragment
def scatterbrain_sections(s: ui.Settings) -> None:
    """Sections 1-4, everything Scatterbrain's knobs and the map controls drive: a knob reruns these, not the
    sidebar or Fig. 4."""
    params = controls.scatterbrain_knobs(s)
    head = s.head
    exact = computed.exact(s)
    exact_head = exact.attention[head] if not exact.reduced else None
    names = ("support_rounds", "support", "sparse", "low_rank", "naive_sum", "attention")
    with st.spinner("Splitting Scatterbrain into its parts…"):
        parts = computed.parts(s, "scatterbrain", params, names)
    factor = int(parts["factor"])
    summary = None  # Scatterbrain vs the naive sum, at full resolution only
    if exact_head is not None and factor == 1:
        summary = computed.scatterbrain_correction(s, params, names)
    exact_map = exact_head if factor == 1 else ui.display(exact_head)  # at the parts' resolution (sortable at 1)
    view = panels.MapView(s, factor, controls.map_controls())

    panels.support_section(view, params, parts, summary)
    panels.split_section(view, parts, exact_map, summary)
    split_scrubber_section(s, params)  # the same split at every temperature, animated in the browser
    panels.rpca_section(s, exact_head, view.options.log_colour)
    panels.spectrum_section(s, exact_head, parts["low_rank"] if factor == 1 else None)
    ui.finish_fragment()


@st.fragment
def fig4(s: ui.Settings) -> None:
    """Section 5 has its own sliders: moving one reruns only this section."""
    panels.fig4_section(s)
    ui.finish_fragment(share=False)


scatterbrain_sections(s)
fig4(s)
panels.hashing_section(s)
ui.finish()
