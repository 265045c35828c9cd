"""The Sparse + low rank page's URL-bound controls: Scatterbrain's knobs, the heatmap options, the hash round shown,
the RPCA switch and Fig. 4's settings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import streamlit as st

import ui


@dataclass(frozen=True)
class MapControls:
    """How the heatmaps are drawn."""

    log_colour: bool
    resolution: int  # largest side of a drawn heatmap


@dataclass(frozen=True)
class Fig4Controls:
    """The settings of the paper's Fig. 4 experiment."""

    d: int
    m: int
    rounds: int
    buckets: int
    draws: int
    orthogonal: bool


def scatterbrain_knobs(s: ui.Settings) -> dict[str, Any]:
    """Scatterbrain's parameters, in a closed expander."""
    with st.expander("Scatterbrain knobs", expanded=False):
        return ui.method_controls(s, "scatterbrain")


def map_controls() -> MapControls:
    """The log-colour toggle and the heatmap resolution, side by side."""
    top = st.columns(2)
    log_colour = ui.toggle("Log colour scale", "logc", True, help="Show small attention weights too.", where=top[0])
    resolution = ui.choice(
        "Heatmap pixels",
        "res",
        [128, 256, 512],
        128,
        where=top[1],
        widget="radio",
        help="Largest side of each heatmap sent to the browser (block maximum); smaller is faster.",
    )
    return MapControls(log_colour, resolution)


def round_shown(rounds: int) -> int:
    """Which hash round the support and bucket views show (a slider only when there is more than one)."""
    return ui.int_slider("Round shown", "round", 1, max(1, rounds), 1) if rounds > 1 else 1


def rpca_toggle(cost: str) -> bool:
    """The RPCA switch; ``cost`` (``rpca_cost``): what it costs at this n on this server, by the check's estimate."""
    return ui.toggle("Compute the RPCA oracle (slow)", "rpca", False, help=cost)


def fig4_controls() -> Fig4Controls:
    """Five sliders in a row, then the orthogonal-features toggle."""
    c = st.columns(5)
    d = ui.int_slider("d (unit vectors)", "f4_d", 4, 64, 16, where=c[0])
    m = ui.int_slider("features m", "f4_m", 4, 256, 44, where=c[1], help="The paper's plot uses m = d log d = 44.")
    rounds = ui.int_slider("hash rounds", "f4_rounds", 1, 8, 4, where=c[2])
    buckets = ui.int_slider("buckets", "f4_buckets", 2, 64, 16, where=c[3])
    # 32 draws (0.3 s): the points' error bars are short enough that the theory line reads through them
    draws = ui.int_slider("random draws", "f4_draws", 1, 64, 32, where=c[4])
    orthogonal = ui.toggle("orthogonal features (the theory curve assumes iid)", "f4_orth", False)
    return Fig4Controls(d, m, rounds, buckets, draws, orthogonal)
