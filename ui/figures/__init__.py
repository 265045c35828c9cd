"""Figure builders (Plotly), full-resolution PNGs (Pillow + colormap LUT) and the export popover.

Colormaps are colour-blind safe: viridis for attention, cividis for masks and buckets, a symmetric
red-blue diverging map for signed errors. Every chart is passed its colorscale explicitly (theme=None).
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import plotly.colors as pcolors
import plotly.graph_objects as go
import streamlit as st
from PIL import Image

from ui.export import chromium_path, static_image
from ui.plotly_chart import plotly_chart
from ui.state import presenter_mode, settings_payload

ATTENTION_SCALE = "Viridis"
MASK_SCALE = "Cividis"
ERROR_SCALE = "RdBu_r"  # negative (under-estimate) blue, positive (over-estimate) red
LOG_FLOOR = 1e-6
# Okabe-Ito: distinguishable with the common colour-vision deficiencies.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000", "#999999"]
PLOTLY_CONFIG = {"displaylogo": False, "toImageButtonOptions": {"format": "png", "scale": 2}}


def method_colour(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


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


# Pixel sizes of a heatmap grid row: the title above a map and the tick labels (and axis title) below it.
GRID_TITLE_PX = 30
GRID_AXES_PX = 44
GRID_TOKENS_PX = 56  # more room below a row whose maps carry rotated token labels
GRID_COLORBAR = 0.26  # share of a column's width kept for the map's colour bar and its tick labels
GRID_TICKS = 0.045  # share of the figure's width left of a map past the first column, for its y tick labels


def heatmap_grid(rows: Sequence[Sequence[GridCell | None]], *, columns: int, map_px: int | None = None) -> go.Figure:
    """Several square heatmaps in one figure: ``rows`` of cells (None leaves a cell empty), ``columns`` wide.

    Each map keeps its own colour bar, range and hover text, as ``heatmap`` draws it. One chart instead of one
    per map: the browser's fixed cost per chart (layout, theme pass, resize observers) is paid once per rerun.
    map_px: a map's height (default: about the width a column gets in a ~1000 px wide main area).
    """
    map_px = map_px or (260 if columns <= 3 else 200)
    below = [GRID_AXES_PX + (GRID_TOKENS_PX if any(c is not None and c.labels for c in cells) else 0) for cells in rows]
    tops = [sum(map_px + GRID_TITLE_PX + px for px in below[:row]) for row in range(len(rows))]
    plot_px = max(1, sum(map_px + GRID_TITLE_PX + px for px in below))
    width = 1.0 / columns
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
            x0, x1 = column * width, column * width + width * (1 - GRID_COLORBAR)
            x0 += GRID_TICKS if column and not cell.labels else 0.0  # room for this map's own position labels
            trace = heatmap_trace(
                cell.z, kind=cell.kind, log=cell.log, factor=cell.factor, hover_label=cell.hover_label, name=cell.name
            )
            trace["colorbar"].update(
                x=x1 + 0.005, xanchor="left", y=(y_top + y_bottom) / 2, yanchor="middle", len=(y_top - y_bottom) * 0.95
            )
            traces.append({**trace, "xaxis": x_name, "yaxis": y_name})
            xaxis, yaxis = heatmap_axes("key j" if cell.x_title else None, None)  # "query i": in the hover text
            # Map against its colour bar and under its title at any width (an export wider than the page
            # would otherwise centre it far from both).
            xaxis.update(domain=[x0 + 0.01, x1], anchor=y_name, constraintoward="right")
            yaxis.update(domain=[y_bottom, y_top], anchor=x_name, scaleanchor=x_name, constraintoward="top")
            if token_ticks(trace, cell.labels, cell.factor, xaxis, yaxis) and column:
                yaxis["showticklabels"] = False  # tokens read off the first column: words here would hit a colour bar
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


# ------------------------------------------------------------------ export


def _data_bytes(data: Any) -> tuple[bytes, str, str]:
    if isinstance(data, pd.DataFrame):
        return data.to_csv(index=False).encode("utf-8"), "csv", "text/csv"
    if isinstance(data, Mapping):
        buffer = io.BytesIO()
        np.savez_compressed(buffer, **{str(k): np.asarray(v) for k, v in data.items()})
        return buffer.getvalue(), "npz", "application/octet-stream"
    return json.dumps(data, default=str, indent=2).encode("utf-8"), "json", "application/json"


PRESENTER_FONT = 20  # figure text in presenter view: readable from the back of a room at 1280 x 720


def presenter_figure(fig: go.Figure, size: int = PRESENTER_FONT) -> go.Figure:
    """A copy of ``fig`` with every text enlarged for a projector (titles, ticks, legend, colour bar)."""
    big = go.Figure(fig)
    narrow = any(trace.type == "heatmap" for trace in big.data)  # heatmaps sit in narrow columns: no larger title
    big.update_layout(
        font={"size": size},
        title_font_size=round(size * 0.8) if narrow else round(size * 1.25),
        legend_font_size=size,
        margin={"t": round(size * 3.2)},
    )
    big.update_xaxes(title_font_size=size, tickfont_size=round(size * 0.9))
    big.update_yaxes(title_font_size=size, tickfont_size=round(size * 0.9))
    # Map titles over a grid's narrow columns: the title size, or a long one runs past the chart's edge.
    big.update_annotations(font_size=round(size * 0.8) if narrow else size)
    big.update_traces(colorbar_tickfont_size=round(size * 0.9), selector={"type": "heatmap"})
    if big.layout.height is not None:
        big.update_layout(height=round(big.layout.height * 1.25))
    return big


def _static(fig: go.Figure, fmt: str) -> bytes:
    return static_image(fig, "png" if fmt == "png" else "svg")


def show_figure(
    fig: go.Figure,
    name: str,
    *,
    data: Any = None,
    png: Callable[[], bytes] | None = None,
    key: str | None = None,
    caption: str | None = None,
    where: Any = None,
    png_label: str = "PNG",
    data_note: str | None = None,
    parts: Mapping[str, Mapping[str, Any]] | None = None,
) -> None:
    """Draw a Plotly figure with an Export menu: PNG, interactive HTML, the data (CSV/NPZ) and the settings.

    png: a callable making a PNG with Pillow (heatmaps: one pixel per entry, no axes), offered beside the PNG and
    SVG of the figure itself (drawn on the server by kaleido). png_label: e.g. "PNG (full resolution)".
    data: a DataFrame (CSV), a dict of arrays (NPZ), or a callable returning such a dict (made only when the
    button is pressed: use it for full-resolution numbers). data_note: a line under the data button saying what
    it holds (or why it holds less, e.g. a refusal by the server limits).
    parts: for a figure of several maps, each map's own exports by name (the keyword arguments png, png_label,
    data, data_note); the menu offers one map at a time, chosen in a select box.
    """
    where = where or st
    key = key or name
    slug = _slug(name, "figure")
    if presenter_mode():
        fig = presenter_figure(fig)
    plotly_chart(fig, key=f"chart_{key}", config=PLOTLY_CONFIG, where=where)
    # Caption and menu share a row that wraps: fixed columns cut the button to "E…" in a half-width chart.
    row = where.container(horizontal=True, gap="small") if caption else where
    if caption:
        row.caption(caption)
    # The menu's buttons are built only while it is open: closed, a figure costs one element, not seven download
    # registrations in Streamlit's media-file manager on every rerun (a Compare rerun draws seven figures).
    menu = row.popover("Export", icon=":material/download:", width="content", key=f"export_{key}", on_change="rerun")
    with menu:
        if menu.open:
            if parts:
                _part_buttons(parts, slug, key)
            _export_buttons(fig, slug, key, png, png_label, data, data_note)


def _slug(name: str, default: str) -> str:
    """A file-name stem from a figure's or map's name: letters and digits, the rest as underscores."""
    return "".join(ch if ch.isalnum() else "_" for ch in name).strip("_").lower() or default


def _download(label: str, data: Any, file_name: str, key: str, mime: str | None = None) -> None:
    """One full-width button of the Export menu; pressing it does not rerun the page."""
    st.download_button(label, data=data, file_name=file_name, mime=mime, key=key, on_click="ignore", width="stretch")


def _part_buttons(parts: Mapping[str, Mapping[str, Any]], slug: str, key: str) -> None:
    """One map of a several-map figure: its full-resolution PNG and data (the chosen one's only)."""
    name = st.selectbox("Map", list(parts), key=f"part_{key}")
    chosen = parts[name]
    part_slug = _slug(name, "map")
    if chosen.get("png") is not None:
        label = chosen.get("png_label", "PNG")
        _download(label, chosen["png"], f"{slug}_{part_slug}.png", f"part_png_{key}", "image/png")
    data = chosen.get("data")
    if data is not None:
        _download(
            "Data (NPZ)",
            lambda: _data_bytes(data() if callable(data) else data)[0],
            f"{slug}_{part_slug}.npz",
            f"part_data_{key}",
        )
    if chosen.get("data_note"):
        st.caption(chosen["data_note"])
    st.divider()


def _export_buttons(
    fig: go.Figure,
    slug: str,
    key: str,
    png: Callable[[], bytes] | None,
    png_label: str,
    data: Any,
    data_note: str | None,
) -> None:
    """The Export menu's contents: every button makes its bytes only when pressed."""
    if png is not None:
        _download(png_label, png, f"{slug}.png", f"png_{key}", "image/png")
    static_formats = ("png", "svg") if chromium_path() else ()
    if not static_formats:
        st.caption("PNG/SVG of the figure: the server has no Chromium (Debian: apt-get install chromium).")
    for fmt in static_formats:
        _download(
            f"{fmt.upper()} (figure with axes, title and colour bar)",
            lambda fmt=fmt: _static(fig, fmt),
            f"{slug}.{fmt}",
            f"{fmt}_figure_{key}",
            "image/png" if fmt == "png" else "image/svg+xml",
        )
    _download(
        "HTML (interactive)",
        lambda: fig.to_html(include_plotlyjs=True, full_html=True),
        f"{slug}.html",
        f"html_{key}",
        "text/html",
    )
    _download(
        "HTML (light: loads plotly.js from its CDN)",
        lambda: fig.to_html(include_plotlyjs="cdn", full_html=True),
        f"{slug}_light.html",
        f"html_light_{key}",
        "text/html",
    )
    if data is not None:

        def make_data() -> bytes:
            return _data_bytes(data() if callable(data) else data)[0]

        ext = (
            "csv"
            if isinstance(data, pd.DataFrame)
            else "npz"
            if isinstance(data, Mapping) or callable(data)
            else "json"
        )
        _download(f"Data ({ext.upper()})", make_data, f"{slug}.{ext}", f"data_{key}")
    if data_note:
        st.caption(data_note)
    try:
        payload = json.dumps(settings_payload(), indent=2)
    except RuntimeError:  # used outside a ui.page
        return
    _download("Settings (JSON)", payload, f"{slug}_settings.json", f"set_{key}", "application/json")


def explain(text: str, formula: str | None = None, where: Any = None) -> None:
    """Two or three plain sentences for a student, plus the formula behind the view."""
    where = where or st
    where.markdown(text)
    if formula:
        where.latex(formula)
