"""Shared axis styling for the pure figure builders: log axes that always carry at least two labels (one per decade
where the data spans decades, round numbers 1, 2, 5 × 10^k where it does not)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import plotly.graph_objects as go

MAX_DECADE_LABELS = 8  # more decades than this get a label every few (they would collide on a short axis)
ROUND_DIGITS = ((1, 2, 3, 5), tuple(range(1, 10)))


def _positive(values: Iterable[Any] | None) -> list[float]:
    out = []
    for v in values if values is not None else ():
        try:
            f = float(v)
        except (TypeError, ValueError):
            continue
        if math.isfinite(f) and f > 0:
            out.append(f)
    return out


def _label(value: float) -> str:
    """Plain digits (2000, 0.05), as the decade labels' scale reads; exponents only far from 1."""
    if 1e-4 <= abs(value) < 1e6:
        return np.format_float_positional(value, precision=3, unique=True, fractional=False, trim="-")
    return f"{value:.2g}"


def _round_ticks(low: float, high: float) -> list[float]:
    """Round numbers in [low, high]: 1, 2, 3, 5 × 10^k first, finer digit sets until two fit, else a linear step."""
    exponents = range(math.floor(math.log10(low)) - 1, math.ceil(math.log10(high)) + 1)
    for digits in ROUND_DIGITS:
        chosen = sorted({round(m * 10.0**e, 12) for e in exponents for m in digits if low <= m * 10.0**e <= high})
        if len(chosen) >= 2:
            return chosen
    # A narrow range: a linear 1, 2, 5 step that puts two to six ticks inside it.
    base = 10.0 ** math.floor(math.log10(high - low))
    for step in (base / 10, base / 5, base / 2, base, base * 2, base * 5):
        first = math.ceil(low / step - 1e-9) * step
        ticks = [round(first + i * step, 12) for i in range(int((high - first) / step + 1e-9) + 1)]
        if 2 <= len(ticks) <= 6:
            return ticks
    return [low, high]


def decade_axis(values: Iterable[float] | None = None, ticks: Sequence[float] | None = None) -> dict[str, Any]:
    """Layout settings for a log axis over ``values`` with at least two labelled ticks.

    Two decades or more inside the data: a label at every decade (every few beyond ``MAX_DECADE_LABELS``), minor
    ticks between. Fewer: labels at ``ticks`` (e.g. the head counts plotted) when two of them fall in the data's
    range, else at round numbers. One distinct value: a range of a factor 2 each side, labelled the same way.
    Without values, decades.
    """
    settings: dict[str, Any] = {"type": "log", "exponentformat": "power"}
    positive = _positive(values)
    if not positive:
        return {**settings, "dtick": 1, "minor": {"ticks": "outside", "ticklen": 3, "showgrid": False}}
    low, high = min(positive), max(positive)
    if high / low < 1.001:  # one value: show a factor 2 around it so two labels fit
        low, high = low / 2, high * 2
        settings["range"] = [math.log10(low), math.log10(high)]
    span = math.log10(high) - math.log10(low)
    decades = math.floor(math.log10(high) + 1e-9) - math.ceil(math.log10(low) - 1e-9) + 1
    if decades >= 2:
        step = max(1, math.ceil(span / MAX_DECADE_LABELS))
        minor = {"ticks": "outside", "ticklen": 3, "showgrid": False} if step == 1 else {"ticks": ""}
        return {**settings, "dtick": step, "minor": minor}
    chosen = sorted({float(t) for t in ticks or () if low <= float(t) <= high})
    if len(chosen) < 2:
        chosen = _round_ticks(low, high)
    # Minor ticks would crowd a short axis; the round labels carry the scale.
    return {
        **settings,
        "tickmode": "array",
        "tickvals": chosen,
        "ticktext": [_label(t) for t in chosen],
        "minor": {"ticks": ""},
    }


def use_decades(
    fig: go.Figure,
    axis: str = "x",
    values: Iterable[float] | None = None,
    ticks: Sequence[float] | None = None,
    **where: Any,
) -> go.Figure:
    """Make ``fig``'s x or y axes (all of them, or ``row=``/``col=``) log axes labelled as ``decade_axis`` says."""
    update = fig.update_xaxes if axis == "x" else fig.update_yaxes
    update(**decade_axis(values, ticks), **where)
    return fig
