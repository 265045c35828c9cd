"""The Scaling page's results: stop notices, the time and memory charts, fitted slopes and the raw measurements."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

import ui
from core import registry, scaling_tables
from core.profiling import ScalingPoint

MEMORY_CAPTION = (
    "Solid: measured rise of peak memory during one call (CPU: the process's resident-set peak, which other "
    "sessions can disturb; GPU: torch's allocator peak). Dashed: the analytic scalars stored × 4 bytes."
)
SLOPES_CAPTION = (
    "Least-squares slope of log time against log n over the measured sizes. Small sizes are dominated by fixed "
    "overheads, so slopes over a range that starts low read flatter than the asymptote."
)


def draw_stops(points: list[ScalingPoint]) -> None:
    stops = scaling_tables.stops(points)
    for p in stops:
        st.warning(f"**{registry.get(p.method).label}** stopped at n = {p.n:,}: {p.status.removeprefix('stopped: ')}")
    if not stops:
        st.success("Every method ran at every size within the limits.")


def draw_charts(
    time_fig: go.Figure,
    memory_fig: go.Figure,
    frame: pd.DataFrame,
    gemm_gflops: float | None,
    *,
    measured_on: str = "this machine",
) -> None:
    """Time and memory side by side; ``gemm_gflops`` is None when only committed results are shown, nan when the
    measurement ran on another machine (a cluster worker, ``measured_on``) whose GEMM rate this one cannot give."""
    data = frame if not frame.empty else None
    if gemm_gflops is None:
        time_caption = "Committed results (dotted)."
    elif not math.isfinite(gemm_gflops):
        time_caption = (
            f"Solid: median wall time measured on {measured_on}. No dashed GEMM-rate model: this server's matmul "
            "rate is not that machine's."
        )
    else:
        time_caption = (
            f"Solid: measured median wall time. Dashed: the analytic FLOP count divided by this machine's GEMM "
            f"rate ({gemm_gflops:.1f} GFLOP/s), the time at full matmul speed."
        )
    # Side by side on a screen; stacked on a projector, where each chart needs the full width for its larger legend
    # (in a half-width column it wrapped onto more rows than presenter view leaves room for, over the chart's title).
    cols = (st.container(), st.container()) if ui.presenter_mode() else st.columns(2)
    with cols[0]:
        ui.show_figure(time_fig, "scaling_time", data=data, key="time", caption=time_caption)
    with cols[1]:
        ui.show_figure(memory_fig, "scaling_memory", data=data, key="memory", caption=MEMORY_CAPTION)


def draw_slopes(slopes: list[dict[str, Any]]) -> None:
    st.subheader("Fitted slopes")
    st.dataframe(
        pd.DataFrame(slopes),
        hide_index=True,
        column_config={
            "measured slope": st.column_config.NumberColumn(format="%.2f"),
            "model slope (FLOPs)": st.column_config.NumberColumn(format="%.2f"),
        },
    )
    st.caption(SLOPES_CAPTION)


def draw_measurements(frame: pd.DataFrame) -> None:
    with st.expander("Measurements"):
        st.dataframe(frame.assign(params=frame.params.map(scaling_tables.params_text)), hide_index=True)
