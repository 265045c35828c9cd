"""The many-host layout on loopback, for real (issue 32): deploy/loopback.py starts Redis, a Dask scheduler, two
workers and two app replicas behind nginx; protocol clients (benchmarks/load.py's) open links on each replica.

- a link computed through replica A is a cache hit on replica B, and its heavy job ran on a worker while A's
  process stayed near idle;
- a worker killed mid-job: the job is retried on the other worker and the page still draws;
- Redis stopped: pages compute without the cache and say so once; restarted: the cache fills again.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from ci_env import unavailable

from benchmarks.harness import tree_cpu_seconds
from benchmarks.load import Session, _run_async, ws_session
from deploy.processes import spawn, stop

# Estimated above ui.jobs.LIGHT_SECONDS, so each is a queued job: a few seconds on one worker thread.
HEAVY = "Error_vs_entropy?n=1024&points=8"
TIMEOUT_S = 120.0


@pytest.fixture(scope="module")
def layout() -> Iterator[Any]:
    for tool in ("redis-server", "nginx"):
        if shutil.which(tool) is None and not os.access(f"/usr/sbin/{tool}", os.X_OK):
            unavailable(f"{tool} is not installed (Debian: apt-get install -y {tool})")
    from deploy.loopback import loopback_deployment

    quiet = {"ATTN_EXPLORER_PREFETCH": "0", "ATTN_EXPLORER_WARMUP": "0"}  # no work the test did not ask for
    quiet["LAYOUT_TEST_MARK"] = "multihost"  # which the suite's own environment does not set
    with loopback_deployment(replicas=2, workers=2, extra_env=quiet) as started:
        with started.client() as client:
            started.dask = client
            yield started
        stop(started.redis.process)  # a Redis the tests restarted is not the one the deployment stops


def visit(base_url: str, path: str) -> Session:
    # In a thread of its own: after the browser tests, Playwright's sync API leaves this thread's event loop running.
    return _run_async(ws_session(base_url, path, TIMEOUT_S))


def executed(layout: Any) -> int:
    """Tasks the workers have run in all."""
    counts = layout.dask.run(lambda dask_worker: dask_worker.state.executed_count)
    return int(sum(counts.values()))


def in_background(call: Callable[[], Session]) -> tuple[threading.Thread, list[Session]]:
    out: list[Session] = []
    thread = threading.Thread(target=lambda: out.append(call()), daemon=True)
    thread.start()
    return thread, out


def wait_for(predicate: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.05)


def test_the_layouts_own_variables_reach_the_replicas_and_the_workers(layout: Any) -> None:
    """The fixture's variables reach every process: before, the replicas never got them (so benchmarks.load_cluster's
    replicas warmed every page's link while it measured, its warm-up being turned off only in the workers)."""
    import psutil

    started = [*(r.process.pid for r in layout.web.replicas), *(w.process.pid for w in layout.workers)]
    for pid in started:
        assert psutil.Process(pid).environ().get("LAYOUT_TEST_MARK") == "multihost", pid


def test_a_link_computed_through_replica_a_is_a_cache_hit_on_replica_b(layout: Any) -> None:
    replica_a, replica_b = layout.web.replicas
    workers = [worker.process.pid for worker in layout.workers]
    before_tasks = executed(layout)
    before_app, before_workers = tree_cpu_seconds([replica_a.process.pid]), tree_cpu_seconds(workers)
    first = visit(replica_a.url, HEAVY)
    app_cpu = tree_cpu_seconds([replica_a.process.pid]) - before_app
    worker_cpu = tree_cpu_seconds(workers) - before_workers
    assert first.error is None, first.error
    assert executed(layout) > before_tasks, "the heavy job did not run on a worker"
    # The replica only drew the page and waited: the engine work was the workers'.
    assert worker_cpu > 2.0, worker_cpu
    assert app_cpu < 0.5 * worker_cpu, f"replica A used {app_cpu:.1f} s of CPU, the workers {worker_cpu:.1f} s"

    tasks = executed(layout)
    second = visit(replica_b.url, HEAVY)
    assert second.error is None, second.error
    assert executed(layout) == tasks, "replica B computed again instead of reading the shared cache"
    assert second.first_chart_s is not None and second.first_chart_s < first.first_chart_s

    through_proxy = visit(layout.url, HEAVY)  # nginx in front: a third session, a hit as well
    assert through_proxy.error is None and executed(layout) == tasks


def test_a_worker_killed_mid_job_is_retried_and_the_page_draws(layout: Any) -> None:
    replica_a = layout.web.replicas[0]
    thread, out = in_background(lambda: visit(replica_a.url, HEAVY + "&seed=7"))
    busy: dict[str, Any] = {}

    def someone_computes() -> bool:
        busy.update({address: keys for address, keys in layout.dask.processing().items() if keys})
        return bool(busy)

    wait_for(someone_computes)
    address = next(iter(busy))
    pid = layout.dask.run(os.getpid, workers=[address])[address]
    time.sleep(0.5)  # well inside the job
    os.kill(pid, signal.SIGKILL)
    thread.join(TIMEOUT_S)
    assert out and out[0].error is None, out[0].error if out else "no result"
    assert out[0].first_chart_s is not None
    wait_for(lambda: len(layout.dask.scheduler_info(n_workers=-1)["workers"]) == 2)  # the nanny restarted it


def test_stopping_redis_degrades_and_recovers(layout: Any) -> None:
    replica_b = layout.web.replicas[1]
    command = list(layout.redis.process.args)
    stop(layout.redis.process)
    try:
        degraded = visit(replica_b.url, "Compare?n=128&seed=11")
        assert degraded.error is None, degraded.error
        notices = [text for text in degraded.texts if "Result cache" in text]
        assert notices and "computed here without it" in notices[0], degraded.texts[:20]
    finally:
        layout.redis = spawn("redis (again)", command, layout.run_dir / "redis-again.log", layout.redis_url, os.environ)
    client = __import__("redis").Redis.from_url(layout.redis_url, socket_timeout=2)
    wait_for(lambda: _answers(client), timeout=15)
    assert client.dbsize() == 0  # a fresh server: nothing cached yet

    def cached_again() -> bool:
        visit(replica_b.url, "Compare?n=128&seed=12")
        return bool(client.dbsize() > 0)

    wait_for(cached_again, timeout=60)
    again = visit(replica_b.url, "Compare?n=128&seed=13")
    assert again.error is None and not any("Result cache" in text for text in again.texts)


def _answers(client: Any) -> bool:
    try:
        return bool(client.ping())
    except Exception:
        return False


def test_the_recipe_runs_as_a_command() -> None:
    """``python -m deploy.loopback --help`` documents the recipe (the fixture drives the same code)."""
    result = subprocess.run([sys.executable, "-m", "deploy.loopback", "--help"], capture_output=True, text=True)
    assert result.returncode == 0 and "--gpu-workers" in result.stdout
