"""The Paper claims page's sections: the verdict table coloured by verdict, its counts, and the skipped claims."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from core import claims

COLOURS = {
    claims.HOLDS: "background-color: rgba(46, 160, 67, 0.25)",
    claims.REGIME: "background-color: rgba(210, 153, 34, 0.30)",
    claims.FAILS: "background-color: rgba(218, 54, 51, 0.28)",
}
MEASURED_COLUMNS = ["measured now (clustered)", "measured now (real MiniLM heads)"]


def _verdict_colour(value: Any) -> str:
    return COLOURS.get(value, "")


def _measured_colour(value: Any) -> str:
    """Cells read "<value> (<verdict>)"."""
    return next((c for k, c in COLOURS.items() if str(value).endswith(f"({k})")), "")


def draw_table(table: pd.DataFrame, failing_real: list[str]) -> None:
    """The claims table, one metric per verdict, the real-heads warning and the CSV download."""
    styled = table.style.map(_verdict_colour, subset=["verdict"]).map(_measured_colour, subset=MEASURED_COLUMNS)
    st.dataframe(
        styled,
        hide_index=True,
        width="stretch",
        column_config={
            "paper": st.column_config.TextColumn(width="small"),
            "claim": st.column_config.TextColumn(width="medium"),
            "threshold": st.column_config.TextColumn(width="small"),
            "verdict": st.column_config.TextColumn(width="medium"),
            "view": st.column_config.LinkColumn("view", display_text="open"),
        },
    )
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
    st.download_button("Download the table (CSV)", table.to_csv(index=False).encode(), "paper_claims.csv", "text/csv")


def draw_not_measured() -> None:
    with st.expander(f"Claims not measured here ({len(claims.SKIPPED)} groups) and why"):
        st.dataframe(pd.DataFrame(claims.SKIPPED, columns=["claim", "why not"]), hide_index=True, width="stretch")
