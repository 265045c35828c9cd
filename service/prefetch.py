"""Work done ahead while the server is idle: Compare's methods at the temperatures one slider step either side of
the one shown, so that the next step of the temperature slider finds them in the shared cache (a cached value
redraws sooner than a new one is computed).

One daemon thread and a short queue. A task waits until no script run is in progress (a class
of sessions keeps the server busy, so then nothing is done ahead), stops between methods when a run starts, and is
dropped, not queued, when the queue is full. It makes the same call with the same cache key as the page, so a value
done ahead is the value the page would compute. ``ATTN_EXPLORER_PREFETCH=0`` turns it off.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Sequence
from typing import Any

from core import config
from service import compute, placement, views
from service.scheduler import LIGHT_SECONDS

QUEUE_SIZE = 4
IDLE_WAIT_S = 5.0  # a task still waiting for an idle server after this long is dropped
POLL_S = 0.05

_log = logging.getLogger(__name__)
_tasks: queue.Queue[tuple[Any, ...]] = queue.Queue(maxsize=QUEUE_SIZE)
_lock = threading.Lock()
_worker: threading.Thread | None = None


def enabled() -> bool:
    """``ATTN_EXPLORER_PREFETCH`` (``core.config``), default on."""
    return bool(config.read("prefetch"))


def working() -> bool:
    """A task is queued or running."""
    return bool(_tasks.unfinished_tasks)


def neighbours(value: float, options: Sequence[float]) -> list[float]:
    """The grid values one step below and above ``value`` (one at an end of the grid; none for a value off it)."""
    ordered = sorted(options)
    if value not in ordered:
        return []
    index = ordered.index(value)
    return [ordered[i] for i in (index - 1, index + 1) if 0 <= i < len(ordered)]


def runs_in_progress() -> int:
    """Script runs in progress in this process: Streamlit starts one thread of this name per run."""
    return sum(1 for t in threading.enumerate() if t.name == "ScriptRunner.scriptThread" and t.is_alive())


def compare_neighbours(runs: Sequence[Any], tau: float, options: Sequence[float]) -> int:
    """Queue Compare's method runs (``service.views.MethodRun``, at temperature ``tau``) at the temperatures next to it;
    only light methods that are not cached yet. Returns how many temperatures were queued."""
    if not enabled():
        return 0
    queued = 0
    for neighbour in neighbours(tau, options):
        beta = 1.0 / neighbour  # as Settings.beta computes it: the same cache key
        todo = tuple(
            ahead
            for run in runs
            if compute.method_seconds(run.inputs, run.method, run.kwargs) <= LIGHT_SECONDS
            and not views.is_cached(ahead := run.replace(beta=beta))
        )
        if todo and _submit(todo):
            queued += 1
    return queued


def _submit(task: tuple[Any, ...]) -> bool:  # a tuple of MethodRun
    global _worker
    with _lock:
        if _worker is None or not _worker.is_alive():
            _worker = threading.Thread(target=_loop, name="attn-prefetch", daemon=True)
            _worker.start()
    try:
        _tasks.put_nowait(task)
    except queue.Full:
        return False
    return True


def _loop() -> None:
    while True:
        task = _tasks.get()
        try:
            _run(task)
        except Exception:  # noqa: BLE001 - work done ahead must never take the server down
            _log.exception("prefetch failed")
        finally:
            _tasks.task_done()


def _wait_for_idle() -> bool:
    deadline = time.monotonic() + IDLE_WAIT_S
    while runs_in_progress():
        if time.monotonic() > deadline:
            return False
        time.sleep(POLL_S)
    return True


def _run(todo: tuple[Any, ...]) -> None:
    for run in todo:  # the server's own thread count: the time column stays comparable
        if not _wait_for_idle():
            return
        if views.is_cached(run):
            continue
        result = placement.compute(run)  # here, or on the worker whose device the page chose
        if result.error_message is None:
            views.store(run, result, soon=True)


def wait_idle(timeout_s: float = 60.0) -> bool:
    """Wait until every queued task has finished (for tests); False on timeout."""
    deadline = time.monotonic() + timeout_s
    while working():
        if time.monotonic() > deadline:
            return False
        time.sleep(POLL_S)
    return True
