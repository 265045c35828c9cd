"""The Kernels page's controls, one function per tab (each draws its row of columns), bound to the URL."""

from __future__ import annotations

import math
from dataclasses import dataclass

import streamlit as st

import ui
from core import kernel_study as study

DRAWS = [250, 500, 1000, 2000, 5000]
LK_STEPS = [10, 25, 50, 100, 200, 400]
TRIG_FEATURES = ["16", "64", "256"]
VARIANTS = ["ff", "glu", "oglu", "aoglu"]
LEARNING_RATES = [0.005, 0.01, 0.02, 0.05, 0.1, 0.2]


@dataclass(frozen=True)
class PairControls:
    """The pair x, y of the kernel MSE tab and its Monte Carlo size."""

    length: float
    angle_deg: float
    draws: int

    @property
    def angle(self) -> float:
        return math.radians(self.angle_deg)


@dataclass(frozen=True)
class EntryControls:
    features: int
    redraws: int


@dataclass(frozen=True)
class TrigControls:
    features: list[int]
    orthogonal: bool


@dataclass(frozen=True)
class FitControls:
    """The trainable kernel's fit: variants, feature count, Adam steps, penalty λ and learning rate."""

    variants: list[str]
    features: int
    steps: int
    penalty: float
    lr: float


def pair_controls() -> PairControls:
    c1, c2, c3 = st.columns(3)
    length = ui.float_slider("Length l = |x| = |y|", "length", 0.1, 2.0, 1.0, step=0.05, where=c1)
    angle_deg = ui.float_slider("Angle φ (degrees)", "angle", 0.0, 180.0, 145.0, step=1.0, where=c2)
    draws = int(ui.choice("Feature draws", "draws", DRAWS, 1000, where=c3, help="Monte Carlo repetitions per point."))
    return PairControls(length, angle_deg, draws)


def entry_controls() -> EntryControls:
    c1, c2 = st.columns(2)
    features = int(ui.choice("Features m", "entry_m", study.ATTENTION_FEATURES, 64, where=c1))
    redraws = ui.int_slider("Redraws", "entry_redraws", 1, 8, 3, where=c2)
    return EntryControls(features, redraws)


def trig_controls() -> TrigControls:
    c1, c2 = st.columns(2)
    features = [int(m) for m in ui.multiselect("Features m", "trig_m", TRIG_FEATURES, list(TRIG_FEATURES), where=c1)]
    orthogonal = ui.toggle("Orthogonal features", "trig_orth", True, where=c2)
    return TrigControls(features, orthogonal)


def fit_controls(d: int) -> FitControls:
    """Four columns (variants, m, steps, λ), then the learning rate below them; m defaults to ``d``."""
    c1, c2, c3, c4 = st.columns(4)
    variants = ui.multiselect("Variants", "variants", VARIANTS, ["ff", "oglu", "aoglu"], where=c1)
    features = ui.int_slider("Features m", "lk_m", 2, 256, min(max(d, 2), 256), where=c2, help="Default m = d.")
    steps = int(ui.log_slider("Steps", "lk_steps", LK_STEPS, 100, where=c3))
    penalty = float(ui.choice("Penalty λ", "lk_lambda", list(study.PENALTIES), 0.0, where=c4))
    lr = float(ui.log_slider("Learning rate", "lk_lr", LEARNING_RATES, 0.05))
    return FitControls(list(variants), features, steps, penalty, lr)
