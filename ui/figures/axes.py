"""Shared axis styling for the pure figure builders: readable log axes (one label per decade)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import plotly.graph_objects as go


def decade_axis(values: Iterable[float] | None = None) -> dict[str, Any]:
    """Layout settings for a log axis that labels decades only (1, 10, 100 or 10⁻³…), with unlabelled minor ticks.

    With ``values`` spanning less than one decade, Plotly's own ticks are kept (a decade-only axis would have
    no label at all).
    """
    settings: dict[str, Any] = {
        "type": "log",
        "exponentformat": "power",
        "minor": {"ticks": "outside", "ticklen": 3, "showgrid": False},
    }
    if values is not None:
        positive = [float(v) for v in values if v is not None and math.isfinite(float(v)) and float(v) > 0]
        if positive and math.log10(max(positive)) - math.log10(min(positive)) < 1:
            return settings
    settings["dtick"] = 1
    return settings


def use_decades(fig: go.Figure, axis: str = "x", values: Iterable[float] | None = None, **where: Any) -> go.Figure:
    """Make ``fig``'s x or y axes (all of them, or ``row=``/``col=``) log axes labelled by decade."""
    update = fig.update_xaxes if axis == "x" else fig.update_yaxes
    update(**decade_axis(values), **where)
    return fig
