"""deploy/preload.py: the server answers the Plotly bundle's URL, and the page documents ask for it at once; nothing
else changes."""

from __future__ import annotations

import asyncio
import concurrent.futures
import gzip
import re
from pathlib import Path
from typing import Any

import pytest

from deploy import preload

BUNDLE = b"/* a stand-in for plotly.js */ window.Plotly = {};" * 50
TAG = preload.HEAD_TAG


def run(coroutine: Any) -> None:
    """asyncio.run in a thread of its own: the browser tests leave Playwright's event loop running in this one."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(asyncio.run, coroutine).result()


def call(
    app: Any,
    *,
    method: str = "GET",
    path: str = "/Compare",
    root: str = "",
    headers: list[tuple[bytes, bytes]] | None = None,
) -> tuple[dict[str, Any], bytes]:
    """Run one HTTP request through an ASGI app; (response start message, whole body)."""
    messages: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        messages.append(message)

    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "root_path": root,
        "headers": headers or [],
        "query_string": b"",
    }
    run(app(scope, receive, send))
    start = next(m for m in messages if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.response.body")
    return start, body


def responder(body: bytes, *, content_type: str, status: int = 200, encoding: str | None = None, parts: int = 1) -> Any:
    """A stand-in for Streamlit's app: answers every request with ``body``, split into ``parts`` messages."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        headers = [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode())]
        if encoding:
            headers.append((b"content-encoding", encoding.encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        step = max(1, -(-len(body) // parts))
        chunks = [body[i : i + step] for i in range(0, len(body), step)] or [b""]
        for i, chunk in enumerate(chunks):
            await send({"type": "http.response.body", "body": chunk, "more_body": i < len(chunks) - 1})

    return app


DOCUMENT = b"<!DOCTYPE html><html><head><title>Streamlit</title></head><body><div id=root></div></body></html>"


def bundle_app(inner: Any) -> preload.PlotlyBundle:
    app = preload.PlotlyBundle(inner)
    app.bundle, app.bundle_gzip = BUNDLE, gzip.compress(BUNDLE)  # a small stand-in keeps the assertions readable
    return app


def header(start: dict[str, Any], name: str) -> str | None:
    for key, value in start["headers"]:
        if key.decode().lower() == name:
            return value.decode()
    return None


@pytest.mark.parametrize("parts", [1, 3])
def test_a_page_document_requests_the_bundle_in_its_head(parts: int) -> None:
    app = bundle_app(responder(DOCUMENT, content_type="text/html; charset=utf-8", parts=parts))
    start, body = call(app)
    head = body.split(b"</head>")[0].decode()
    assert f'new URL("{preload.BUNDLE_PATH}", document.baseURI)' in head  # relative: works under a base URL path
    assert body.count(preload.BUNDLE_NAME.encode()) == 1
    assert body.replace(TAG, b"") == DOCUMENT  # nothing else changed
    assert header(start, "content-length") == str(len(body))
    assert start["status"] == 200


def test_a_gzipped_document_is_unpacked_and_served_plain_with_the_tag() -> None:
    app = bundle_app(responder(gzip.compress(DOCUMENT), content_type="text/html", encoding="gzip"))
    start, body = call(app)
    assert header(start, "content-encoding") is None
    assert body.replace(TAG, b"") == DOCUMENT
    assert header(start, "content-length") == str(len(body))


@pytest.mark.parametrize(
    ("content_type", "status", "method"),
    [
        ("application/javascript", 200, "GET"),  # static files
        ("application/json", 200, "GET"),  # health, host-config
        ("text/html", 304, "GET"),  # the browser's cached copy stands
        ("text/html", 200, "HEAD"),
        ("text/html", 200, "POST"),
    ],
)
def test_everything_else_passes_through_unchanged(content_type: str, status: int, method: str) -> None:
    app = bundle_app(responder(DOCUMENT, content_type=content_type, status=status))
    start, body = call(app, method=method)
    assert body == DOCUMENT
    assert start["status"] == status
    assert header(start, "content-length") == str(len(DOCUMENT))


@pytest.mark.parametrize(
    ("path", "root", "injected"),
    [("/", "", False), ("/app/", "/app", False), ("/app/VCC", "/app", True), ("/Paper_claims", "", False)],
)
def test_pages_that_open_without_a_chart_are_left_alone(path: str, root: str, injected: bool) -> None:
    app = bundle_app(responder(DOCUMENT, content_type="text/html"))
    _, body = call(app, path=path, root=root)
    assert (TAG in body) is injected


def test_home_under_a_base_url_path_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    import streamlit as st

    options = {"server.baseUrlPath": "/explorer/"}
    monkeypatch.setattr(st, "get_option", lambda name: options[name])
    app = bundle_app(responder(DOCUMENT, content_type="text/html"))
    assert TAG not in call(app, path="/explorer/")[1]
    assert TAG in call(app, path="/explorer/Compare")[1]
    assert call(app, path=f"/explorer/{preload.BUNDLE_PATH}")[1] == BUNDLE


def test_websockets_pass_through() -> None:
    seen: list[str] = []

    async def inner(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen.append(scope["type"])

    run(bundle_app(inner)({"type": "websocket", "path": "/_stcore/stream"}, None, None))
    assert seen == ["websocket"]


@pytest.mark.parametrize("path", [f"/{preload.BUNDLE_PATH}", f"/Compare/{preload.BUNDLE_PATH}"])
def test_the_bundle_is_served_from_memory_gzipped_when_accepted(path: str) -> None:
    app = bundle_app(responder(DOCUMENT, content_type="text/html"))
    start, body = call(app, path=path)
    assert body == BUNDLE and start["status"] == 200
    assert header(start, "content-type") == "text/javascript; charset=utf-8"
    assert header(start, "content-length") == str(len(BUNDLE)) and header(start, "content-encoding") is None
    assert "immutable" in (header(start, "cache-control") or "")  # the file name carries the version
    start, body = call(app, path=path, headers=[(b"accept-encoding", b"gzip, deflate, br")])
    assert header(start, "content-encoding") == "gzip" and gzip.decompress(body) == BUNDLE
    assert header(start, "content-length") == str(len(body)) and len(body) < len(BUNDLE)
    start, body = call(app, path=path, method="HEAD")
    assert body == b"" and header(start, "content-length") == str(len(BUNDLE))
    assert call(app, path=path, method="POST")[1] == DOCUMENT  # not ours: passed on


def test_the_vendored_bundle_is_plotlys_cartesian_build_of_the_python_packages_plotly_js() -> None:
    """The figures are built by the plotly package for its own plotly.js version: the bundle must be that version,
    and carry every trace type the app draws."""
    import plotly.offline

    text = preload.BUNDLE_FILE.read_text()
    assert text.startswith(f"/**\n* plotly.js (cartesian - minified) v{plotly.offline.get_plotlyjs_version()}\n")
    assert preload.PLOTLY_JS_VERSION == plotly.offline.get_plotlyjs_version()
    assert drawn_trace_types() >= {"scatter", "heatmap"}
    for trace in drawn_trace_types():
        assert f'moduleType:"trace",name:"{trace}"' in text, f"the app draws {trace} traces, the bundle lacks them"


def drawn_trace_types() -> set[str]:
    """Plotly trace types the app's code builds (go.Scatter(...) -> "scatter")."""
    import plotly.graph_objects as go
    from plotly.basedatatypes import BaseTraceType

    root = Path(__file__).resolve().parents[1]
    names = set()
    for source in [*root.glob("ui/**/*.py"), *root.glob("pages/*.py"), root / "app.py"]:
        names |= set(re.findall(r"\bgo\.([A-Z][A-Za-z0-9]*)\(", source.read_text()))
    classes = [getattr(go, name) for name in names]
    return {cls().type for cls in classes if isinstance(cls, type) and issubclass(cls, BaseTraceType)}


def test_the_head_imports_the_component_chunk_streamlit_itself_loads_lazily() -> None:
    """The head start only helps if both imports name one module: the installed Streamlit has exactly one chunk for
    v2 components, and its main bundle imports it by that file name."""
    chunk = preload.component_chunk()
    assert chunk is not None, f"no single BidiComponent.*.js in {preload.STREAMLIT_JS}"
    assert f'import("./static/js/{chunk}")' in preload.HEAD_TAG.decode()
    index = (preload.STREAMLIT_JS.parent.parent / "index.html").read_text()
    main_bundle = re.search(r'src="\./static/js/(index\.[^"]+\.js)"', index)
    assert main_bundle, "index.html's own module script moved: check the relative URL in head_tag"
    assert f"./{chunk}" in (preload.STREAMLIT_JS / main_bundle.group(1)).read_text()
    assert (
        preload.head_tag("X.js")
        .decode()
        .endswith('<script type="module">import("./static/js/X.js").catch(() => {});</script>')
    )
