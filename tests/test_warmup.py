"""The warm-up at server start (deploy/warmup.py): what it opens, that it fills the shared cache through the server's
own sessions (buttons pressed), that it runs once per engine version and cache folder, and that it steps aside for a
visitor. Live servers on loopback, started with the README's command."""

from __future__ import annotations

import concurrent.futures
import os
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from benchmarks.load import _run_async
from deploy import processes, warmup
from service import result_cache
from ui import lessons, page_registry
from ui.presets import PRESETS

# A link whose work starts on a button ("Measure the claims", estimated over 3 s): two papers, no real heads.
BUTTON_LINK = "Paper_claims?papers=vcc&papers=scatterbrain&real=false"


def _in_thread(function: Any, *args: Any) -> Any:
    """``function(*args)`` in a thread of its own: it runs an event loop, and in the full suite this thread already
    runs Playwright's."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(function, *args).result()


def test_links_cover_every_page_preset_and_lesson_step() -> None:
    paths = warmup.links()
    assert len(paths) == len(set(paths))
    for page in page_registry.url_paths():
        assert page in paths
    for preset in PRESETS:
        assert (f"{preset.page}?{preset.query}" if preset.query else preset.page) in paths
    for lesson in lessons.lessons().values():
        for index in range(len(lesson.steps)):
            assert lesson.step_url(index).removeprefix("./") in paths
    # The pages' default links come first: they are what most visitors open.
    assert paths[: len(page_registry.url_paths())] == list(page_registry.url_paths())


async def _caption_of(stream_url: str, path: str) -> list[str]:
    """The captions a new session of ``path`` shows (one run, no button pressed)."""
    import websockets
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    page, _, query = path.partition("?")
    texts: list[str] = []
    async with websockets.connect(stream_url, subprotocols=["streamlit"], max_size=None) as ws:  # type: ignore[list-item]
        request = BackMsg()
        request.rerun_script.query_string = query
        request.rerun_script.page_name = page
        await ws.send(request.SerializeToString())
        async for data in ws:
            msg = ForwardMsg()
            msg.ParseFromString(data)
            if msg.WhichOneof("type") == "script_finished":
                break
            if msg.WhichOneof("type") == "delta" and msg.delta.WhichOneof("type") == "new_element":
                element = msg.delta.new_element
                if element.WhichOneof("type") == "markdown":
                    texts.append(element.markdown.body)
    return texts


def _in_cache(captions: list[str]) -> tuple[int, int]:
    for text in captions:
        found = re.search(r"(\d+) measurements, (\d+) of them already in the server's shared cache", text)
        if found:
            return int(found.group(2)), int(found.group(1))
    raise AssertionError(f"no cache caption among {captions}")


@pytest.fixture()
def server(tmp_path: Path):  # noqa: ANN201 - a processes.Process
    env = dict(os.environ, ATTN_EXPLORER_CACHE_DIR=str(tmp_path / "cache"), ATTN_EXPLORER_WARMUP="0")
    with processes.app_server(env=env) as app:
        yield app, tmp_path / "cache"


def test_links_that_run_to_their_end_follow_each_other_without_the_idle_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """The IDLE_S wait comes before the first link and after a link that yielded to a visitor, not after a link that
    ran to its end with nobody else running."""
    import asyncio

    events: list[str] = []
    outcomes = iter(["done", "failed", "yielded", "done", "done"])

    async def wait_idle(stop: threading.Event) -> None:
        events.append("wait")

    async def warm_link(stream_url: str, path: str, should_yield: Any) -> warmup.LinkResult:
        state = next(outcomes)
        events.append(f"{path}:{state}")
        return warmup.LinkResult(path=path, state=state)

    monkeypatch.setattr(warmup, "_wait_idle", wait_idle)
    monkeypatch.setattr(warmup, "warm_link", warm_link)
    monkeypatch.setattr(warmup, "_other_runs", lambda own: 0)
    results = _in_thread(asyncio.run, warmup.warm_all("ws://unused", ["a", "b", "c", "d"], threading.Event()))
    assert [r.state for r in results] == ["done", "failed", "done", "done"]
    assert events == ["wait", "a:done", "b:failed", "wait", "c:yielded", "wait", "c:done", "d:done"]
    # A visitor running now still gets the wait.
    events.clear()
    outcomes = iter(["done", "done"])
    monkeypatch.setattr(warmup, "_other_runs", lambda own: 1)
    _in_thread(asyncio.run, warmup.warm_all("ws://unused", ["a", "b"], threading.Event()))
    assert events == ["wait", "a:done", "wait", "b:done"]


def test_warm_up_presses_the_button_and_fills_the_shared_cache(server, monkeypatch: pytest.MonkeyPatch) -> None:
    app, cache_dir = server
    stream = app.url.replace("http://", "ws://") + "/_stcore/stream"
    cached, total = _in_cache(_run_async(_caption_of(stream, BUTTON_LINK)))
    assert cached == 0 and total > 0  # the page alone computes nothing: its work waits for the button

    monkeypatch.setenv("ATTN_EXPLORER_CACHE_DIR", str(cache_dir))  # the marker goes beside the server's cache
    monkeypatch.setattr(warmup, "links", lambda: ["Compare", BUTTON_LINK])
    results = _in_thread(warmup.run, app.url, threading.Event())
    assert results is not None
    assert [(r.path, r.state) for r in results] == [("Compare", "done"), (BUTTON_LINK, "done")]
    assert results[1].presses >= 1

    cached, total = _in_cache(_run_async(_caption_of(stream, BUTTON_LINK)))
    assert cached == total  # a visitor now finds every measurement in the cache
    marker = result_cache.warmup_marker_path(cache_dir, result_cache.ENGINE_VERSION)
    assert marker.exists()
    # Once per engine version and cache folder: a restart (or a second replica) does not warm again.
    assert _in_thread(warmup.run, app.url, threading.Event()) is None


def test_a_visitor_makes_the_warm_up_step_aside(server, monkeypatch: pytest.MonkeyPatch) -> None:
    """While the warm-up's own run is in progress, a visitor's run starting closes the warm-up's session."""
    app, _ = server
    stream = app.url.replace("http://", "ws://") + "/_stcore/stream"
    visitor = threading.Event()
    seen: list[float] = []

    def should_yield() -> bool:
        seen.append(time.monotonic())
        return visitor.is_set()

    threading.Timer(0.3, visitor.set).start()
    result = _run_async(warmup.warm_link(stream, BUTTON_LINK, should_yield))
    assert result.state == "yielded"
    assert result.seconds < 5.0  # it stops at once, not after the measurement
    assert len(seen) > 1


def test_the_served_app_starts_its_warm_up(tmp_path: Path) -> None:
    env = dict(os.environ, ATTN_EXPLORER_CACHE_DIR=str(tmp_path / "cache"), ATTN_EXPLORER_WARMUP="1")
    with processes.app_server(env=env) as app:
        deadline = time.monotonic() + 90
        while "warm-up Compare: done" not in app.log_tail(100_000):
            assert time.monotonic() < deadline, app.log_tail()
            time.sleep(0.5)
    env["ATTN_EXPLORER_WARMUP"] = "0"
    with processes.app_server(env=env) as app:
        time.sleep(3)
        assert "warm-up" not in app.log_tail(100_000)


# ------------------------------------------------------------------ the marker and the lock live in the cache


def _warm_up_without_a_server(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """``warmup.run`` with the server's part stood in (every link warmed at once); returns the links it opened."""
    opened: list[str] = []

    async def warm_all(stream_url: str, paths: list[str], stop: threading.Event) -> list[warmup.LinkResult]:
        opened.extend(paths)
        return [warmup.LinkResult(path) for path in paths]

    monkeypatch.setattr(warmup, "links", lambda: ["Compare"])
    monkeypatch.setattr(warmup, "_wait_healthy", lambda base_url, stop: True)
    monkeypatch.setattr(warmup, "warm_all", warm_all)
    return opened


def _run_warmup() -> Any:
    """``warmup.run`` in a thread of its own, as the server starts it (deploy/warmup.start): it runs an event loop,
    and a test process may already have one running in its main thread (Playwright's, from a browser test)."""
    box: list[Any] = []
    thread = threading.Thread(target=lambda: box.append(warmup.run("http://127.0.0.1:1", threading.Event())))
    thread.start()
    thread.join(timeout=120)
    assert box, "warmup.run did not return within 120 s"
    return box[0]


def test_a_new_redis_is_warmed_whatever_the_hosts_folder_holds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The measured failure: a host whose folder held the marker of an earlier single-server run never warmed a new
    (or flushed) Redis. The marker and the lock are on the Redis server now."""
    from redis_server import RedisServer

    server = RedisServer().start()
    try:
        folder = tmp_path / "cache"
        stale = result_cache.warmup_marker_path(folder, result_cache.ENGINE_VERSION)
        stale.parent.mkdir(parents=True)
        stale.write_text("{}")  # an earlier single-server run on this host
        monkeypatch.setenv("ATTN_EXPLORER_CACHE_DIR", str(folder))
        monkeypatch.setenv("ATTN_EXPLORER_CACHE_URL", server.url)
        opened = _warm_up_without_a_server(monkeypatch)

        assert _run_warmup() is not None
        assert opened == ["Compare"]
        done = server.client().get(result_cache.REDIS_WARMUP_DONE + result_cache.ENGINE_VERSION)
        assert done is not None and '"path": "Compare"' in done.decode()
        assert not server.client().exists(result_cache.REDIS_WARMUP_LOCK)  # released
        assert _run_warmup() is None  # a second replica: already warmed
        assert opened == ["Compare"]

        with result_cache.warmup_lock() as held:  # a replica warming holds the server's lock: another one waits
            assert held
            server.client().flushall()
            server.client().set(result_cache.REDIS_WARMUP_LOCK, "another replica")
            assert _run_warmup() is None
        assert server.client().get(result_cache.REDIS_WARMUP_LOCK) == b"another replica"  # not ours to release
        server.client().flushall()
        assert _run_warmup() is not None  # a flushed server is warmed again
        assert opened == ["Compare", "Compare"]
    finally:
        server.stop()


def test_without_redis_the_marker_and_the_lock_are_in_the_cache_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "cache"
    monkeypatch.setenv("ATTN_EXPLORER_CACHE_DIR", str(folder))
    monkeypatch.delenv("ATTN_EXPLORER_CACHE_URL", raising=False)
    opened = _warm_up_without_a_server(monkeypatch)
    with result_cache.warmup_lock() as held:  # another process of this folder is warming
        assert held
        assert _run_warmup() is None
    assert opened == []
    assert _run_warmup() is not None
    assert result_cache.warmup_marker_path(folder, result_cache.ENGINE_VERSION).exists()
    assert _run_warmup() is None
    assert opened == ["Compare"]
