"""Serve the app's Plotly bundle, and start loading it while Streamlit itself is still booting in the browser.

The app draws its figures with Plotly's cartesian bundle (``ui/plotly_chart.py``, 1.5 MB of JavaScript, vendored in
``assets/vendor``). ``PlotlyBundle`` answers its URL, ``<base URL path>/vendor/<file>``, from memory (gzipped when
the browser accepts it, cached for a year: the name carries the version). The documents of the pages that open on a
chart also get a tiny script in their head that requests the bundle at once, in parallel with Streamlit's boot, so it
is evaluated before the first chart's message arrives; the charts' component then finds it loaded (one shared
promise, ``LOADER``). The same script imports Streamlit's own chunk for v2 components, which Streamlit would fetch
only when the first chart's message arrives: on a cold Compare visit that cut the time from the websocket's first
message to the first drawn chart from about 1.3 s to 0.4 s (a throwaway timeline probe, 3 fresh servers each).
``deploy/serve.py`` installs it.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import streamlit as st
from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from core import config
from ui.plotly_bundle import BUNDLE_FILE, BUNDLE_NAME, BUNDLE_PATH, LOADER, PLOTLY_JS_VERSION

BUNDLE_VARIABLE = config.variable("plotly_bundle")  # "served" where this middleware serves BUNDLE_PATH
STREAMLIT_JS = Path(st.__file__).parent / "static" / "static" / "js"


def component_chunk(js_dir: Path = STREAMLIT_JS) -> str | None:
    """File name of the installed Streamlit's chunk for v2 components (its name carries a content hash), or None."""
    found = sorted(js_dir.glob("BidiComponent.*.js"))
    return found[0].name if len(found) == 1 else None


def head_tag(chunk: str | None = None) -> bytes:
    """The bundle's loader, and an import of Streamlit's component chunk by the URL its own bundle uses (relative to
    the document, like index.html's own script). Streamlit fetches that chunk only when the first component's
    message arrives, and the chart cannot mount before it is in; a failed import only loses the head start."""
    chunk = chunk or component_chunk()
    tag = f"<script>{LOADER}</script>"
    if chunk:
        tag += f'<script type="module">import("./static/js/{chunk}").catch(() => {{}});</script>'
    return tag.encode()


HEAD_TAG = head_tag()


def page_path(scope: Scope) -> str:
    """The page's URL path without the mount point, the base URL path and slashes ("" for Home)."""
    base = str(st.get_option("server.baseUrlPath") or "").strip("/")
    path = scope.get("path", "/")[len(scope.get("root_path", "").rstrip("/")) :].strip("/")
    if base and (path == base or path.startswith(f"{base}/")):
        path = path[len(base) :].strip("/")
    return path


class PlotlyBundle:
    """Pure ASGI middleware: answers GET/HEAD of ``BUNDLE_PATH``, and adds ``HEAD_TAG`` before ``</head>`` of the HTML
    document of every page that opens on a chart (each page's path answers with Streamlit's index.html). Other
    requests pass through untouched."""

    def __init__(self, app: ASGIApp, bundle: Path = BUNDLE_FILE) -> None:
        # Imported here, not at the top: importing `ui` before st.App has read Streamlit's config would be too early.
        from ui.page_registry import NO_CHART_AT_OPEN

        self.app = app
        # Pages that open without a Plotly chart (Home, Paper claims' tables) get no head start: there the evaluation
        # would only delay the first paint (Home's by about 0.9 s on a 2-core machine, with Streamlit's full bundle).
        self.no_chart_at_open = NO_CHART_AT_OPEN
        self.bundle = bundle.read_bytes()
        self.bundle_gzip = gzip.compress(self.bundle, compresslevel=9)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in ("GET", "HEAD"):
            await self.app(scope, receive, send)
            return
        path = page_path(scope)
        if path == BUNDLE_PATH or path.endswith(f"/{BUNDLE_PATH}"):  # e.g. under a page's URL with a trailing slash
            await self._send_bundle(scope, send)
            return
        if scope["method"] != "GET" or path in self.no_chart_at_open:
            await self.app(scope, receive, send)
            return
        start: Message | None = None
        body: list[bytes] = []

        async def send_html(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                headers = MutableHeaders(raw=message["headers"])
                if headers.get("content-type", "").startswith("text/html") and message.get("status") == 200:
                    start = message  # held until the whole (small) document is here
                    return
            elif message["type"] == "http.response.body" and start is not None:
                body.append(message.get("body", b""))
                if message.get("more_body", False):
                    return
                await self._send_injected(start, b"".join(body), send)
                return
            await send(message)

        await self.app(scope, receive, send_html)

    async def _send_bundle(self, scope: Scope, send: Send) -> None:
        zipped = "gzip" in Headers(scope=scope).get("accept-encoding", "")
        body = self.bundle_gzip if zipped else self.bundle
        headers = MutableHeaders()
        headers["content-type"] = "text/javascript; charset=utf-8"
        headers["content-length"] = str(len(body))
        headers["cache-control"] = "public, max-age=31536000, immutable"  # the file name carries the version
        headers["vary"] = "Accept-Encoding"
        if zipped:
            headers["content-encoding"] = "gzip"
        await send({"type": "http.response.start", "status": 200, "headers": headers.raw})
        await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body})

    async def _send_injected(self, start: Message, document: bytes, send: Send) -> None:
        headers = MutableHeaders(raw=list(start["headers"]))
        if headers.get("content-encoding") == "gzip":  # Streamlit's gzip middleware may compress page paths
            document = gzip.decompress(document)
            del headers["content-encoding"]
        if b"</head>" in document:
            document = document.replace(b"</head>", HEAD_TAG + b"</head>", 1)
        headers["content-length"] = str(len(document))
        await send({**start, "headers": headers.raw})
        await send({"type": "http.response.body", "body": document, "more_body": False})


__all__ = ["BUNDLE_FILE", "BUNDLE_NAME", "BUNDLE_PATH", "LOADER", "PLOTLY_JS_VERSION", "PlotlyBundle"]
