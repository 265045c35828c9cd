"""The Paper claims page's controls: which papers, whether to measure the real heads and the slow claims."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

import ui
from core import claims


@dataclass(frozen=True)
class ClaimsControls:
    papers: list[str]  # keys of core.claims.PAPERS
    with_real: bool
    with_slow: bool


def claims_controls() -> ClaimsControls:
    paper_keys = list(claims.PAPERS)
    papers = ui.multiselect(
        "Papers",
        "papers",
        paper_keys,
        paper_keys,
        help="Each paper's claims take from a few seconds (rank vs heads) to about a minute (Scatterbrain) on 2 cores.",
    )
    top = st.columns(2)
    with_real = ui.toggle("Also measure on the real MiniLM heads", "real", True, where=top[0])
    with_slow = ui.toggle(
        "Include the slow claims",
        "slow",
        False,
        where=top[1],
        help="The n = 1024 oracle sweeps (crossover beta*), the sparse + low-rank oracle and the long Monte Carlo "
        "runs: about a minute more on 2 cores, then cached.",
    )
    return ClaimsControls(papers, with_real, with_slow)
