"""Warm-up at server start: every page's default link, every Home preset and every lesson step is opened once by a
headless session of this server, so the first visitor of each finds its pictures in the shared result cache.

The warm-up speaks Streamlit's own protocol on ``/_stcore/stream``, as a browser does, so it runs the page scripts
with the same settings, the same cache keys and the same job scheduler as a visitor. Pages whose heavy work starts
on a button (Paper claims, Rank vs heads, Kernels, Scaling, VCC) get their primary buttons pressed too, so their
tables and grids are cached as well.

It never delays a visitor: a link starts only while no other script run is in progress, and the warm-up's session
is closed as soon as a visitor's run starts (the app cancels a closed session's jobs within 2 s, as for a closed
tab); that link is tried again once the server is idle. One process per cache warms (a lock), and a finished
warm-up is recorded for this engine version, so a restart or a second replica does not repeat it. The marker and the
lock live in the cache they describe (``service.result_cache.warmup_marker``): on the Redis server when the cache is
Redis, so a new or flushed server is warmed whatever a host's folder holds; else in the cache folder.
``ATTN_EXPLORER_WARMUP=0`` turns it off.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

_log = logging.getLogger("attn_explorer.warmup")
if not _log.handlers:  # Streamlit configures only its own loggers; the warm-up's lines belong in the server log
    _handler = logging.StreamHandler()
    _handler.setFormatter(logging.Formatter("%(asctime)s %(name)s: %(message)s"))
    _log.addHandler(_handler)
    _log.setLevel(logging.INFO)
    _log.propagate = False

LINK_TIMEOUT_S = 240.0  # a link whose runs have not finished by then is given up (the job limit ends it sooner)
MAX_PRESSES = 4  # primary buttons pressed per link (one rerun each)
IDLE_S = 1.0  # the server must have had no script run for this long before a link starts
POLL_S = 0.1
TRIES = 3  # a link the warm-up yielded on is tried again this many times in all
DONE_LINE = "warm-up finished"  # logged once, for operators and the first-visit benchmark


def enabled() -> bool:
    """``ATTN_EXPLORER_WARMUP`` (``core.config``), default on."""
    from core import config

    return bool(config.read("warmup"))


def links() -> list[str]:
    """URL paths (page plus query) to warm, in the order a class meets them: pages, presets, lesson steps."""
    from ui import lessons, page_registry
    from ui.presets import PRESETS

    paths = list(page_registry.url_paths())  # "" (Home) first, then pages/ in the app's order
    paths += [f"{p.page}?{p.query}" if p.query else p.page for p in PRESETS]
    for lesson in lessons.lessons().values():
        paths += [lesson.step_url(i).removeprefix("./") for i in range(len(lesson.steps))]
    return list(dict.fromkeys(paths))


@dataclass
class LinkResult:
    path: str
    state: str = "done"  # done | yielded | failed
    seconds: float = 0.0
    presses: int = 0
    detail: str = ""


@dataclass
class _Run:
    """What one script run of the warm-up's session sent back."""

    finished: bool = False
    buttons: list[tuple[str, str]] = field(default_factory=list)  # (widget id, label) of enabled primary buttons
    error: str = ""


def _split(path: str) -> tuple[str, str]:
    page, _, query = path.partition("?")
    return page.strip("/"), query


async def _read_run(ws: Any, run: _Run, should_yield: Callable[[], bool]) -> None:
    from ui import streamlit_compat

    while not run.finished:
        if should_yield():
            raise _Yield
        try:
            data = await asyncio.wait_for(ws.recv(), POLL_S)
        except TimeoutError:
            continue
        msg = streamlit_compat.forward_msg()
        msg.ParseFromString(data)
        kind = msg.WhichOneof("type")
        if kind == "page_not_found":
            run.error = "page not found"
        elif kind == "delta" and msg.delta.WhichOneof("type") == "new_element":
            element = msg.delta.new_element
            which = element.WhichOneof("type")
            if which == "button" and element.button.type == "primary" and not element.button.disabled:
                run.buttons.append((element.button.id, element.button.label))
            elif which == "exception" and not run.error:
                run.error = f"{element.exception.type}: {element.exception.message}"[:300]
        elif kind == "script_finished":
            run.finished = True


class _Yield(Exception):
    """A visitor's script run started: the warm-up steps aside."""


async def warm_link(stream_url: str, path: str, should_yield: Callable[[], bool]) -> LinkResult:
    """Open ``path`` in a new session of the server at ``stream_url``, then press its enabled primary buttons one
    rerun at a time (each button once). Yields (closes the session) as soon as ``should_yield()`` is true."""
    import websockets

    from ui import streamlit_compat

    result = LinkResult(path)
    page, query = _split(path)
    start = time.monotonic()
    pressed: set[str] = set()
    try:
        async with asyncio.timeout(LINK_TIMEOUT_S):
            async with websockets.connect(stream_url, subprotocols=["streamlit"], max_size=None) as ws:  # type: ignore[list-item]
                request = streamlit_compat.back_msg()
                request.rerun_script.query_string = query
                request.rerun_script.page_name = page
                while True:
                    await ws.send(request.SerializeToString())
                    run = _Run()
                    await _read_run(ws, run, should_yield)
                    if run.error:
                        result.state, result.detail = "failed", run.error
                        break
                    todo = [(wid, label) for wid, label in run.buttons if label not in pressed]
                    if not todo or result.presses >= MAX_PRESSES:
                        break
                    widget_id, label = todo[0]
                    pressed.add(label)
                    result.presses += 1
                    request = streamlit_compat.back_msg()
                    request.rerun_script.query_string = query
                    request.rerun_script.page_name = page
                    state = request.rerun_script.widget_states.widgets.add()
                    state.id = widget_id
                    state.trigger_value = True
    except _Yield:
        result.state = "yielded"
    except TimeoutError:
        result.state, result.detail = "failed", f"no finished run within {LINK_TIMEOUT_S:.0f} s"
    except (OSError, websockets.WebSocketException) as error:
        result.state, result.detail = "failed", f"{type(error).__name__}: {error}"[:300]
    result.seconds = time.monotonic() - start
    return result


def _other_runs(own: bool) -> int:
    """Script runs in progress that are not the warm-up's own."""
    from service.prefetch import runs_in_progress

    return runs_in_progress() - (1 if own else 0)


async def _wait_idle(stop: threading.Event) -> None:
    quiet_since = time.monotonic()
    while not stop.is_set():
        if _other_runs(own=False) > 0:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= IDLE_S:
            return
        await asyncio.sleep(POLL_S)


async def warm_all(stream_url: str, paths: list[str], stop: threading.Event) -> list[LinkResult]:
    """Every path in turn, each only while the server is idle; a path the warm-up yielded on is retried.

    A link that ran to its end without yielding saw no visitor while it ran, so the next starts at once when none
    is running now; the IDLE_S wait is for after a visitor (it cost 1 s per link, 38 s per warm-up, on an idle
    server)."""
    results: list[LinkResult] = []
    quiet = False  # the previous link ran to its end: no visitor's run since it began
    for path in paths:
        for _ in range(TRIES):
            if not (quiet and _other_runs(own=False) == 0):
                await _wait_idle(stop)
            if stop.is_set():
                return results
            # The warm-up's own run is in progress from the request until script_finished; one more run is a visitor.
            result = await warm_link(stream_url, path, lambda: stop.is_set() or _other_runs(own=True) > 0)
            quiet = result.state == "done"
            if result.state != "yielded":
                break
        results.append(result)
        _log.info("warm-up %s: %s in %.1f s%s", path or "/", result.state, result.seconds,
                  f" ({result.detail})" if result.detail else "")  # fmt: skip
    return results


# ------------------------------------------------------------------ once per deployment


def _wait_healthy(base_url: str, stop: threading.Event, timeout_s: float = 120.0) -> bool:
    from deploy.processes import healthy

    deadline = time.monotonic() + timeout_s
    while not stop.is_set() and time.monotonic() < deadline:
        if healthy(base_url):
            return True
        stop.wait(0.2)
    return False


def run(base_url: str, stop: threading.Event) -> list[LinkResult] | None:
    """The warm-up of the server at ``base_url`` (http://host:port[/base]): None when another process of the same
    cache warms it, or it was already warmed for this engine version."""
    from service import result_cache

    where = result_cache.warmup_place()
    if result_cache.warmup_marker() is not None:
        _log.info("%s: already warmed for this engine version (%s)", DONE_LINE, where)
        return None
    with result_cache.warmup_lock() as held:
        if not held or result_cache.warmup_marker() is not None:
            _log.info("warm-up: another process of this cache (%s) warms it", where)
            return None
        if not _wait_healthy(base_url, stop):
            return None
        stream = base_url.replace("http://", "ws://", 1) + "/_stcore/stream"
        started = time.monotonic()
        results = asyncio.run(warm_all(stream, links(), stop))
        if stop.is_set():
            return results
        summary = {
            "seconds": round(time.monotonic() - started, 1),
            "links": [
                {
                    "path": r.path,
                    "state": r.state,
                    "seconds": round(r.seconds, 2),
                    "presses": r.presses,
                    "detail": r.detail,
                }
                for r in results
            ],  # fmt: skip
        }
        if all(r.state == "done" for r in results):
            result_cache.mark_warmed(json.dumps(summary, indent=1))
        failed = sum(r.state != "done" for r in results)
        _log.info("%s: %d links in %.1f s, %d not warmed", DONE_LINE, len(results), summary["seconds"], failed)
        return results


def local_url() -> str:
    """This server's own base URL on loopback, from Streamlit's config."""
    from streamlit import config

    address = config.get_option("server.address") or "127.0.0.1"
    if address in ("0.0.0.0", "::", ""):
        address = "127.0.0.1"
    base = (config.get_option("server.baseUrlPath") or "").strip("/")
    return f"http://{address}:{config.get_option('server.port')}" + (f"/{base}" if base else "")


def start(stop: threading.Event) -> threading.Thread | None:
    """The warm-up in a daemon thread of this server process (None when switched off)."""
    if not enabled():
        return None

    def target() -> None:
        try:
            run(local_url(), stop)
        except Exception:  # noqa: BLE001 - a failed warm-up must never take the server down
            _log.exception("warm-up failed")

    thread = threading.Thread(target=target, name="attn-warmup", daemon=True)
    thread.start()
    return thread


@contextlib.asynccontextmanager
async def lifespan(app: Any) -> Any:
    """``st.App``'s lifespan: the warm-up starts with the server and stops with it."""
    stop = threading.Event()
    start(stop)
    try:
        yield None
    finally:
        stop.set()
