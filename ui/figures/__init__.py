"""Figure builders (Plotly) and full-resolution PNGs (Pillow + colormap LUT): pure, no Streamlit.

``ui.figure_display`` draws the figures on a page, with the Export menu; ``tests/test_figures_pure.py`` checks that
no module here imports Streamlit.

Colormaps are colour-blind safe: viridis for attention, cividis for masks and buckets, a symmetric
red-blue diverging map for signed errors. Every chart is passed its colorscale explicitly (theme=None).
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import plotly.colors as pcolors
import plotly.graph_objects as go
from PIL import Image

# Method and family colours: declared once in ui/figures/palette.py, re-exported here (ui.method_colour).
from ui.figures.palette import family_colour as family_colour
from ui.figures.palette import method_colour as method_colour

ATTENTION_SCALE = "Viridis"
MASK_SCALE = "Cividis"
ERROR_SCALE = "RdBu_r"  # negative (under-estimate) blue, positive (over-estimate) red
LOG_FLOOR = 1e-6


def _lut(scale: str) -> np.ndarray:
    colours = pcolors.sample_colorscale(scale, list(np.linspace(0, 1, 256)), colortype="rgb")
    rows = [[int(float(c)) for c in colour[4:-1].split(",")] for colour in colours]
    return np.asarray(rows, dtype=np.uint8)


ERROR_PERCENTILE = 99.0


def error_bound(a: np.ndarray) -> float:
    """Symmetric colour range for signed errors: the 99th percentile of the non-zero |error|.

    The largest errors sit on a few entries (often the diagonal); scaling to them would paint the rest white.
    """
    magnitude = np.abs(np.asarray(a, dtype=np.float64))
    magnitude = magnitude[np.isfinite(magnitude) & (magnitude > 0)]
    if magnitude.size == 0:
        return 1.0
    return float(np.percentile(magnitude, ERROR_PERCENTILE)) or float(magnitude.max())


def _normalise(a: np.ndarray, kind: str, log: bool, zmax: float | None) -> tuple[np.ndarray, float, float]:
    """Map values to [0, 1] the same way the Plotly heatmap does; returns (unit, zmin, zmax)."""
    a = np.asarray(a, dtype=np.float64)
    if kind == "error":
        bound = zmax if zmax is not None else error_bound(a)
        return (np.clip(a, -bound, bound) + bound) / (2 * bound), -bound, bound
    if log:
        a = np.log10(np.clip(a, LOG_FLOOR, None))
        low, high = np.log10(LOG_FLOOR), float(np.nanmax(a)) if a.size else 0.0
        high = zmax if zmax is not None else high
    else:
        low, high = (float(np.nanmin(a)), float(np.nanmax(a))) if a.size else (0.0, 1.0)
        low = min(low, 0.0) if kind != "signed" else low
        high = zmax if zmax is not None else high
    span = (high - low) or 1.0
    return np.clip((a - low) / span, 0, 1), low, high


def png_bytes(a: np.ndarray, kind: str = "attention", log: bool = False, zmax: float | None = None) -> bytes:
    """A full-resolution PNG of a matrix (one pixel per entry) through the same colormap as the chart."""
    unit, _, _ = _normalise(a, kind, log, zmax)
    scale = ERROR_SCALE if kind == "error" else MASK_SCALE if kind == "mask" else ATTENTION_SCALE
    rgb = _lut(scale)[np.nan_to_num(unit * 255).astype(np.uint8)]
    buffer = io.BytesIO()
    Image.fromarray(rgb, mode="RGB").save(buffer, format="PNG", optimize=False)
    return buffer.getvalue()


def heatmap_trace(
    a: np.ndarray,
    *,
    kind: str = "attention",
    log: bool = False,
    zmax: float | None = None,
    factor: int = 1,
    colorbar: bool = True,
    x_label: str = "key j",
    y_label: str = "query i",
    hover_label: str = "value",
    name: str | None = None,
) -> dict[str, Any]:
    """The heatmap trace (a plain dict) of ``heatmap``: colours, colour range, colour bar and hover text.

    name: shown in the hover box (figures with several heatmaps say whose entry it is).
    """
    z = np.asarray(a, dtype=np.float32)
    rows, cols = z.shape
    extra = "" if name is None else name.replace("<", "&lt;")
    hover = f"{y_label} %{{y}}, {x_label} %{{x}}<br>{hover_label} %{{z:.3g}}<extra>{extra}</extra>"
    trace: dict[str, Any] = {"type": "heatmap", "x": np.arange(cols) * factor, "y": np.arange(rows) * factor}
    if kind == "error":
        bound = zmax if zmax is not None else error_bound(z)
        trace.update(z=z, colorscale=ERROR_SCALE, zmin=-bound, zmax=bound, zmid=0, hovertemplate=hover)
    elif kind == "mask":
        trace.update(z=z, colorscale=MASK_SCALE, hovertemplate=hover)
    elif log:
        zl = np.log10(np.clip(z, LOG_FLOOR, None)).astype(np.float32)
        top = float(np.nanmax(zl)) if zl.size else 0.0
        ticks = list(range(int(np.log10(LOG_FLOOR)), int(np.ceil(top)) + 1))
        trace.update(
            z=zl,
            colorscale=ATTENTION_SCALE,
            zmin=np.log10(LOG_FLOOR),
            zmax=zmax if zmax is not None else top,
            colorbar={"tickvals": ticks, "ticktext": [f"1e{t}" for t in ticks]},
            hovertemplate=f"{y_label} %{{y}}, {x_label} %{{x}}<br>log10 {hover_label} %{{z:.2f}}<extra>{extra}</extra>",
        )
    else:
        trace.update(z=z, colorscale=ATTENTION_SCALE, zmax=zmax, hovertemplate=hover)
        if kind != "signed":
            trace["zmin"] = min(0.0, float(np.nanmin(z)))
    trace["showscale"] = colorbar
    trace["colorbar"] = {**trace.get("colorbar", {}), "thickness": 10, "len": 0.9}
    return trace


def token_ticks(
    trace: dict[str, Any], labels: list[str] | None, factor: int, xaxis: dict[str, Any], yaxis: dict[str, Any]
) -> bool:
    """Put one tick label per position (a real model's tokens) on a full-resolution map of at most 64 rows; True
    when it did."""
    if labels is None or factor != 1 or len(labels) != trace["z"].shape[0] or len(labels) > 64:
        return False
    xaxis.update(tickvals=trace["x"], ticktext=labels, tickangle=-60, tickfont={"size": 9})
    yaxis.update(tickvals=trace["y"], ticktext=labels, tickfont={"size": 9})
    return True


def heatmap_axes(x_label: str | None, y_label: str | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The x and y axes of a square heatmap with query 0 at the top (None: no axis title)."""
    axis = {"constrain": "domain", "showgrid": False, "automargin": True}
    xaxis: dict[str, Any] = {**axis}
    yaxis: dict[str, Any] = {"autorange": "reversed", "scaleanchor": "x", **axis}
    if x_label is not None:
        xaxis["title"] = {"text": x_label, "standoff": 2}
    if y_label is not None:
        yaxis["title"] = {"text": y_label, "standoff": 2}
    return xaxis, yaxis


# The layout every heatmap figure shares.
HEATMAP_LAYOUT = {
    "template": "none",  # "plotly_white" costs ~70 ms per figure to validate; heatmaps need no grid
    "plot_bgcolor": "white",
    "paper_bgcolor": "white",
    "font": {"color": "#31333F"},
}


def heatmap(
    a: np.ndarray,
    title: str = "",
    *,
    kind: str = "attention",
    log: bool = False,
    zmax: float | None = None,
    factor: int = 1,
    height: int = 320,
    colorbar: bool = True,
    x_label: str = "key j",
    y_label: str = "query i",
    hover_label: str = "value",
    labels: list[str] | None = None,
) -> go.Figure:
    """A square Plotly heatmap of a (block-reduced) matrix.

    kind: attention (viridis, optional log colour), error (symmetric red-blue, range = 99th percentile of
    the non-zero |values| unless zmax is given), mask (cividis),
    signed (viridis over the full signed range). factor: block size used by the reduction, so the
    axes and hover show original query/key indices.
    """
    trace = heatmap_trace(
        a,
        kind=kind,
        log=log,
        zmax=zmax,
        factor=factor,
        colorbar=colorbar,
        x_label=x_label,
        y_label=y_label,
        hover_label=hover_label,
    )
    xaxis, yaxis = heatmap_axes(x_label, y_label)
    xaxis["constraintoward"] = "right"  # beside its colour bar when the figure is wider than the map (exports)
    token_ticks(trace, labels, factor, xaxis, yaxis)
    layout = {
        "title": {"text": title, "font": {"size": 14}},
        "height": height,
        "margin": {"l": 10, "r": 10, "t": 36, "b": 10},
        "xaxis": xaxis,
        "yaxis": yaxis,
        **HEATMAP_LAYOUT,
    }
    # One validated construction from plain dicts: ~1 ms, against ~10 ms for property-by-property updates, and a
    # Compare rerun draws seven heatmaps.
    return go.Figure({"data": [trace], "layout": layout})


@dataclass(frozen=True)
class GridCell:
    """One map of ``heatmap_grid``: a (block-reduced) matrix with ``heatmap``'s colour options."""

    title: str
    z: np.ndarray
    kind: str = "attention"
    log: bool = False
    factor: int = 1
    hover_label: str = "value"
    name: str | None = None  # shown in the hover box
    x_title: bool = False  # "key j" under the map
    labels: list[str] | None = None  # a real model's tokens as tick labels (full resolution, n <= 64)
    zmax: float | None = None  # top of the colour range (None: the map's own), as ``heatmap``'s zmax


# Pixel sizes of a heatmap grid row: the title above a map and the tick labels (and axis title) below it.
GRID_TITLE_PX = 30
GRID_AXES_PX = 44
GRID_TOKENS_PX = 56  # more room below a row whose maps carry rotated token labels
GRID_COLORBAR = 0.26  # share of a column's width kept for the map's colour bar and its tick labels
GRID_TICKS = 0.045  # share of the figure's width left of every map, for its y tick labels
GRID_ONE_BAR = 0.07  # share of the figure's width right of the last column for a colour bar the maps share
GRID_GAP = 0.012  # share of the figure's width between two maps that share their y labels
GRID_WIDTH_PX = 1000  # about the main area's width: a map is as tall as it is drawn wide there, not taller


def heatmap_grid(
    rows: Sequence[Sequence[GridCell | None]],
    *,
    columns: int,
    map_px: int | None = None,
    one_colour_bar: bool = False,
) -> go.Figure:
    """Several square heatmaps in one figure: ``rows`` of cells (None leaves a cell empty), ``columns`` wide.

    Each map keeps its own colour bar, range and hover text, as ``heatmap`` draws it. One chart instead of one
    per map: the browser's fixed cost per chart (layout, theme pass, resize observers) is paid once per rerun.
    map_px: a map's largest height (default: about the width a column gets in a ~1000 px wide main area); never
    more than the map's width at ``GRID_WIDTH_PX``, so no band of white is left above and below a narrow map.
    one_colour_bar: the maps share one colour range (same kind, log and zmax) and one colour bar right of the
    last column; only the first column labels the query positions, so the maps are wider.
    Every map has the same width, the first column's included.
    """
    if one_colour_bar:
        width = (1.0 - GRID_TICKS - GRID_ONE_BAR) / columns
        boxes = [
            (GRID_TICKS + column * width + GRID_GAP / 2, GRID_TICKS + (column + 1) * width - GRID_GAP / 2)
            for column in range(columns)
        ]
    else:
        width = 1.0 / columns
        boxes = [
            (column * width + GRID_TICKS + 0.01, column * width + width * (1 - GRID_COLORBAR))
            for column in range(columns)
        ]
    drawn_px = int(min(x1 - x0 for x0, x1 in boxes) * GRID_WIDTH_PX)
    map_px = max(60, min(map_px or (260 if columns <= 3 else 200), drawn_px))
    below = [GRID_AXES_PX + (GRID_TOKENS_PX if any(c is not None and c.labels for c in cells) else 0) for cells in rows]
    tops = [sum(map_px + GRID_TITLE_PX + px for px in below[:row]) for row in range(len(rows))]
    plot_px = max(1, sum(map_px + GRID_TITLE_PX + px for px in below))
    bottom_of_last_row = 1 - (tops[-1] + GRID_TITLE_PX + map_px) / plot_px if rows else 0.0
    traces: list[dict[str, Any]] = []
    annotations: list[dict[str, Any]] = []
    layout: dict[str, Any] = {
        "height": plot_px + 10,
        "margin": {"l": 10, "r": 10, "t": 10, "b": 0},
        "showlegend": False,
        **HEATMAP_LAYOUT,
    }
    for row, cells in enumerate(rows):
        y_top = 1 - (tops[row] + GRID_TITLE_PX) / plot_px
        y_bottom = 1 - (tops[row] + GRID_TITLE_PX + map_px) / plot_px
        for column, cell in enumerate(cells[:columns]):
            if cell is None:
                continue
            k = len(traces) + 1
            x_name, y_name = ("x", "y") if k == 1 else (f"x{k}", f"y{k}")
            x0, x1 = boxes[column]
            if cell.labels and not one_colour_bar:
                x0 -= GRID_TICKS  # tokens read off the first column only (below): no room kept for labels here
            trace = heatmap_trace(
                cell.z,
                kind=cell.kind,
                log=cell.log,
                zmax=cell.zmax,
                factor=cell.factor,
                hover_label=cell.hover_label,
                name=cell.name,
                colorbar=not one_colour_bar or (row == 0 and column == len(cells[:columns]) - 1),
            )
            if one_colour_bar:  # right of the last column, from the first row's maps to the last row's
                bar_x, bar_top, bar_bottom = boxes[-1][1] + 0.01, 1 - GRID_TITLE_PX / plot_px, bottom_of_last_row
            else:
                bar_x, bar_top, bar_bottom = x1 + 0.005, y_top, y_bottom
            trace["colorbar"].update(
                x=bar_x,
                xanchor="left",
                y=(bar_top + bar_bottom) / 2,
                yanchor="middle",
                len=(bar_top - bar_bottom) * 0.95,
            )
            traces.append({**trace, "xaxis": x_name, "yaxis": y_name})
            xaxis, yaxis = heatmap_axes("key j" if cell.x_title else None, None)  # "query i": in the hover text
            # Map against its colour bar and under its title at any width (an export wider than the page
            # would otherwise centre it far from both).
            xaxis.update(domain=[x0, x1], anchor=y_name, constraintoward="right")
            yaxis.update(domain=[y_bottom, y_top], anchor=x_name, scaleanchor=x_name, constraintoward="top")
            if token_ticks(trace, cell.labels, cell.factor, xaxis, yaxis) and column:
                yaxis["showticklabels"] = False  # tokens read off the first column: words here would hit a colour bar
            if one_colour_bar and column:  # the same positions as the first column's, which labels them
                yaxis.update(showticklabels=False, ticks="")
            layout[f"xaxis{'' if k == 1 else k}"] = xaxis
            layout[f"yaxis{'' if k == 1 else k}"] = yaxis
            annotations.append(
                {
                    "text": cell.title,
                    "x": (x0 + x1) / 2,
                    "y": y_top,
                    "xref": "paper",
                    "yref": "paper",
                    "xanchor": "center",
                    "yanchor": "bottom",
                    "showarrow": False,
                    "font": {"size": 14},
                }
            )
    layout["annotations"] = annotations
    return go.Figure({"data": traces, "layout": layout})


def attention_top(a: np.ndarray, log: bool) -> float:
    """The top of an attention map's colour range in the units ``heatmap``'s zmax takes (log10 when ``log``)."""
    top = float(np.nanmax(np.asarray(a, dtype=np.float64))) if np.size(a) else 1.0
    return float(np.log10(max(top, LOG_FLOOR))) if log else top


def downsample_caption(n: int, factor: int) -> str:
    if factor <= 1:
        return f"Full resolution ({n} × {n})."
    side = -(-n // factor)
    return (
        f"Downsampled {factor}× for display ({n} × {n} → {side} × {side}): each pixel shows the largest value "
        f"in its {factor} × {factor} block. Download the PNG for full resolution."
    )


def line_figure(
    title: str, x_title: str, y_title: str, *, log_x: bool = False, log_y: bool = False, height: int = 380
) -> go.Figure:
    fig = go.Figure()
    fig.update_layout(
        title={"text": title, "font": {"size": 14}},
        height=height,
        template="plotly_white",
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
        xaxis={"title": x_title, "type": "log" if log_x else "linear"},
        yaxis={"title": y_title, "type": "log" if log_y else "linear"},
        legend={"orientation": "h", "yanchor": "top", "y": -0.18, "x": 0},
    )
    fig.update_layout(margin={"l": 10, "r": 10, "t": 40, "b": 10})
    return fig


PRESENTER_FONT = 20  # figure text in presenter view: readable from the back of a room at 1280 x 720
PRESENTER_LEGEND_ROWS = 3  # the most legend rows moved above a chart in presenter view
# A trace's ``meta`` key for its legend name in presenter view: a figure whose legend names are long for the legend's
# wrapped rows on a projector (Error vs cost's "Pareto front (no point is ...)") gives each trace a shorter one.
PRESENTER_NAME = "presenter_name"


PRESENTER_PLOT_PX = 1000  # about a full-width presenter chart's plot area at 1280 x 720: a legend row's width
# The tallest chart of curves in presenter view: what a 1280 x 720 projector shows under the page's title (which ends
# near 160 px), so that the x axis and its title are on the first screen. Maps keep their height: they are drawn square.
PRESENTER_CHART_PX = 550


def legend_widths(names: Sequence[str], size: int) -> list[float]:
    """Each legend entry's width in px, over-estimated: about 0.5 em per character and 3 em for the line sample."""
    return [(len(name) * 0.5 + 3) * size for name in names]


def legend_rows(names: Sequence[str], size: int, *, grouped: bool = False) -> int:
    """Rows a horizontal legend of these entries wraps onto in a presenter chart (about 1,150 px wide, its plot area
    about 1,000), at about 0.5 em per character and 3 em for the line sample. plotly.js lays a legend out in columns
    as wide as its longest entry, but one whose entries all have a legend group entry by entry, each as wide as its
    own name (so a row holds more of them)."""
    widths = legend_widths(names, size)
    if not widths:
        return 0
    if not grouped:
        return math.ceil(len(widths) / max(1, int(1150 // max(widths))))
    rows, used = 1, 0.0
    for width in widths:
        if used and used + width > PRESENTER_PLOT_PX:
            rows, used = rows + 1, 0.0
        used += width
    return rows


def _over_the_plot(annotation: Any) -> bool:
    """A title over the top row of plots: placed on the paper at its top edge, standing on it."""
    return annotation.yref == "paper" and annotation.yanchor == "bottom" and (annotation.y or 0.0) >= 0.999


def presenter_figure(fig: go.Figure, size: int = PRESENTER_FONT) -> go.Figure:
    """A copy of ``fig`` with every text enlarged for a projector (titles, ticks, legend, colour bar)."""
    big = go.Figure(fig)
    narrow = any(trace.type == "heatmap" for trace in big.data)  # heatmaps sit in narrow columns: no larger title
    big.update_layout(
        font={"size": size},
        title_font_size=round(size * 0.8) if narrow else round(size * 1.25),
        legend_font_size=size,
    )
    # Room for the larger title; a figure without one (a grid of maps, subplots titled by annotations) keeps none.
    title_px = round(size * 3.2) if big.layout.title.text else 0
    if title_px:
        big.update_layout(margin={"t": title_px})
    big.update_xaxes(title_font_size=size, tickfont_size=round(size * 0.9))
    big.update_yaxes(title_font_size=size, tickfont_size=round(size * 0.9))
    # Map titles over a grid's narrow columns: the title size, or a long one runs past the chart's edge.
    big.update_annotations(font_size=round(size * 0.8) if narrow else size)
    big.update_traces(colorbar_tickfont_size=round(size * 0.9), selector={"type": "heatmap"})
    for trace in big.data:
        if isinstance(trace.meta, dict) and trace.meta.get(PRESENTER_NAME):
            trace.name = trace.meta[PRESENTER_NAME]
    legend = [t for t in big.data if t.showlegend is not False and t.name]
    grouped = all(t.legendgroup for t in legend)
    rows = legend_rows([str(t.name) for t in legend], size, grouped=grouped)
    legend_above = bool(legend) and not narrow and not big.frames and rows <= PRESENTER_LEGEND_ROWS
    if big.layout.height is not None:
        height = round(big.layout.height * 1.25)
        # A chart of curves with nothing under its plot fits the first screen; one whose long legend stays below
        # (Scaling's) keeps the height made for it, or the legend squeezes the plot.
        fits = not narrow and (legend_above or not legend)
        big.update_layout(height=min(height, PRESENTER_CHART_PX) if fits else height)
    if legend_above:
        # The legend above the plot, under the title: a projector's first screen shows the top of a tall chart, and a
        # legend below it (where most charts keep it) is off screen, so the class cannot tell the curves apart. A
        # longer legend stays where the figure put it: above, it filled the first screen (Scaling, Error vs cost).
        # Room for subplot titles over the top row (make_subplots' annotations), not for notes drawn inside the plot
        # (a line's label, on Error vs entropy), which left a blank band between the title and the legend.
        titled = any(_over_the_plot(a) for a in big.layout.annotations)
        subplot_titles = 1.4 * size if titled else 0.0
        # The title pinned to the top needs two lines of its size where the legend's rows are counted safely (entry
        # by entry, or one row that fits); a legend laid out in columns may take a row more than counted (Kernels'),
        # and the title's full room keeps that row off the title.
        one_row = rows == 1 and sum(legend_widths([str(t.name) for t in legend], size)) <= PRESENTER_PLOT_PX
        title_room = min(title_px, 2 * size) if grouped or one_row else title_px
        big.update_layout(
            legend={"orientation": "h", "x": 0, "xanchor": "left", "y": 1.0, "yanchor": "bottom"},
            margin={"t": round(title_room + size * 0.6 + rows * size * 1.9 + subplot_titles)},
            title={"y": 1.0, "yref": "container", "yanchor": "top", "pad": {"t": round(size * 0.6)}},  # over the legend
        )
        if titled:  # subplot titles sit just over their plots, under the legend
            big.update_layout(legend_y=1.0 + subplot_titles / max(1, (big.layout.height or 450)))
    return big
