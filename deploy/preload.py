"""Start loading Streamlit's Plotly chart code while Streamlit itself is still booting in the browser.

Streamlit fetches its Plotly chunk (about 4.7 MB of JavaScript) only when the first chart arrives over the
websocket, after its own boot, and evaluating it takes about a second on a small CPU. Most pages of this app open
on a Plotly chart, so ``PreloadPlotly`` makes their documents ask for that chunk at once, in parallel with the
boot: the browser evaluates it once, and Streamlit's own lazy import finds it loaded (same URL, same module).
``deploy/serve.py`` installs it.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import streamlit as st
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

STREAMLIT_JS = Path(st.__file__).parent / "static" / "static" / "js"


def plotly_chunk(js_dir: Path = STREAMLIT_JS) -> str | None:
    """File name of the installed Streamlit's Plotly chunk (its name carries a content hash), or None."""
    found = sorted(js_dir.glob("PlotlyChart.*.js"))
    return found[0].name if len(found) == 1 else None


def preload_tag(chunk: str) -> bytes:
    """An inline module that imports the chunk by the URL Streamlit's bundle uses (relative to the document, like
    index.html's own script, so it also works under a base URL path). A failure only loses the head start."""
    return f'<script type="module">import("./static/js/{chunk}").catch(() => {{}});</script>'.encode()


# Pages (URL paths; "" is Home) that open without a Plotly chart: Scaling's charts wait for its Measure button and
# Paper claims shows tables. There the evaluation would only delay the first paint (Home's by about 0.9 s on a
# 2-core machine). tests/test_app_pages.py checks this list against what each page draws at open.
NO_CHART_AT_OPEN = frozenset({"", "Scaling", "Paper_claims"})


def page_path(scope: Scope) -> str:
    """The page's URL path without the mount point, the base URL path and slashes ("" for Home)."""
    base = str(st.get_option("server.baseUrlPath") or "").strip("/")
    path = scope.get("path", "/")[len(scope.get("root_path", "").rstrip("/")) :].strip("/")
    if base and (path == base or path.startswith(f"{base}/")):
        path = path[len(base) :].strip("/")
    return path


def opens_without_chart(scope: Scope) -> bool:
    return page_path(scope) in NO_CHART_AT_OPEN


class PreloadPlotly:
    """Pure ASGI middleware: adds ``preload_tag`` before ``</head>`` of the HTML document of every page that opens on
    a chart (each page's path answers with Streamlit's index.html). Other responses pass through untouched."""

    def __init__(self, app: ASGIApp, chunk: str | None = None) -> None:
        self.app = app
        chunk = chunk or plotly_chunk()
        self.tag = preload_tag(chunk) if chunk else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.tag is None or scope["type"] != "http" or scope["method"] != "GET" or opens_without_chart(scope):
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

    async def _send_injected(self, start: Message, document: bytes, send: Send) -> None:
        headers = MutableHeaders(raw=list(start["headers"]))
        if headers.get("content-encoding") == "gzip":  # Streamlit's gzip middleware may compress page paths
            document = gzip.decompress(document)
            del headers["content-encoding"]
        if b"</head>" in document and self.tag is not None:
            document = document.replace(b"</head>", self.tag + b"</head>", 1)
        headers["content-length"] = str(len(document))
        await send({**start, "headers": headers.raw})
        await send({"type": "http.response.body", "body": document, "more_body": False})
