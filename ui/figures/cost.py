"""Pure figure builder of the Error vs cost page: each method's output error against its measured time and its peak
memory, at several budgets, with the Pareto front of accuracy and cost marked on both panels.

Colour is the method (its colour on every page), the marker's shape its family (``FAMILY_SYMBOLS``: sparse a square,
low rank a circle, sparse + low rank a diamond), and its size the budget. Exact attention has no error to plot on a
log axis: it is a vertical line at its time (and memory), and every point right of that line is slower (or larger)
than the exact computation it approximates.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Mapping, Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from core.cost_study import EXACT, CostPoint, budget_text, pareto_optimal
from ui.figures import PRESENTER_NAME
from ui.figures.axes import use_decades
from ui.figures.palette import FAMILY_COLOURS as FAMILY_COLOURS
from ui.figures.palette import method_colour

# The marker's shape is the method's family: the lesson of the page is which family wins where.
FAMILY_SYMBOLS = {"sparse": "square", "low-rank": "circle", "sparse+low-rank": "diamond"}
OTHER_SYMBOL = "triangle-up"  # a family without a shape of its own
FRONT_COLOUR = "#222222"
MARKER_PX = (9.0, 19.0)  # smallest and largest budget's marker size
FONT = 16  # a projector at the back of a room: ticks and legend no smaller than this
BASE_HEIGHT = 520
LEGEND_ROW_PX = 26
MEMORY_KINDS = {"measured": "peak memory (MiB, measured)", "model": "memory (MiB, analytic model)"}


def memory_mib(point: CostPoint, memory: str) -> float:
    """The point's memory in MiB: measured peak or analytic model; nan where it is not a positive number."""
    value = point.peak_bytes if memory == "measured" else point.model_bytes
    return value / 2**20 if math.isfinite(value) and value > 0 else math.nan


def _params_lines(params: Mapping[str, object], per_line: int = 3) -> str:
    items = [html.escape(f"{k}={v}") for k, v in params.items() if v is not None]
    return "<br>".join(", ".join(items[i : i + per_line]) for i in range(0, len(items), per_line))


def legend_name(label: str, family: str) -> str:
    """The method's label, with its family unless the label already names it (e.g. "LSH sparse (Reformer/SMYRF)")."""
    said = family.replace("+", " + ").lower()
    return label if said in label.lower() else f"{label} ({family.replace('+', ' + ')})"


def short_name(label: str) -> str:
    """The label without its closing parenthesis ("LSH sparse (Reformer/SMYRF)" -> "LSH sparse"): the legend name in
    presenter view (``ui.figures.presenter_figure`` reads it from the trace's ``meta``), where the marker's shape
    already says the family and the long names wrapped the legend onto more rows than a projector's first screen."""
    head = re.sub(r"\s*\([^()]*\)\s*$", "", label).strip()
    return head or label


def hover_text(point: CostPoint, label: str) -> str:
    """Method, budget, error, time (with its spread and runs), memory (measured and model) and parameters."""
    spread = f", spread {100 * point.spread:.0f}%" if point.runs > 1 else ""
    lines = [
        f"<b>{html.escape(label)}</b>, budget {budget_text(point.budget)}",
        f"output error {point.error:.3g}",
        f"time {1e3 * point.seconds:.3g} ms (median of {point.runs} warm runs{spread})",
        f"peak memory {memory_mib(point, 'measured'):.3g} MiB, model {memory_mib(point, 'model'):.3g} MiB",
    ]
    params = _params_lines(point.params)
    return "<br>".join(lines + ([params] if params else []))


def _sizes(budgets: Sequence[float], all_budgets: Sequence[float]) -> list[float]:
    """Marker sizes growing with log(budget) over the study's budgets."""
    low, high = math.log(min(all_budgets)), math.log(max(all_budgets))
    small, large = MARKER_PX
    return [small + (large - small) * ((math.log(b) - low) / (high - low) if high > low else 0.5) for b in budgets]


def error_cost_figure(
    points: Sequence[CostPoint], labels: Mapping[str, str], *, memory: str = "measured", title: str = ""
) -> go.Figure:
    """Two panels sharing the error axis: error against median time (ms) and against memory (MiB), log–log.

    labels: each method's display name. memory: "measured" (peak) or "model" (analytic working set). Points
    without a finite positive value on a panel are left out of that panel (and out of its front).
    """
    if memory not in MEMORY_KINDS:
        raise ValueError(f"memory must be one of {', '.join(MEMORY_KINDS)}, got {memory!r}")
    ok = [p for p in points if p.ok]
    exact = next((p for p in ok if p.method == EXACT), None)
    approx = [p for p in ok if p.method != EXACT and math.isfinite(p.error) and p.error > 0]
    methods = list(dict.fromkeys(p.method for p in approx))
    fig = make_subplots(
        rows=1,
        cols=2,
        shared_yaxes=True,
        horizontal_spacing=0.04,
        subplot_titles=("Error against time", "Error against memory"),
    )
    panels = [
        (1, lambda p: 1e3 * p.seconds, "median time per call (ms)"),
        (2, lambda p: memory_mib(p, memory), MEMORY_KINDS[memory]),
    ]
    family = {m: next(p.family for p in approx if p.method == m) for m in methods}
    all_budgets = [p.budget for p in approx] or [1.0]
    errors = [p.error for p in approx]
    for col, cost_of, axis_title in panels:
        for method in methods:
            mine = sorted((p for p in approx if p.method == method and _usable(cost_of(p))), key=lambda p: p.budget)
            symbol = FAMILY_SYMBOLS.get(family[method], OTHER_SYMBOL)
            colour = method_colour(method)  # its colour on every page
            fig.add_scatter(
                x=[cost_of(p) for p in mine],
                y=[p.error for p in mine],
                mode="lines+markers",
                name=legend_name(labels.get(method, method), family[method]),
                meta={PRESENTER_NAME: short_name(labels.get(method, method))},
                legendgroup=method,
                showlegend=col == 1,
                line={"color": colour, "width": 1.5},
                marker={
                    "color": colour,
                    "symbol": symbol,
                    "size": _sizes([p.budget for p in mine], all_budgets),
                    "line": {"color": "white", "width": 1},
                },
                text=[hover_text(p, labels.get(method, method)) for p in mine],
                hovertemplate="%{text}<extra></extra>",
                row=1,
                col=col,
            )
        candidates = [p for p in ok if _usable(cost_of(p)) and math.isfinite(p.error)]
        flags = pareto_optimal([cost_of(p) for p in candidates], [p.error for p in candidates])
        front = sorted((p for p, f in zip(candidates, flags, strict=True) if f and p.method != EXACT), key=cost_of)
        fig.add_scatter(
            x=[cost_of(p) for p in front],
            y=[p.error for p in front],
            mode="lines+markers",
            line={"color": FRONT_COLOUR, "width": 2, "dash": "dash", "shape": "hv"},
            marker={"symbol": "circle-open", "size": MARKER_PX[1] + 8, "color": FRONT_COLOUR, "line": {"width": 2}},
            name="Pareto front (no point is both faster/smaller and more accurate)",
            meta={PRESENTER_NAME: "Pareto front"},
            legendgroup="front",
            showlegend=col == 1,
            hoverinfo="skip",
            row=1,
            col=col,
        )
        costs = [cost_of(p) for p in candidates]
        if exact is not None and _usable(cost_of(exact)):
            low, high = (min(errors) / 1.5, max(errors) * 1.5) if errors else (0.01, 1.0)
            fig.add_scatter(
                x=[cost_of(exact)] * 2,
                y=[low, high],
                mode="lines",
                line={"color": FAMILY_COLOURS["exact"], "width": 2, "dash": "dot"},
                name=f"{labels.get(EXACT, EXACT)} (error 0): cost of the exact computation",
                meta={PRESENTER_NAME: f"{short_name(labels.get(EXACT, EXACT))} (error 0)"},
                legendgroup=EXACT,
                showlegend=col == 1,
                hovertemplate=f"{html.escape(labels.get(EXACT, EXACT))}: error 0<br>{axis_title}: %{{x:.3g}}"
                "<extra></extra>",
                row=1,
                col=col,
            )
        use_decades(fig, "x", costs, row=1, col=col)
        if len(set(costs)) > 1:  # room beyond the outermost points: a line at the edge (exact's) would be half hidden
            low, high = math.log10(min(costs)), math.log10(max(costs))
            pad = max(0.08, 0.05 * (high - low))
            fig.update_xaxes(range=[low - pad, high + pad], row=1, col=col)
        fig.update_xaxes(title={"text": axis_title, "font": {"size": FONT}}, row=1, col=col)
    use_decades(fig, "y", errors)
    fig.update_yaxes(title={"text": "relative output error", "font": {"size": FONT}}, row=1, col=1)
    entries = len(methods) + 2
    fig.update_layout(
        title={"text": title, "font": {"size": FONT + 2}} if title else None,
        height=BASE_HEIGHT + LEGEND_ROW_PX * math.ceil(entries / 2),
        template="plotly_white",
        font={"size": FONT},
        margin={"l": 10, "r": 10, "t": 60 if title else 40, "b": 10},
        legend={"orientation": "h", "yanchor": "top", "y": -0.16, "x": 0, "font": {"size": FONT - 1}},
        hoverlabel={"font": {"size": FONT - 2}},
    )
    fig.update_annotations(font_size=FONT + 1)  # the panel titles
    fig.update_xaxes(tickfont={"size": FONT - 1})
    fig.update_yaxes(tickfont={"size": FONT - 1})
    return fig


def _usable(value: float) -> bool:
    return math.isfinite(value) and value > 0
