"""Warm timings of one method on the page's input, for Compare's time column (a view: ``service.views``).

The engine's run (service.compute.run_method) times a single cold call; this repeats the call a few times after a
warm-up and reports the median and its spread (core.compare.warm_timing). Settings too heavy to repeat within the light
budget return None, and the page says plainly that its time is one cold measurement.
"""

from __future__ import annotations

from typing import cast

from core import compare
from service import placement, views


def warm_timing(run: views.MethodRun) -> compare.WarmTiming | None:
    """The run's warm timing, measured where the run computes (here, or the worker ``service.placement`` picks)."""
    # A view, not a process memo: it times where the run computes, keyed by device and host, so no other machine's.
    view = views.MethodWarmTiming(run, placement.where(run).host)
    return cast("compare.WarmTiming | None", views.cached(view))


def describe(timing: compare.WarmTiming | None, cold_seconds: float) -> str:
    """The time column's text: a warm median with its spread, or plainly one cold measurement."""
    if timing is None:
        return compare.WarmTiming(cold_seconds, 0.0, 1, cold_seconds).describe()
    return timing.describe()
