"""Heavy jobs on real Dask workers (service/dask_client.py): results, progress, cancellation within 2 s, a worker killed
mid-job (retried once, then a clear message), GPU placement, engine versions, and an unreachable scheduler.

One cluster for the module, started by deploy/loopback.py on loopback: Redis, a Dask scheduler (one retry after a
worker death), two CPU workers and one worker that advertises ``GPU=1`` (on this CPU host it computes on the CPU;
the tasks here only record where they ran).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ci_env import unavailable
from cluster_tasks import ModulesAfter, SlowTask

from core.cancel import Cancelled
from service import dask_client, views
from service.scheduler import Job, Report, Scheduler

TESTS = Path(__file__).resolve().parent
SESSION = "session-a"


@pytest.fixture(scope="module")
def deployment() -> Iterator[Any]:
    if shutil.which("redis-server") is None:
        unavailable("redis-server is not installed (Debian: apt-get install -y redis-server)")
    from deploy.loopback import loopback_deployment

    with loopback_deployment(workers=2, gpu_workers=1, web=False, extra_env={"PYTHONPATH": str(TESTS)}) as started:
        yield started


@pytest.fixture(scope="module")
def runner(deployment: Any) -> Iterator[dask_client.ClusterRunner]:
    made = dask_client.ClusterRunner(deployment.scheduler_address)
    assert made.client() is not None, made.problem()
    yield made
    made.close()


@pytest.fixture
def scheduler(runner: dask_client.ClusterRunner) -> Iterator[tuple[Scheduler, list[str]]]:
    stored: list[str] = []
    sched = Scheduler(
        3, is_active=lambda session_id: None, store=lambda name, key, value: stored.append(key), cluster=lambda: runner
    )
    yield sched, stored
    sched.shutdown()


def never_here(report: Report) -> Any:
    raise AssertionError("computed in the app's process, not on a worker")


def submit(sched: Scheduler, task: Any, key: str) -> Job:
    return sched.submit("cluster_test", key, never_here, SESSION, 30.0, task=task)


def wait_for(predicate: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)


def running_pid(job: Job) -> int:
    """The pid of the worker process computing ``job`` (its progress label names it)."""
    wait_for(lambda: "pid" in job.label)
    return int(job.label.rsplit("pid ", 1)[1])


def test_a_view_computes_on_a_worker_with_the_same_numbers(scheduler: tuple[Scheduler, list[str]]) -> None:
    sched, stored = scheduler
    spec = views.InputSpec("clustered", 128, 16, 2, 4, 0.1, 0)
    view = views.MethodRun.of(spec, 1.0, "cpu", "performer", {}, 0)
    job = submit(sched, view, view.cache_key())
    assert job.done_event.wait(60), job.label
    assert job.state == "done", job.error
    here = view.compute(None)
    assert job.result.error_message is None and job.result.device == "cpu"
    for name, values in here.metrics.items():
        np.testing.assert_allclose(job.result.metrics[name], values, rtol=1e-5, err_msg=name)
    np.testing.assert_allclose(job.result.attention, here.attention, rtol=1e-5, atol=1e-7)
    assert stored == [view.cache_key()]


def test_a_scaling_run_on_a_worker_names_that_worker(
    scheduler: tuple[Scheduler, list[str]], runner: dask_client.ClusterRunner
) -> None:
    sched, _ = scheduler
    run = views.ScalingRun(("performer",), (64,), 1, 16, 16, 1.0, 0, "cpu", 10.0, 30.0, 2048.0)
    job = submit(sched, run, run.cache_key())
    assert job.done_event.wait(60), job.label
    assert job.state == "done", job.error
    measured = job.result
    client = runner.client()
    assert client is not None
    names = {str(w["name"]) for w in client.scheduler_info(n_workers=-1)["workers"].values()}
    assert measured.worker in names and measured.host == socket.gethostname(), (measured.worker, names)
    assert measured.describe() == f"cpu on worker {measured.worker} ({measured.host})"
    assert not measured.measured_here()  # the page draws no model from its own GEMM rate
    assert [p.n for p in measured.points] == [64]


def test_a_worker_computes_a_view_without_importing_streamlit(scheduler: tuple[Scheduler, list[str]]) -> None:
    """The service imports no Streamlit: a worker that computed one of the app's views has none loaded."""
    sched, _ = scheduler
    spec = views.InputSpec("clustered", 96, 16, 2, 4, 0.1, 5)
    view = views.MethodRun.of(spec, 1.0, "cpu", "performer", {}, 0)
    job = submit(sched, ModulesAfter(view), "modules-after-a-view")
    assert job.done_event.wait(60), job.label
    assert job.state == "done", job.error
    assert job.result["pid"] != os.getpid() and job.result["worker"]  # a worker process, not this one
    assert job.result["error_message"] is None
    np.testing.assert_allclose(job.result["attention_error"], view.compute(None).metrics["attention_error"], rtol=1e-5)
    assert job.result["streamlit"] == []


def test_progress_reaches_the_app(scheduler: tuple[Scheduler, list[str]]) -> None:
    sched, _ = scheduler
    job = submit(sched, SlowTask(2.0, "progress"), "progress")
    seen: set[float] = set()
    while not job.done_event.wait(0.05):
        seen.add(job.progress)
    assert job.state == "done", job.error
    assert len({p for p in seen if 0 < p < 1}) >= 3, seen  # several reports arrived while it ran
    assert job.result["worker"].startswith(("cpu-", "gpu-"))


def test_cancelling_stops_the_worker_within_two_seconds(
    scheduler: tuple[Scheduler, list[str]], runner: dask_client.ClusterRunner
) -> None:
    sched, stored = scheduler
    job = submit(sched, SlowTask(60.0, "cancel", step=0.02), "cancel")
    running_pid(job)
    started = time.monotonic()
    sched.release(job, SESSION, "the browser tab was closed")
    assert job.done_event.wait(5)
    stopped = time.monotonic() - started
    assert job.state == "cancelled" and isinstance(job.error, Cancelled)
    assert stopped < 2.0, f"the worker stopped {stopped:.2f} s after the cancel"
    # The worker's thread is free again: nothing is processing on the cluster.
    client = runner.client()
    wait_for(lambda: not any(client.processing().values()), timeout=2.0)
    assert "cancel" not in stored


def test_a_killed_worker_is_retried_once_on_another(scheduler: tuple[Scheduler, list[str]]) -> None:
    sched, stored = scheduler
    job = submit(sched, SlowTask(3.0, "retry"), "retry")
    first = running_pid(job)
    os.kill(first, signal.SIGKILL)
    assert job.done_event.wait(60), job.label
    assert job.state == "done", job.error
    assert job.result["pid"] != first
    assert stored.count("retry") == 1


def test_a_job_whose_workers_die_twice_gets_a_clear_message(scheduler: tuple[Scheduler, list[str]]) -> None:
    sched, stored = scheduler
    job = submit(sched, SlowTask(30.0, "twice"), "twice")
    first = running_pid(job)
    os.kill(first, signal.SIGKILL)
    wait_for(lambda: "pid" in job.label and int(job.label.rsplit("pid ", 1)[1]) != first)
    os.kill(running_pid(job), signal.SIGKILL)
    assert job.done_event.wait(30), job.label
    assert job.state == "failed" and isinstance(job.error, dask_client.WorkerLost)
    assert "died (2 tries)" in str(job.error) and "not cached" in str(job.error)
    assert "twice" not in stored


def test_cuda_jobs_go_to_the_gpu_worker(scheduler: tuple[Scheduler, list[str]]) -> None:
    sched, _ = scheduler
    assert dask_client.resources_for(SlowTask(0.1, device="cuda")) == {"GPU": 1}
    assert dask_client.resources_for(SlowTask(0.1)) is None
    spec = views.InputSpec("clustered", 128, 16, 2, 4, 0.1, 0)
    assert dask_client.view_device(views.MethodParts(views.MethodRun.of(spec, 1.0, "cuda", "exact", {}, 0), 0, ())) == (
        "cuda"
    )
    placed = [submit(sched, SlowTask(0.2, f"gpu{i}", device="cuda"), f"gpu{i}") for i in range(3)]
    for job in placed:
        assert job.done_event.wait(30) and job.state == "done", job.error
    assert {job.result["worker"] for job in placed} == {"gpu-3"}


def test_a_worker_refuses_a_job_from_another_engine_version(runner: dask_client.ClusterRunner) -> None:
    future = runner.client().submit(dask_client.compute_on_worker, SlowTask(0.1), "0" * 16, 10.0, "engine", pure=False)
    with pytest.raises(dask_client.EngineMismatch, match="deploy the same version of the app on every worker"):
        future.result(timeout=30)


def test_an_unreachable_scheduler_computes_in_process_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dask_client, "CONNECT_SECONDS", 1.0)
    from deploy.processes import free_port

    runner = dask_client.ClusterRunner(f"tcp://127.0.0.1:{free_port()}")
    ran_here = threading.Event()

    def here(report: Report) -> str:
        ran_here.set()
        return "computed here"

    sched = Scheduler(1, is_active=lambda session_id: None, cluster=lambda: runner)
    try:
        job = sched.submit("cluster_test", "unreachable", here, SESSION, 30.0, task=SlowTask(0.1))
        assert job.done_event.wait(30) and job.result == "computed here"
    finally:
        sched.shutdown()
    assert ran_here.is_set()
    assert "is unreachable" in (runner.problem() or "")
