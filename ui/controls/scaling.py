"""The Scaling page's sidebar: what to measure and the run's limits (capped at the server's, with a notice)."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st
import torch

import ui
from core import device as core_device
from core import limits, scaling_tables
from service import placement
from service.views import ScalingRun

SIZES = [2**p for p in range(6, 17)]  # 64 .. 65536
ROW_BUDGETS = [16, 32, 64, 128, 256, 512]
DEFAULT_METHODS = ["performer", "lsh", "scatterbrain", "nystrom"]
FAMILIES = ("sparse", "routed-sparse", "low-rank", "sparse+low-rank", "compression")


@dataclass(frozen=True)
class ScalingControls:
    """The chosen measurement (one per settings and server, shared by every session) and the device it runs on."""

    run: ScalingRun
    device: torch.device
    measured_on: str = ""  # where, in words


def scaling_controls() -> ScalingControls:
    bar = st.sidebar
    bar.header("Scaling run")
    methods = ui.method_picker("Methods", "methods", DEFAULT_METHODS, families=FAMILIES, where=bar)
    with_exact = ui.toggle(
        "Include exact (torch SDPA)",
        "exact",
        True,
        where=bar,
        help="core's exact method, torch.nn.functional.scaled_dot_product_attention.",
    )
    n_low, n_high = ui.range_slider(
        "Sequence lengths n",
        "sizes",
        SIZES,
        (256, 4096),
        fmt=lambda x: f"{int(x):,}",
        where=bar,
        help="Powers of two between these are measured, smallest first.",
    )
    heads = ui.int_slider("Heads", "heads", 1, 16, 1, where=bar)
    d = ui.choice("Head dimension d", "d", [16, 32, 64, 128], 64, where=bar)
    row_budget = ui.choice(
        "Stored scores per query",
        "row_budget",
        ROW_BUDGETS,
        128,
        where=bar,
        help="Each method gets this many stored numbers per query (fraction = budget / n of full "
        "attention), so its parameters stay fixed as n grows.",
    )
    tau = ui.log_slider(
        "Temperature τ", "tau", ui.TAU_OPTIONS, 0.3, where=bar, help="logits = q·k / τ (clustered input)."
    )
    seed = ui.int_input("Seed", "seed", 0, 2**31 - 1, 0, where=bar)
    device = ui.device_control(bar)[1]
    where_box = bar.empty()  # filled below, once the run is known: where the service places it
    bar.header("Limits")
    point_limit = ui.log_slider(
        "Time per size (s)",
        "point_s",
        [0.5, 1, 2, 5, 10, 30],
        5,
        where=bar,
        help="A method stops before a size whose predicted time is above this.",
    )
    total_limit = ui.log_slider("Total time (s)", "total_s", [5, 10, 30, 60, 120, 300], 30, where=bar)
    memory_limit = ui.log_slider(
        "Memory (MiB)",
        "memory_mib",
        [128, 256, 512, 1024, 2048, 4096],
        1024,
        where=bar,
        help="A method stops before a size whose analytic working set is above this.",
    )
    point_limit, total_limit, memory_limit, notices = scaling_tables.fit_server_limits(
        point_limit, total_limit, memory_limit, limits.job_seconds(), limits.memory_limit_bytes() / 2**20
    )
    for text in notices:
        ui.notice(text)
    run = ScalingRun(
        methods=tuple((["exact"] if with_exact else []) + list(methods)),
        sizes=tuple(n for n in SIZES if n_low <= n <= n_high),
        heads=int(heads),
        d=int(d),
        row_budget=int(row_budget),
        beta=1.0 / float(tau),
        seed=int(seed),
        device=device.type,
        point_limit=float(point_limit),
        total_limit=float(total_limit),
        memory_limit=float(memory_limit),
    )
    placed = placement.where(run, heavy=True)  # with a scheduler, a cluster worker measures
    measured_on = f"a cluster worker's {placed.device}" if placed.remote else core_device.describe(device)
    where_box.caption(f"Measuring on **{measured_on}**")
    return ScalingControls(run, device, measured_on)
