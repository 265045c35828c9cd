"""The app's Plotly bundle: its file, its URL path under the app, and the one script that loads it in the browser.

Declared here, below ``deploy/``: the charts (``ui/plotly_chart.py``) and the server's middleware that serves the
bundle and starts loading it early (``deploy/preload.py``) share these, and nothing below ``deploy/`` imports it.
"""

from __future__ import annotations

from pathlib import Path

PLOTLY_JS_VERSION = "4.1.1"
BUNDLE_NAME = f"plotly-cartesian-{PLOTLY_JS_VERSION}.min.js"
BUNDLE_FILE = Path(__file__).resolve().parent.parent / "assets" / "vendor" / BUNDLE_NAME
BUNDLE_PATH = f"vendor/{BUNDLE_NAME}"  # URL path under the app's base URL path (each page is one level below it)

# Fetches and evaluates the bundle once per page: every chart (ui/plotly_chart.py) and the head tag share the promise.
LOADER = (
    "window.__aePlotly = window.__aePlotly || new Promise((resolve, reject) => {"
    ' const script = document.createElement("script");'
    f' script.src = new URL("{BUNDLE_PATH}", document.baseURI).href;'
    " script.onload = () => resolve(window.Plotly);"
    ' script.onerror = () => reject(new Error("the chart library did not load"));'
    " document.head.appendChild(script); });"
)
