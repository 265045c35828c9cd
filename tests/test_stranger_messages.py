"""What a stranger's browser may send a live server: not the developer menu's messages (ui/serving.py, point 5),
uploads of at most 1 MB, websocket messages of at most 2 MB (.streamlit/config.toml).

Streamlit handles ``clear_cache`` from any websocket client, whatever its toolbar shows, by emptying every
``st.cache_data`` and ``st.cache_resource`` of the process for every session. Here a client speaking Streamlit's
protocol opens a page, sends ``clear_cache`` and reruns: the server logs the refusal and the session carries on.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from benchmarks.load import CHART_ELEMENTS, PLOTLY_COMPONENT, _run_async, app_server, stream_url
from ui import serving

ROOT = Path(__file__).resolve().parents[1]


async def _run_and_send(base_url: str, messages: list[bytes]) -> tuple[list[list[str]], set[int]]:
    """Send each message on one websocket; after a rerun_script, read until its script_finished. Returns the
    elements each run sent, and the upload limits (MB) its file uploaders announced."""
    import websockets
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    runs: list[list[str]] = []
    upload_limits: set[int] = set()
    async with (
        asyncio.timeout(120),
        websockets.connect(stream_url(base_url), subprotocols=["streamlit"], max_size=None) as ws,
    ):  # type: ignore[list-item]
        for data in messages:
            await ws.send(data)
            sent = BackMsg()
            sent.ParseFromString(data)
            if sent.WhichOneof("type") != "rerun_script":
                continue
            elements: list[str] = []
            async for raw in ws:
                msg = ForwardMsg()
                msg.ParseFromString(raw)
                kind = msg.WhichOneof("type")
                if kind == "delta" and msg.delta.WhichOneof("type") == "new_element":
                    element = str(msg.delta.new_element.WhichOneof("type"))
                    if element == "bidi_component":  # the served app's Plotly figures are a component
                        name = msg.delta.new_element.bidi_component.component_name
                        element = "plotly_chart" if name == PLOTLY_COMPONENT else element
                    elements.append(element)
                    if element == "file_uploader":
                        upload_limits.add(msg.delta.new_element.file_uploader.max_upload_size_mb)
                elif kind == "script_finished":
                    break
            runs.append(elements)
    return runs, upload_limits


def _messages() -> list[bytes]:
    from streamlit.proto.BackMsg_pb2 import BackMsg

    rerun = BackMsg()
    rerun.rerun_script.page_name = "Compare"
    rerun.rerun_script.query_string = "n=128&methods=performer"
    clear = BackMsg()
    clear.clear_cache = True
    return [rerun.SerializeToString(), clear.SerializeToString(), rerun.SerializeToString()]


@pytest.mark.timeout(240)
def test_a_browser_session_cannot_clear_the_servers_caches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(serving.DEVELOPER_VARIABLE, raising=False)  # the server inherits this environment
    with app_server(ROOT) as server:
        # In a thread of its own: in a full run, Playwright's sync API already runs an event loop in this one.
        runs, upload_limits = _run_async(_run_and_send(server.url, _messages()))
        log = server.log_path.read_text(errors="replace")
    assert len(runs) == 2
    for elements in runs:
        assert "exception" not in elements and CHART_ELEMENTS & set(elements), elements
    assert "refused a clear_cache message from a browser session" in log, log[-2000:]
    # The settings-file uploader (in the share box) announces 1 MB; the heads uploader (under Input) the server's
    # limit, which its upload route enforces.
    assert upload_limits == {1, 64}


async def _send_oversized(base_url: str, size: int) -> int | None:
    """Send one binary message of ``size`` bytes; the close code the server answers with (None: it kept reading)."""
    import websockets

    async with (
        asyncio.timeout(60),
        websockets.connect(stream_url(base_url), subprotocols=["streamlit"], max_size=None) as ws,
    ):  # type: ignore[list-item]
        try:
            await ws.send(b"\0" * size)
            await asyncio.wait_for(ws.recv(), timeout=10)
        except websockets.ConnectionClosed as closed:
            return closed.rcvd.code if closed.rcvd is not None else -1
        except TimeoutError:
            return None
    return None


@pytest.mark.timeout(240)
def test_an_oversized_websocket_message_closes_only_its_own_connection() -> None:
    """A browser sends widget messages of a few KB; Streamlit's default would read up to 25 MB of one. The server
    (``server.maxWidgetStateSize = 2``) closes the connection with 1009 (message too big) and serves on."""
    with app_server(ROOT) as server:
        code = _run_async(_send_oversized(server.url, 3 * 2**20))
        runs, _ = _run_async(_run_and_send(server.url, _messages()[:1]))
    assert code == 1009
    assert "exception" not in runs[0] and CHART_ELEMENTS & set(runs[0]), runs[0]
