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


def static_image(
    fig: go.Figure, fmt: Literal["png", "svg"], *, width: int | None = None, height: int | None = None
) -> bytes:
    """The figure as drawn by Plotly itself: axes, title, colour bar and legend included."""
    if fmt not in ("png", "svg"):
        raise ValueError(f"format must be 'png' or 'svg', got {fmt!r}")
    width = width or int(fig.layout.width or EXPORT_WIDTH)
    height = height or int(fig.layout.height or EXPORT_HEIGHT)
    with _LOCK, warnings.catch_warnings():
        # Plotly passes browser options that a running kaleido server ignores; the warning says only that.
        warnings.filterwarnings("ignore", message="The kopts argument is ignored", category=UserWarning)
        _ensure_server()
        return bytes(fig.to_image(format=fmt, width=width, height=height, scale=2 if fmt == "png" else 1))
