"""Figures on the page: ``show_figure`` draws a Plotly figure with its Export menu (PNG, SVG, HTML, the data and the
settings), and ``explain`` the plain sentences and formula beside a view.

The figures themselves are built by ``ui.figures`` (pure Plotly, no Streamlit); this module is where they meet
Streamlit.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from ui.export import chromium_path, static_image
from ui.figures import presenter_figure
from ui.page_lifecycle import presenter_mode, settings_payload
from ui.plotly_chart import plotly_chart

PLOTLY_CONFIG = {"displaylogo": False, "toImageButtonOptions": {"format": "png", "scale": 2}}


def _data_bytes(data: Any) -> tuple[bytes, str, str]:
    if isinstance(data, pd.DataFrame):
        return data.to_csv(index=False).encode("utf-8"), "csv", "text/csv"
    if isinstance(data, Mapping):
        buffer = io.BytesIO()
        arrays: dict[str, Any] = {str(k): np.asarray(v) for k, v in data.items()}
        np.savez_compressed(buffer, **arrays)
        return buffer.getvalue(), "npz", "application/octet-stream"
    return json.dumps(data, default=str, indent=2).encode("utf-8"), "json", "application/json"


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
