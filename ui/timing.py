"""Warm timings of one method on the page's input (cached per setting), for Compare's time column.

The engine's run (service.compute.run_method) times a single cold call; this repeats the call a few times after a
warm-up and reports the median and its spread (core.compare.warm_timing). Settings too heavy to repeat within the light
budget return None, and the page says plainly that its time is one cold measurement.
"""

from __future__ import annotations

import streamlit as st

from core import compare
from service import compute, views
from service.scheduler import LIGHT_SECONDS

RUNS = 5
BUDGET_S = 1.0  # warm calls per method stop after about this much time


@st.cache_data(show_spinner=False, max_entries=64)
def warm_timing(run: views.MethodRun) -> compare.WarmTiming | None:
    kwargs = run.kwargs
    if compute.method_seconds(run.inputs, run.method, kwargs) > LIGHT_SECONDS:
        return None
    dev = compute.resolve(run.device)
    q, k, v = compute.tensors(run.inputs, dev)
    return compare.method_timing(
        run.method, q, k, v, scale=run.beta, seed=run.seed, params=kwargs, runs=RUNS, budget_s=BUDGET_S
    )


def describe(timing: compare.WarmTiming | None, cold_seconds: float) -> str:
    """The time column's text: a warm median with its spread, or plainly one cold measurement."""
    if timing is None:
        return compare.WarmTiming(cold_seconds, 0.0, 1, cold_seconds).describe()
    return timing.describe()
