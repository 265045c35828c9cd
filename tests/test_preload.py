"""deploy/preload.py: the page documents ask for Streamlit's Plotly chunk at once; nothing else changes."""

from __future__ import annotations

import asyncio
import concurrent.futures
import gzip
import re
from typing import Any

import pytest

from deploy import preload

CHUNK = "PlotlyChart.abc123.js"


def run(coroutine: Any) -> None:
    """asyncio.run in a thread of its own: the browser tests leave Playwright's event loop running in this one."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(asyncio.run, coroutine).result()


def call(app: Any, *, method: str = "GET", path: str = "/Compare", root: str = "") -> tuple[dict[str, Any], bytes]:
    """Run one HTTP request through an ASGI app; (response start message, whole body)."""
    messages: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        messages.append(message)

    scope = {"type": "http", "method": method, "path": path, "root_path": root, "headers": [], "query_string": b""}
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


def header(start: dict[str, Any], name: str) -> str | None:
    for key, value in start["headers"]:
        if key.decode().lower() == name:
            return value.decode()
    return None


@pytest.mark.parametrize("parts", [1, 3])
def test_a_page_document_imports_the_plotly_chunk_in_its_head(parts: int) -> None:
    app = preload.PreloadPlotly(responder(DOCUMENT, content_type="text/html; charset=utf-8", parts=parts), CHUNK)
    start, body = call(app)
    head = body.split(b"</head>")[0].decode()
    assert f'import("./static/js/{CHUNK}")' in head
    assert body.count(CHUNK.encode()) == 1
    assert body.replace(preload.preload_tag(CHUNK), b"") == DOCUMENT  # nothing else changed
    assert header(start, "content-length") == str(len(body))
    assert start["status"] == 200


def test_a_gzipped_document_is_unpacked_and_served_plain_with_the_import() -> None:
    app = preload.PreloadPlotly(responder(gzip.compress(DOCUMENT), content_type="text/html", encoding="gzip"), CHUNK)
    start, body = call(app)
    assert header(start, "content-encoding") is None
    assert body.replace(preload.preload_tag(CHUNK), b"") == DOCUMENT
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
    app = preload.PreloadPlotly(responder(DOCUMENT, content_type=content_type, status=status), CHUNK)
    start, body = call(app, method=method)
    assert body == DOCUMENT
    assert start["status"] == status
    assert header(start, "content-length") == str(len(DOCUMENT))


@pytest.mark.parametrize(
    ("path", "root", "injected"),
    [("/", "", False), ("/app/", "/app", False), ("/app/VCC", "/app", True), ("/Scaling", "", False)],
)
def test_pages_that_open_without_a_chart_are_left_alone(path: str, root: str, injected: bool) -> None:
    app = preload.PreloadPlotly(responder(DOCUMENT, content_type="text/html"), CHUNK)
    _, body = call(app, path=path, root=root)
    assert (CHUNK.encode() in body) is injected


def test_home_under_a_base_url_path_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    import streamlit as st

    options = {"server.baseUrlPath": "/explorer/"}
    monkeypatch.setattr(st, "get_option", lambda name: options[name])
    app = preload.PreloadPlotly(responder(DOCUMENT, content_type="text/html"), CHUNK)
    assert CHUNK.encode() not in call(app, path="/explorer/")[1]
    assert CHUNK.encode() in call(app, path="/explorer/Compare")[1]


def test_websockets_pass_through() -> None:
    seen: list[str] = []

    async def inner(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen.append(scope["type"])

    run(preload.PreloadPlotly(inner, CHUNK)({"type": "websocket", "path": "/_stcore/stream"}, None, None))
    assert seen == ["websocket"]


def test_the_import_names_the_chunk_streamlit_itself_loads_lazily() -> None:
    """The head start only helps if both imports name one module: the installed Streamlit has exactly one Plotly
    chunk, and its main bundle imports it by that file name."""
    chunk = preload.plotly_chunk()
    assert chunk is not None, f"no single PlotlyChart.*.js in {preload.STREAMLIT_JS}"
    assert (preload.STREAMLIT_JS / chunk).stat().st_size > 1_000_000  # plotly.js itself, not a stub
    index = (preload.STREAMLIT_JS.parent.parent / "index.html").read_text()
    main_bundle = re.search(r'src="\./static/js/(index\.[^"]+\.js)"', index)
    assert main_bundle, "index.html's own module script moved: check the relative URL in preload_tag"
    assert f"./{chunk}" in (preload.STREAMLIT_JS / main_bundle.group(1)).read_text()


def test_no_chunk_means_no_change(tmp_path: Any) -> None:
    assert preload.plotly_chunk(tmp_path) is None
    app = preload.PreloadPlotly(responder(DOCUMENT, content_type="text/html"), None)
    app.tag = None  # as when the installed Streamlit has no PlotlyChart chunk
    _, body = call(app)
    assert body == DOCUMENT


def test_the_server_sets_a_passive_openmp_wait_policy_before_torch_loads() -> None:
    """deploy/serve.py sets OMP_WAIT_POLICY=PASSIVE, which libgomp reads only when torch loads, so the policy must
    be in the environment when serve.py (which loads torch at start-up) first imports it; a policy given by the
    operator is kept. The same holds for ``import ui`` (``streamlit run app.py`` and AppTest)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    spy = (
        "import builtins, os, sys\n"
        "real = builtins.__import__\n"
        "def spy(name, *a, **k):\n"
        "    if name.split('.')[0] == 'torch' and 'torch' not in sys.modules:\n"
        "        print('at torch load:', os.environ.get('OMP_WAIT_POLICY'))\n"
        "    return real(name, *a, **k)\n"
        "builtins.__import__ = spy\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}

    def first_line(code: str, extra: dict[str, str]) -> str:
        out = subprocess.run(
            [sys.executable, "-c", spy + code], cwd=root, env={**env, **extra}, capture_output=True, text=True,
            timeout=120,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr[-2000:]
        return out.stdout.splitlines()[0]

    assert first_line("import deploy.serve", {}) == "at torch load: PASSIVE"
    assert first_line("import deploy.serve", {"OMP_WAIT_POLICY": "ACTIVE"}) == "at torch load: ACTIVE"
    assert first_line("import ui", {}) == "at torch load: PASSIVE"


def test_the_server_loads_the_heavy_libraries_at_start_up() -> None:
    import subprocess
    import sys
    from pathlib import Path

    heavy = "('torch', 'plotly', 'pandas', 'scipy')"
    probe = f"import sys, deploy.serve; print(sorted(m for m in {heavy} if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert out.stdout.split("\n")[-2] == "['pandas', 'plotly', 'scipy', 'torch']", out.stderr[-2000:]
