"""Pure figure builders for the Scaling page: wall time and peak memory against n, log-log with decade ticks.

The legend sits below the plot and the figure grows with it, so entries never cover the curves; slopes are in
the legend names (and the page's table), not in annotations that could collide at the line ends.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import plotly.graph_objects as go

from core import registry
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


def method_name(entry: str) -> str:
    """A committed table's entry by the name the rest of the app gives it: a registered method's label, or torch's
    SDPA named as the exact attention it computes."""
    if entry == "sdpa":
        return "Exact softmax (torch SDPA)"
    spec = registry.methods().get(entry)
    return spec.label if spec is not None else entry


def _finite(values: Sequence[float]) -> list[float]:
    return [v for v in values if v is not None and math.isfinite(v) and v > 0]


def _measured_and_model(
    series: Sequence[Series],
    colours: Mapping[str, str],
    title: str,
    y_title: str,
    measured_of: Callable[[Series], Sequence[float]],
    model_of: Callable[[Series], Sequence[float]],
    names: tuple[str, str, str],
) -> go.Figure:
    """One measured curve (solid) and its model (dashed) per method, and the committed tables' curves. ``names`` are
    format strings of a committed, a measured and a model curve's legend entry (fields ``label`` and ``slope``)."""
    committed_name, measured_name, model_name = names
    measured = [s for s in series if not s.committed]
    # One committed table and nothing measured: the page's caption names the table, so its entries need not.
    one_table = not measured and len({s.source for s in series}) == 1
    fig = _figure(title, y_title, 2 * len(measured) + len(series) - len(measured))
    xs: list[float] = []
    ys: list[float] = []
    sources: list[str] = []
    for s in series:
        xs += s.ns
        ys += _finite(measured_of(s)) + _finite(model_of(s))
        label = {"label": method_name(s.method) if s.committed and one_table else s.label, "slope": s.slope}
        if s.committed:
            fig.add_scatter(
                x=s.ns,
                y=measured_of(s),
                mode="lines+markers",
                name=committed_name.format(**label),
                **_committed_style(s, sources, colours),
            )
            continue
        colour = colours.get(s.method, "#333333")
        for y, mode, name, line in (
            (measured_of(s), "lines+markers", measured_name, {"color": colour}),
            (model_of(s), "lines", model_name, {"color": colour, "dash": "dash"}),
        ):
            if mode == "lines" and not _finite(y):
                continue  # no model for the machine that measured (a cluster worker's GEMM rate is unknown here)
            fig.add_scatter(x=s.ns, y=y, mode=mode, name=name.format(**label), line=line, legendgroup=s.method)
    use_decades(fig, "x", xs)
    use_decades(fig, "y", ys)
    return fig


def time_figure(series: Sequence[Series], colours: Mapping[str, str]) -> go.Figure:
    """Measured median times (solid, markers) and the FLOP model at the GEMM rate (dashed); committed dotted."""
    with_slope = "{label} (slope {slope:.2f})"
    return _measured_and_model(
        series,
        colours,
        "Wall time against n (log–log)",
        "seconds",
        lambda s: s.seconds,
        lambda s: s.model_seconds,
        (with_slope, with_slope, "{label}: FLOPs at GEMM rate"),
    )


def memory_figure(series: Sequence[Series], colours: Mapping[str, str]) -> go.Figure:
    """Measured peak memory (solid; nan where nothing rose) and the analytic working set (dashed)."""
    return _measured_and_model(
        series,
        colours,
        "Peak memory against n (log–log)",
        "MiB",
        lambda s: s.peak_mib,
        lambda s: s.model_mib,
        ("{label}", "{label} measured", "{label} model"),
    )
