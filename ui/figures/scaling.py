"""Pure figure builders for the Scaling page: wall time and peak memory against n, log-log with decade ticks.

The legend sits below the plot and the figure grows with it, so entries never cover the curves; slopes are in
the legend names (and the page's table), not in annotations that could collide at the line ends.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from core.scaling_tables import Series
from ui.figures.axes import use_decades

BASE_HEIGHT = 420
SOURCE_STYLES = [("dot", "diamond"), ("dashdot", "square"), ("longdash", "triangle-up"), ("dash", "circle")]
COMMITTED_ALIASES = {"sdpa": "exact"}  # the benchmark's name for exact attention
LEGEND_ROW_PX = 22


def _figure(title: str, y_title: str, entries: int) -> go.Figure:
    fig = go.Figure()
    rows = math.ceil(entries / 2)  # two entries per legend row in a half-width column
    fig.update_layout(
        title={"text": title, "font": {"size": 14}},
        height=BASE_HEIGHT + LEGEND_ROW_PX * rows,
        template="plotly_white",
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
        xaxis={"title": "n"},
        yaxis={"title": y_title},
        legend={"orientation": "h", "yanchor": "top", "y": -0.14, "x": 0, "font": {"size": 11}},
    )
    return fig


def _committed_style(s: Series, sources: list[str], colours: Mapping[str, str]) -> dict[str, Any]:
    """Committed series: the method's colour, a dash and marker per table."""
    if s.source not in sources:
        sources.append(s.source)
    dash, symbol = SOURCE_STYLES[sources.index(s.source) % len(SOURCE_STYLES)]
    colour = colours.get(COMMITTED_ALIASES.get(s.method, s.method))
    return {"line": {"dash": dash, "color": colour}, "marker": {"symbol": symbol, "color": colour}, "opacity": 0.7}


def _finite(values: Sequence[float]) -> list[float]:
    return [v for v in values if v is not None and math.isfinite(v) and v > 0]


def time_figure(series: Sequence[Series], colours: Mapping[str, str]) -> go.Figure:
    """Measured median times (solid, markers) and the FLOP model at the GEMM rate (dashed); committed dotted."""
    measured = [s for s in series if not s.committed]
    fig = _figure("Wall time against n (log–log)", "seconds", 2 * len(measured) + len(series) - len(measured))
    xs: list[float] = []
    ys: list[float] = []
    sources: list[str] = []
    for s in series:
        xs += s.ns
        ys += _finite(s.seconds) + _finite(s.model_seconds)
        if s.committed:
            fig.add_scatter(
                x=s.ns,
                y=s.seconds,
                mode="lines+markers",
                name=f"{s.label} (slope {s.slope:.2f})",
                **_committed_style(s, sources, colours),
            )
            continue
        colour = colours.get(s.method, "#333333")
        fig.add_scatter(
            x=s.ns,
            y=s.seconds,
            mode="lines+markers",
            name=f"{s.label} (slope {s.slope:.2f})",
            line={"color": colour},
            legendgroup=s.method,
        )
        if not _finite(s.model_seconds):
            continue  # no GEMM rate for the machine that measured (a cluster worker): no model line
        fig.add_scatter(
            x=s.ns,
            y=s.model_seconds,
            mode="lines",
            name=f"{s.label}: FLOPs at GEMM rate",
            line={"color": colour, "dash": "dash"},
            legendgroup=s.method,
        )
    use_decades(fig, "x", xs)
    use_decades(fig, "y", ys)
    return fig


def memory_figure(series: Sequence[Series], colours: Mapping[str, str]) -> go.Figure:
    """Measured peak memory (solid; nan where nothing rose) and the analytic working set (dashed)."""
    measured = [s for s in series if not s.committed]
    fig = _figure("Peak memory against n (log–log)", "MiB", 2 * len(measured) + len(series) - len(measured))
    xs: list[float] = []
    ys: list[float] = []
    sources: list[str] = []
    for s in series:
        xs += s.ns
        ys += _finite(s.peak_mib) + _finite(s.model_mib)
        if s.committed:
            fig.add_scatter(
                x=s.ns, y=s.peak_mib, mode="lines+markers", name=s.label, **_committed_style(s, sources, colours)
            )
            continue
        colour = colours.get(s.method, "#333333")
        fig.add_scatter(
            x=s.ns,
            y=s.peak_mib,
            mode="lines+markers",
            name=f"{s.label} measured",
            line={"color": colour},
            legendgroup=s.method,
        )
        fig.add_scatter(
            x=s.ns,
            y=s.model_mib,
            mode="lines",
            name=f"{s.label} model",
            line={"color": colour, "dash": "dash"},
            legendgroup=s.method,
        )
    use_decades(fig, "x", xs)
    use_decades(fig, "y", ys)
    return fig
