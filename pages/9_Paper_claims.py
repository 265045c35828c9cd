"""Paper claims: every checkable claim of the papers, measured now on clustered Process 1 and real MiniLM heads."""

from __future__ import annotations

import pandas as pd
import streamlit as st

import ui
from core import claims
from ui import claims_table
from ui.controls.claims import claims_controls
from ui.panels import claims as panels

ui.page("Paper claims", icon=":material/fact_check:")
s = ui.sidebar(show_head=False, show_heads=False, show_budget=False)

ui.explain(
    "The papers make checkable claims: some hold exactly, some only in a regime (a temperature range, a kind "
    "of input), some not at all on real heads. Each row below is measured live, with the same code the tests "
    "use, once per setting and then shared from the server's cache: on Scatterbrain's clustered model at the "
    "paper's sizes, and on all 72 heads of the real MiniLM model (your text when the sidebar's input is the real "
    "model). Sizes are the papers', not the sidebar's; the sidebar's seed is used.",
    r"\text{verdict} = \begin{cases}\text{holds} & \text{threshold met everywhere}\\ \text{holds only in a "
    r"regime} & \text{met on part of the range}\\ \text{does not hold} & \text{met nowhere}\end{cases}",
)

c = claims_controls()
text = s.spec.text if s.spec.source == "real" else None
selected = claims.of_papers(c.papers)

if not selected:
    st.info("Pick at least one paper.")
else:
    found = panels.measured_claims(selected, c.with_slow, c.with_real, s.seed, text)
    rows, failing_real = claims_table.page_rows(selected, found, c.with_real, s.seed)
    skipped_slow = [claim.id for claim in selected if claim.slow and not c.with_slow]
    if skipped_slow:
        st.info(f"Not run yet (slow, about a minute): {', '.join(skipped_slow)}. Turn on *Include the slow claims*.")
    panels.draw_table(pd.DataFrame(rows), failing_real)

panels.draw_not_measured()

ui.finish()
