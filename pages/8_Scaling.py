"""Scaling: time and memory against n for chosen methods, measured live, next to the analytic model."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import streamlit as st

import ui
from core import device as core_device
from core import limits, profiling, registry, scaling_tables
from ui.figures import scaling as scaling_figs

RESULTS_DIR = Path(__file__).resolve().parent.parent / "benchmarks" / "results"
SIZES = [2**p for p in range(6, 17)]  # 64 .. 65536
ROW_BUDGETS = [16, 32, 64, 128, 256, 512]
DEFAULT_METHODS = ["performer", "lsh", "scatterbrain", "nystrom"]
TAU_OPTIONS = ui.TAU_OPTIONS

ui.page("Scaling", icon="📈")
ui.navigation(st.sidebar)
ui.explain(
    "Efficient attention is meant to be cheaper than the exact n × n computation. Here each method runs on "
    "growing inputs on this machine, with a fixed number of stored scores per query, and its wall time and "
    "peak memory are plotted on log–log axes. A straight line of slope 1 means linear cost, slope 2 "
    "quadratic; the dashed lines are each method's analytic model.",
    r"t(n) \approx c\, n^{s}\quad\Rightarrow\quad \log t = s \log n + \log c",
)

bar = st.sidebar
bar.header("Scaling run")
methods = ui.method_picker(
    "Methods", "methods", DEFAULT_METHODS, families=("sparse", "low-rank", "sparse+low-rank", "compression"), where=bar
)
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
tau = ui.log_slider("Temperature τ", "tau", TAU_OPTIONS, 0.3, where=bar, help="logits = q·k / τ (clustered input).")
seed = ui.int_input("Seed", "seed", 0, 2**31 - 1, 0, where=bar)
device = ui.device_control(bar)[1]
bar.caption(f"Measuring on **{core_device.describe(device)}**")
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
sizes = [n for n in SIZES if n_low <= n <= n_high]
run_methods = (["exact"] if with_exact else []) + list(methods)
settings_key = json.dumps(
    [run_methods, sizes, heads, d, row_budget, tau, seed, device.type, point_limit, total_limit, memory_limit]
)


@st.cache_data(show_spinner=False, max_entries=4)
def gemm_gflops(device_type: str) -> float:
    return profiling.gemm_rate(device_type, size=1024, repeats=3) / 1e9


top = st.columns([1, 3])
clicked = top[0].button(
    "Measure",
    type="primary",
    disabled=not run_methods,
    help="Runs every chosen method at every size, within the limits in the sidebar.",
)
top[1].caption(
    f"{len(run_methods)} method(s) × {len(sizes)} size(s) on {core_device.describe(device)}, "
    f"{heads} head(s), d = {d}, {row_budget} stored scores per query. The run stops before the limits."
)
store = st.session_state.setdefault("scaling_runs", {})
if clicked:

    def measure(report: ui.jobs.Report) -> list[profiling.ScalingPoint]:
        return profiling.scaling_run(
            run_methods,
            sizes,
            d=int(d),
            heads=int(heads),
            row_budget=int(row_budget),
            scale=1.0 / tau,
            seed=int(seed),
            device=device,
            point_limit_s=float(point_limit),
            total_limit_s=float(total_limit),
            memory_limit_bytes=float(memory_limit) * 2**20,
            progress=report,
        )

    # One measurement per settings and server, shared by every session; it runs in a compute slot, alone.
    store[settings_key] = ui.run_heavy(
        "scaling", settings_key, measure, float(total_limit), title="Measuring (time is bounded by the limits)"
    )
points = store.get(settings_key)

committed = scaling_tables.load_committed(RESULTS_DIR)
shown_files = ui.multiselect(
    "Committed benchmark results to show",
    "committed",
    list(committed),
    [],
    help="Tables written by `python -m benchmarks.suite` (8 heads, d = 64), labelled with "
    "the device they were measured on.",
)

if points is None and not shown_files:
    st.info("Press **Measure** to time the chosen methods on this machine, or pick committed results to show.")

frame = pd.DataFrame([vars(p) for p in points]) if points else pd.DataFrame()
if points:
    stops = scaling_tables.stops(points)
    for p in stops:
        st.warning(f"**{registry.get(p.method).label}** stopped at n = {p.n:,}: {p.status.removeprefix('stopped: ')}")
    if not stops:
        st.success("Every method ran at every size within the limits.")

gemm = gemm_gflops(device.type) if points else math.nan
series = scaling_tables.measured_series(points or [], run_methods, gemm * 1e9)
for label in shown_files:
    series += scaling_tables.committed_series(committed[label], run_methods)
colours = {m: ui.method_colour(i) for i, m in enumerate(run_methods)}
time_fig, mem_fig = scaling_figs.time_figure(series, colours), scaling_figs.memory_figure(series, colours)
slopes = scaling_tables.slopes_table(series)

if points or shown_files:
    cols = st.columns(2)
    with cols[0]:
        ui.show_figure(
            time_fig,
            "scaling_time",
            data=frame if not frame.empty else None,
            key="time",
            caption=f"Solid: measured median wall time. Dashed: the analytic FLOP count divided by this "
            f"machine's GEMM rate ({gemm:.1f} GFLOP/s), the time at full matmul speed."
            if points
            else "Committed results (dotted).",
        )
    with cols[1]:
        ui.show_figure(
            mem_fig,
            "scaling_memory",
            data=frame if not frame.empty else None,
            key="memory",
            caption="Solid: measured rise of peak memory during one call (CPU: the process's resident-set "
            "peak, which other sessions can disturb; GPU: torch's allocator peak). Dashed: the "
            "analytic scalars stored × 4 bytes.",
        )
if slopes:
    st.subheader("Fitted slopes")
    st.dataframe(
        pd.DataFrame(slopes),
        hide_index=True,
        column_config={
            "measured slope": st.column_config.NumberColumn(format="%.2f"),
            "model slope (FLOPs)": st.column_config.NumberColumn(format="%.2f"),
        },
    )
    st.caption(
        "Least-squares slope of log time against log n over the measured sizes. Small sizes are dominated "
        "by fixed overheads, so slopes over a range that starts low read flatter than the asymptote."
    )
if points:
    with st.expander("Measurements"):
        st.dataframe(
            frame.assign(params=frame.params.map(lambda p: ", ".join(f"{k}={v}" for k, v in p.items()))),
            hide_index=True,
        )

ui.finish()
