"""The Rank vs heads page's sidebar controls (task and training), bound to the URL."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

import ui
from core import device as core_device
from core import rank_heads as rh
from core import rank_heads_study as study

DIMS = [4, 8, 16, 32, 64]
POINTS = [2, 3, 4, 8, 16, 64, 256]
STEPS = [20, 50, 100, 200, 500, 1000, 2000, 5000]
HEAD_OPTIONS = [str(2**i) for i in range(0, 9)]  # 1 .. 256
AUTO_SECONDS = 3.0  # settings estimated below this train without a click: the first chart never waits long
TARGET_HELP = (
    "nearest: the x_i closest to y (the paper's Eq. 3). farthest: the paper's experiments (§7). biased: nearest "
    "after a fixed per-position bias b_i (Eq. 8, Theorem 4); the layer also learns a positional score bias."
)
POINTS_HELP = "N ≤ d: orthonormal targets (the theorem's setting, N = 2 in the paper); N > d: i.i.d. uniform points."


@dataclass(frozen=True)
class RankHeadsControls:
    """The sidebar's choices: what every trained cell shares, the grid's ranks and head counts, auto-training."""

    settings: study.TrainSettings
    ranks: list[int]
    head_counts: list[int]
    device: torch.device
    auto: bool

    @property
    def runs_on(self) -> str:
        """Where training runs, in words."""
        return "the CPU (one thread)" if self.device.type == "cpu" else core_device.describe(self.device)


def rank_heads_controls(bar: Any) -> RankHeadsControls:
    """Draw the Task and Training sections into ``bar`` (the sidebar) and return the chosen values."""
    bar.header("Task")
    target = ui.choice("Target", "target", list(rh.TARGETS), "nearest", where=bar, help=TARGET_HELP)
    d = int(ui.choice("Dimension d", "dim", DIMS, 16, where=bar, help="Points live on the unit sphere in R^d."))
    n_points = int(ui.choice("Target points N", "points", POINTS, 2, where=bar, help=POINTS_HELP))
    distribution = "orthonormal" if n_points <= d else "uniform"
    theory = "the theory setting D_N" if distribution == "orthonormal" else "i.i.d."
    bar.caption(f"Targets: **{distribution}** ({theory}).")
    bar.header("Training")
    steps = int(
        ui.log_slider("Steps", "steps", STEPS, 500, where=bar, help="AdamW, batch 512, 5% warm-up then cosine.")
    )
    rank_options = [str(2**i) for i in range(0, int(math.log2(d)) + 1)]
    rank_default = [r for r in ("1", "4", "16") if r in rank_options] or rank_options[:1]
    rank_help = "Rank of each head's W_Q W_Kᵀ (its head dimension). Powers of 2 up to d."
    ranks = ui.multiselect("Head ranks r", "ranks", rank_options, rank_default, where=bar, help=rank_help)
    head_help = "Number of heads; the layer sums them."
    heads = ui.multiselect("Heads H", "hv", HEAD_OPTIONS, ["1", "4", "16"], where=bar, help=head_help)
    seeds = ui.int_slider("Seeds (best of)", "seeds", 1, 5, 1, where=bar, help="The paper reports the best of 5 runs.")
    seed = ui.int_input("Seed", "seed", 0, 2**31 - 1, 0, where=bar, help="First training seed (init and batches).")
    device = ui.device_control(bar)[1]
    auto_help = (
        f"Train as soon as the settings change when the estimate is under {AUTO_SECONDS:.0f} s; else wait for the "
        "button."
    )
    auto = ui.toggle("Train automatically", "auto", True, where=bar, help=auto_help)
    settings = study.TrainSettings(target, d, n_points, steps, seeds, seed, device.type)
    return RankHeadsControls(settings, sorted(int(r) for r in ranks), sorted(int(h) for h in heads), device, auto)
