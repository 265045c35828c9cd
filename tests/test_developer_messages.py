"""A live server refuses the developer menu's messages from a browser session (ui/serving.py, point 5), and takes
uploads of at most 1 MB (.streamlit/config.toml).

Streamlit handles ``clear_cache`` from any websocket client, whatever its toolbar shows, by emptying every
``st.cache_data`` and ``st.cache_resource`` of the process for every session. Here a client speaking Streamlit's
protocol opens a page, sends ``clear_cache`` and reruns: the server logs the refusal and the session carries on.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from benchmarks.load import CHART_ELEMENTS, _run_async, app_server
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
    url = base_url.replace("http://", "ws://", 1) + "/_stcore/stream"
    async with asyncio.timeout(120), websockets.connect(url, subprotocols=["streamlit"], max_size=None) as ws:  # type: ignore[list-item]
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
    # The settings-file uploader (in the share box) announces the server's limit, which its upload route enforces.
    assert upload_limits == {1}
