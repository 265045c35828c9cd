"""Paper claims: every checkable claim of the papers, measured now on clustered Process 1 and real MiniLM heads."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

import ui
from core import claims
from ui import result_cache
from ui.controls.claims import claims_controls
from ui.panels import claims as panels

ui.page("Paper claims", icon=":material/fact_check:")
s = ui.sidebar(show_head=False, show_heads=False, show_budget=False)

ui.explain(
    "The papers make checkable claims: some hold exactly, some only in a regime (a temperature range, a kind "
    "of input), some not at all on real heads. Each row below is measured now, with the same code the tests "
    "use: on Scatterbrain's clustered model at the paper's sizes, and on all 72 heads of the real MiniLM model "
    "(your text when the sidebar's input is the real model). Sizes are the papers', not the sidebar's; the "
    "sidebar's seed is used.",
    r"\text{verdict} = \begin{cases}\text{holds} & \text{threshold met everywhere}\\ \text{holds only in a "
    r"regime} & \text{met on part of the range}\\ \text{does not hold} & \text{met nowhere}\end{cases}",
)

c = claims_controls()
text = s.spec.text if s.spec.source == "real" else None
selected = claims.of_papers(c.papers)


def measure_paper(paper: str) -> dict[str, dict[str, Any]]:
    """Every claim of one paper that is due, as one scheduled job (queued, cancellable, in the shared cache).

    Each claim and input is also cached on its own, so another selection, or a run that was stopped, reuses it."""
    due = claims.due(selected, paper, c.with_slow, c.with_real)
    if not due:
        return {}

    def work(report: Any) -> dict[str, dict[str, Any]]:
        out = {}
        for i, (claim_id, which) in enumerate(due):
            report(i / len(due), f"{claim_id} ({which})")
            key = (claim_id, which, s.seed, text)
            out[claims.result_key(claim_id, which)] = result_cache.cached(
                "paper_claim", key, lambda cid=claim_id, w=which: claims.measure_plain(cid, w, s.seed, text)
            )
        return out

    estimate = sum(claims.estimate_seconds(claims.get(c), (w,)) for c, w in due)
    return ui.run_heavy("paper_claims", (paper, tuple(due), s.seed, text), work, estimate, title=f"Measuring {paper}")


if not selected:
    st.info("Pick at least one paper.")
else:
    found: dict[str, dict[str, Any]] = {}
    for paper in dict.fromkeys(claim.paper for claim in selected):
        found.update(measure_paper(paper))
    rows, failing_real = claims.page_rows(selected, found, c.with_real, s.seed)
    skipped_slow = [claim.id for claim in selected if claim.slow and not c.with_slow]
    if skipped_slow:
        st.info(f"Not run yet (slow, about a minute): {', '.join(skipped_slow)}. Turn on *Include the slow claims*.")
    panels.draw_table(pd.DataFrame(rows), failing_real)

panels.draw_not_measured()

ui.finish()
