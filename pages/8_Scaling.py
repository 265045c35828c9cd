"""Scaling: time and memory against n for chosen methods, measured live, next to the analytic model."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import streamlit as st
import torch

import service.views
import ui
from core import scaling_tables
from service import compute
from ui.controls.scaling import scaling_controls
from ui.figures import scaling as scaling_figs
from ui.panels import scaling as panels

RESULTS_DIR = Path(__file__).resolve().parent.parent / "benchmarks" / "results"

ui.page("Scaling", icon=":material/trending_up:")
ui.navigation(st.sidebar)
ui.explain(
    "Efficient attention is meant to be cheaper than the exact n × n computation. Here each method runs on "
    "growing inputs on this machine, with a fixed number of stored scores per query, and its wall time and "
    "peak memory are plotted on log–log axes. A straight line of slope 1 means linear cost, slope 2 "
    "quadratic; the dashed lines are each method's analytic model.",
    r"t(n) \approx c\, n^{s}\quad\Rightarrow\quad \log t = s \log n + \log c",
)
c = scaling_controls()  # c.measured_on: where the service places the measurement (a cluster worker, with a scheduler)

top = st.columns([1, 3])
clicked = top[0].button(
    "Measure",
    type="primary",
    disabled=not c.run.methods,
    help="Runs every chosen method at every size, within the limits in the sidebar.",
)
top[1].caption(
    f"{len(c.run.methods)} method(s) × {len(c.run.sizes)} size(s) on {c.measured_on}, "
    f"{c.run.heads} head(s), d = {c.run.d}, {c.run.row_budget} stored scores per query. "
    "The run stops before the limits."
)
store = st.session_state.setdefault("scaling_runs", {})
if clicked:
    # One measurement per settings and server, shared by every session; it runs in a compute slot, alone.
    store[c.run.cache_key()] = service.views.run(
        c.run, c.run.total_limit, title="Measuring (time is bounded by the limits)"
    )
# A measurement of these settings that any session (or the server's warm-up) made is in the shared cache; it says
# where it was measured (this process, another replica's host, or a cluster worker).
measurement = store.get(c.run.cache_key()) or service.views.lookup(c.run)
points = measurement.points if measurement is not None else None

committed = scaling_tables.load_committed(RESULTS_DIR)
shown_files = ui.multiselect(
    "Committed benchmark results to show",
    "committed",
    list(committed),
    scaling_tables.default_committed(committed, c.device.type, torch.get_num_threads()),
    help="Tables written by `python -m benchmarks.suite` (8 heads, d = 64), labelled with "
    "the device they were measured on.",
)

if points is None and not shown_files:
    st.info("Press **Measure** to time the chosen methods on this machine, or pick committed results to show.")
elif points is None:
    st.caption(
        f"Showing the committed benchmark table ({', '.join(shown_files)}); press **Measure** to time the chosen "
        "methods on this server."
    )

frame = pd.DataFrame([vars(p) for p in points]) if points else pd.DataFrame()
if measurement is not None:
    st.caption(f"Measured on **{measurement.describe()}**.")
if points:
    panels.draw_stops(points)

# This process's GEMM rate (measured once per process) times the FLOP model; a measurement made elsewhere (a worker,
# another replica's machine) gets none: this server's matmul rate says nothing about that machine's.
gemm = compute.gemm_gflops(c.device.type) if measurement is not None and measurement.measured_here() else math.nan
series = scaling_tables.measured_series(points or [], c.run.methods, gemm * 1e9)
for label in shown_files:
    series += scaling_tables.committed_series(committed[label], c.run.methods)
colours = {m: ui.method_colour(m) for m in c.run.methods}
if points or shown_files:
    time_fig, memory_fig = scaling_figs.time_figure(series, colours), scaling_figs.memory_figure(series, colours)
    measured_on = measurement.describe() if measurement is not None else c.measured_on
    panels.draw_charts(time_fig, memory_fig, frame, gemm if points else None, measured_on=measured_on)
slopes = scaling_tables.slopes_table(series)
if slopes:
    panels.draw_slopes(slopes)
if points:
    panels.draw_measurements(frame)

ui.finish()
