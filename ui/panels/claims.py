"""The Paper claims page's sections: the measurements (cached, or started by a button when they take long), the
verdict table coloured by verdict, its counts, and the skipped claims."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
import streamlit as st

from core import claims
from service import views
from ui import claims_table

AUTO_SECONDS = 3.0  # claims estimated above this wait for the button: the table never waits long on a fresh server
MEASURE_LABEL = "Measure the claims"


def measured_claims(
    selected: Sequence[claims.Claim], with_slow: bool, with_real: bool, seed: int, text: str | None
) -> dict[str, dict[str, Any]]:
    """Every due claim's result by ``claims.result_key``: from the shared cache; the rest measured now when cheap,
    else after the button (until then they read "not measured yet"). Each claim and input is cached on its own, so
    another selection, or a run that was stopped, reuses what was measured."""
    todo: dict[str, list[tuple[str, str]]] = {}
    found: dict[str, dict[str, Any]] = {}
    total = 0
    for paper in dict.fromkeys(claim.paper for claim in selected):
        for claim_id, which in claims.due(selected, paper, with_slow, with_real):
            total += 1
            hit = views.lookup(views.PaperClaim(claim_id, which, seed, text))
            if hit is None:
                todo.setdefault(paper, []).append((claim_id, which))
            else:
                found[claims.result_key(claim_id, which)] = hit
    missing = [pair for pairs in todo.values() for pair in pairs]
    seconds = sum(claims.estimate_seconds(claims.get(claim_id), (which,)) for claim_id, which in missing)
    rest = f" Estimated time for the rest: about {seconds:.0f} s on a 2-core CPU." if missing else ""
    st.caption(f"{total} measurements, {total - len(missing)} of them already in the server's shared cache.{rest}")
    clicked = st.button(
        MEASURE_LABEL, key="measure", type="primary", icon=":material/play_arrow:", disabled=not missing
    )
    # Slow claims always wait for the button (their time varies with the machine); the estimate is the measured one.
    cheap = seconds <= AUTO_SECONDS and not any(claims.get(claim_id).slow for claim_id, _ in missing)
    if missing and (clicked or cheap):
        for paper, pairs in todo.items():
            found.update(_measure_paper(paper, pairs, seed, text))
    elif missing:
        st.info(
            f"Estimated {seconds:.0f} s: press **{MEASURE_LABEL}** to start (the results are cached afterwards). "
            "Until then, rows marked *committed* show the committed measurement of the same claim and seed."
        )
        found.update({claims.result_key(c, w): claims.committed_or_not_yet(c, w, seed, text) for c, w in missing})
    return found


def _measure_paper(paper: str, due: list[tuple[str, str]], seed: int, text: str | None) -> dict[str, dict[str, Any]]:
    """One paper's claims as one scheduled job (queued, with progress and Cancel), each claim cached on its own."""
    estimate = sum(claims.estimate_seconds(claims.get(c), (w,)) for c, w in due)
    view = views.PaperClaims(paper, tuple(due), seed, text)
    return views.run(view, estimate, title=f"Measuring {paper}")


def draw_table(table: pd.DataFrame, failing_real: list[str]) -> None:
    """The claims table, one metric per verdict, the real-heads warning and the CSV download."""
    # A static table wraps each claim and threshold in full (a data grid cut them at any width).
    shown = claims_table.shown_table(table)
    styled = shown.style.map(claims_table.verdict_colour, subset=["verdict"]).map(
        claims_table.measured_colour, subset=claims_table.MEASURED_COLUMNS
    )
    st.table(styled.hide(axis="index"))
    counts = table["verdict"].value_counts()
    cols = st.columns(3)
    for col, v in zip(cols, claims.VERDICTS, strict=True):
        col.metric(v, int(counts.get(v, 0)))
    if failing_real:
        st.warning(
            "Holds on the clustered model but not (everywhere) on the real MiniLM heads: "
            + ", ".join(failing_real)
            + ". This is a finding, not a bug: the real heads are short (tens of tokens) and not clustered "
            "like Process 1, so the papers' regime does not cover them."
        )
    st.download_button(
        "Download the table (CSV: with the paper and how each claim was measured)",
        table.to_csv(index=False).encode(),
        "paper_claims.csv",
        "text/csv",
    )


def draw_not_measured() -> None:
    with st.expander(f"Claims not measured here ({len(claims.SKIPPED)} groups) and why"):
        st.table(pd.DataFrame(claims.SKIPPED, columns=["claim", "why not"]).style.hide(axis="index"))  # wraps
