"""Static figure export (PNG, SVG) through Plotly's own exporter, kaleido, on the system Chromium.

kaleido drives a headless Chromium that is already on the machine (Debian's ``chromium``, the browser the tests use);
it never downloads one, so export works offline. One browser is kept running per server process (kaleido's sync
server) because starting Chromium costs seconds; calls are serialised through a lock.
"""

from __future__ import annotations

import os
import shutil
import threading
import warnings
from typing import Literal

import plotly.graph_objects as go

EXPORT_WIDTH = 900  # CSS pixels of the exported figure; PNG is drawn at 2x for print
EXPORT_HEIGHT = 700
_LOCK = threading.Lock()
_STARTED = False


class ExportUnavailable(RuntimeError):
    """No Chromium to draw with; the message says what to install."""


def chromium_path() -> str | None:
    """The browser kaleido will use: $BROWSER_PATH, else Debian's chromium, else any chromium/chrome on PATH."""
    for candidate in (os.environ.get("BROWSER_PATH"), "/usr/bin/chromium"):
        if candidate and os.path.exists(candidate):
            return candidate
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _ensure_server() -> None:
    global _STARTED
    if _STARTED:
        return
    browser = chromium_path()
    if browser is None:
        raise ExportUnavailable("PNG/SVG export needs Chromium on the server (Debian: apt-get install chromium).")
    os.environ.setdefault("BROWSER_PATH", browser)
    import kaleido

    kaleido.start_sync_server(silence_warnings=True)
    _STARTED = True


MAP_EXTRA_PX = 150  # room beside square maps for the y title, tick labels and a colour bar outside the plot


def _margins(fig: go.Figure) -> tuple[float, float, float, float]:
    m = fig.layout.margin
    return tuple(80.0 if v is None else float(v) for v in (m.l, m.r, m.t, m.b))  # type: ignore[return-value]


def heatmap_width(fig: go.Figure, height: int) -> int | None:
    """The export width at which a figure of square-pixel maps (heatmaps only) fills its width: each map as tall
    as its row and no wider than it needs. None for other figures (they keep ``EXPORT_WIDTH``).

    The page's width fits its columns; a fixed 900 px export of a one-column figure left each map far from its
    colour bar (the issue's Compare PNG).
    """
    if not fig.data or any(trace.type != "heatmap" for trace in fig.data):
        return None
    left, right, top, bottom = _margins(fig)
    plot_height = max(1.0, height - top - bottom)
    need = 0.0
    for trace in fig.data:
        suffix_x, suffix_y = (trace.xaxis or "x")[1:], (trace.yaxis or "y")[1:]
        x_domain = fig.layout[f"xaxis{suffix_x}"].domain or (0.0, 1.0)
        y_domain = fig.layout[f"yaxis{suffix_y}"].domain or (0.0, 1.0)
        rows, cols = (len(trace.z), len(trace.z[0])) if trace.z is not None and len(trace.z) else (1, 1)
        map_px = (y_domain[1] - y_domain[0]) * plot_height * cols / rows
        need = max(need, map_px / max(1e-6, x_domain[1] - x_domain[0]))
    return int(min(EXPORT_WIDTH, max(300, need + left + right + MAP_EXTRA_PX)))


def static_image(
    fig: go.Figure, fmt: Literal["png", "svg"], *, width: int | None = None, height: int | None = None
) -> bytes:
    """The figure as drawn by Plotly itself: axes, title, colour bar and legend included. Maps are exported at
    the width they fill (``heatmap_width``)."""
    if fmt not in ("png", "svg"):
        raise ValueError(f"format must be 'png' or 'svg', got {fmt!r}")
    height = height or int(fig.layout.height or EXPORT_HEIGHT)
    width = width or int(fig.layout.width or heatmap_width(fig, height) or EXPORT_WIDTH)
    with _LOCK, warnings.catch_warnings():
        # Plotly passes browser options that a running kaleido server ignores; the warning says only that.
        warnings.filterwarnings("ignore", message="The kopts argument is ignored", category=UserWarning)
        _ensure_server()
        return bytes(fig.to_image(format=fmt, width=width, height=height, scale=2 if fmt == "png" else 1))
