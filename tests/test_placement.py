"""Where a view computes (service/placement.py): in this process without a scheduler, exactly as before; on a real
worker process when the page chooses the worker's device.

The cluster is started by deploy/loopback.py on loopback: Redis, a Dask scheduler and one worker started with
``--resources GPU=1`` (a CPU stand-in: it reports its real device, cpu). The replica is an AppTest in this process,
on a host without CUDA (or with it hidden: every check here asks for the worker's cpu).
"""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from ci_env import unavailable

from core import config
from core import device as core_device
from core.cancel import Cancelled, CancelToken
from core.device import cpu_threads
from service import compute, dask_client, placement, views

SPEC = views.InputSpec("clustered", 64, 16, 2, 4, 0.1, 11)


def cpu_seconds(pid: int | None = None) -> float:
    import psutil

    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


# ------------------------------------------------------------------ no scheduler: everything here, as before


def test_without_a_scheduler_every_view_computes_here(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(config.variable("scheduler"), raising=False)
    run = views.MethodRun.of(SPEC, 5.0, "cpu", "performer", {}, 0)
    for view in (SPEC, run, run.exact(), views.MethodRun.of(SPEC, 5.0, "cpu@worker", "performer", {}, 0)):
        where = placement.where(view)
        assert not where.remote
        assert not placement.where(view, heavy=True).remote
    assert placement.offered() == []
    assert placement.for_device("cpu@worker") is None
    # The page's views carry the local device's name, and the caption is today's.
    used = torch.device("cpu")
    for requested in ("auto", "cpu", "cuda", "cpu@worker"):
        assert placement.view_device_name(requested, used) == "cpu"
        assert placement.describe_choice(requested, used) == core_device.describe(used)


def test_a_worker_device_name_resolves_to_its_device() -> None:
    assert compute.resolve("cpu@worker") == torch.device("cpu")
    assert placement.base_device("cuda@worker") == "cuda"
    expected = "cuda" if core_device.cuda_available() else "cpu"
    assert compute.resolve("cuda@worker").type == expected
    assert dask_client.resources_for(views.MethodRun.of(SPEC, 5.0, "cuda@worker", "exact", {}, 0)) == {"GPU": 1}
    assert dask_client.resources_for(views.MethodRun.of(SPEC, 5.0, "cpu@worker", "exact", {}, 0)) is None


def test_cuda_goes_to_a_worker_that_reports_cuda_and_advertises_the_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """The routing of ``device=cuda`` on a replica without CUDA (the worker's report is given: no CUDA here)."""
    gpu = placement.WorkerDevices("tcp://10.0.0.2:1", "gpu-1", "gpu-host", 1, ("auto", "cpu", "cuda"), gpu=True)
    no_resource = placement.WorkerDevices("tcp://10.0.0.1:1", "cpu-1", "cpu-host", 2, ("auto", "cpu", "cuda"), False)
    monkeypatch.setattr(core_device, "cuda_available", lambda: False)
    monkeypatch.setattr(placement, "worker_devices", lambda runner=None: [no_resource, gpu])
    monkeypatch.setattr(dask_client, "runner", lambda: dask_client.ClusterRunner("tcp://10.0.0.9:1"))
    used = torch.device("cpu")
    for requested in ("cuda", "auto", "cuda@worker"):
        remote = placement.for_device(requested)
        assert remote is not None and remote.worker == gpu.address and remote.device == "cuda", requested
        assert placement.view_device_name(requested, used) == "cuda@worker"
        assert placement.describe_choice(requested, used) == "cuda on worker gpu-1 (gpu-host)"
    assert placement.offered() == ["cpu@worker", "cuda@worker"]
    assert placement.for_device("cpu") is None  # the local CPU stays local
    assert placement.where(views.ExactAttention(SPEC, 5.0, "cuda")).worker == gpu.address  # a view built elsewhere
    monkeypatch.setattr(placement, "worker_devices", lambda runner=None: [no_resource])
    assert placement.for_device("cuda") is None  # CUDA without the GPU resource is not a placement for cuda


# ------------------------------------------------------------------ a replica and a GPU worker on loopback


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    if shutil.which("redis-server") is None:
        unavailable("redis-server is not installed (Debian: apt-get install -y redis-server)")
    from deploy.loopback import loopback_deployment

    with loopback_deployment(workers=0, gpu_workers=1, web=False) as started:
        yield started


@pytest.fixture
def replica(cluster: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """This process as a replica with the scheduler configured (and CUDA, if any, hidden from it)."""
    monkeypatch.setenv(config.variable("scheduler"), cluster.scheduler_address)
    monkeypatch.setattr(core_device, "cuda_available", lambda: False)
    monkeypatch.setattr(placement, "_cached", None)
    yield cluster
    current = dask_client.runner()
    monkeypatch.delenv(config.variable("scheduler"))
    if current is not None:
        current.close()
    dask_client._runner = None


def test_the_worker_reports_its_device_and_is_offered(replica: Any) -> None:
    workers = placement.worker_devices()
    assert len(workers) == 1
    assert workers[0].gpu and workers[0].devices == ("auto", "cpu") and workers[0].pid != os.getpid()
    assert placement.offered() == ["cpu@worker"]  # no worker has CUDA: cuda@worker is not offered
    assert placement.for_device("cuda") is None  # ?device=cuda: no CUDA anywhere, so today's notice + CPU
    remote = placement.for_device("cpu@worker")
    assert remote is not None and remote.remote and remote.worker == workers[0].address
    assert placement.view_device_name("cpu@worker", torch.device("cpu")) == "cpu@worker"
    assert placement.view_device_name("cpu", torch.device("cpu")) == "cpu"
    # A light view on the local device stays here; on the worker's device it goes there.
    assert not placement.where(views.ExactAttention(SPEC, 5.0, "cpu")).remote
    assert placement.where(views.ExactAttention(SPEC, 5.0, "cpu@worker")).worker == workers[0].address


def test_a_worker_task_computes_with_the_deployments_torch_threads(replica: Any) -> None:
    """A Dask nanny starts its worker with ``MKL_NUM_THREADS=1``, which torch gives every new thread (each task's)
    unless the process's count was set: the preload sets it from ``OMP_NUM_THREADS`` (deploy/loopback.py gives its one
    worker every core), so a task computes with the threads the deployment gave the worker."""
    client = dask_client.runner().client()  # type: ignore[union-attr]
    address = placement.worker_devices()[0].address
    wanted = client.run(os.getenv, "OMP_NUM_THREADS", workers=[address])[address]
    assert wanted == str(max(1, len(os.sched_getaffinity(0))))
    in_task = client.submit(torch.get_num_threads, pure=False, workers=[address]).result(timeout=30)
    assert in_task == int(wanted)


def test_a_light_call_on_the_worker_device_computes_there(replica: Any) -> None:
    worker = placement.worker_devices()[0]
    view = views.MethodRun.of(SPEC.replace(n=256, seed=101), 5.0, "cpu@worker", "performer", {}, 0)
    here = view.replace(device="cpu").compute(None)
    before_here, before_worker = cpu_seconds(), cpu_seconds(worker.pid)
    there = placement.compute(view)
    assert cpu_seconds(worker.pid) - before_worker > 0.0
    assert there.method == "performer" and there.device == "cpu"
    assert there.attention.shape == here.attention.shape  # reduced to display size on the worker
    for name, values in here.metrics.items():
        assert there.metrics[name] == pytest.approx(values, rel=1e-5, abs=1e-7), name
    assert cpu_seconds() - before_here < 5.0  # sanity: nothing here took long


def test_a_light_call_is_not_held_behind_a_heavy_job_on_the_worker(replica: Any, tmp_path: Path) -> None:
    """A light call asks the worker directly and computes in its own thread, so Compare on the worker's device answers
    while the worker's one task thread runs a heavy job (here one that holds it up to 20 s, released when the test
    ends: a running Dask task cannot be cancelled, and a plain sleep kept the next tests waiting)."""
    client = dask_client.runner().client()  # type: ignore[union-attr]
    address = placement.worker_devices()[0].address
    flag = tmp_path / "release"

    def hold_until(flag: str, most_seconds: float) -> None:  # nested: Dask sends it by value to the worker
        deadline = time.monotonic() + most_seconds
        while not os.path.exists(flag) and time.monotonic() < deadline:
            time.sleep(0.02)

    busy = client.submit(hold_until, str(flag), 20.0, pure=False, workers=[address])
    try:
        deadline = time.monotonic() + 10
        while not client.processing(workers=[address])[address] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert client.processing(workers=[address])[address], "the heavy job never started"
        start = time.monotonic()
        result = placement.compute(views.ExactAttention(SPEC.replace(seed=105), 5.0, "cpu@worker"))
        assert time.monotonic() - start < 10.0
        assert result.attention.shape == (2, 64, 64)
        assert not busy.done()
    finally:
        flag.touch()
        busy.cancel()


def test_a_worker_without_the_light_call_handler_gets_the_call_as_a_task(
    replica: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker started without this app's preload has no handler: the call goes the task way, with the same result."""
    view = views.ExactAttention(SPEC.replace(seed=107), 5.0, "cpu@worker")
    direct = placement.compute(view)
    monkeypatch.setattr(dask_client, "LIGHT_CALL", "no_such_handler")
    as_task = placement.compute(view)
    assert as_task.attention.tobytes() == direct.attention.tobytes()


def test_a_cancelled_light_call_stops_waiting_at_once(replica: Any) -> None:
    """A closed tab cancels the page's token: the replica stops waiting for the worker's answer at once (the worker
    stops at the call's time limit, here 3 s)."""
    runner = dask_client.runner()
    assert runner is not None
    client = runner.client()
    address = placement.worker_devices()[0].address
    slow = views.MethodRun.of(SPEC.replace(n=512, heads=4, seed=109), 5.0, "cpu@worker", "rpca", {}, 0)
    token = CancelToken()
    threading.Timer(0.3, token.cancel, args=("the tab closed",)).start()
    start = time.monotonic()
    with pytest.raises(Cancelled, match="the tab closed"):
        runner.light_call(client, address, slow, 3.0, token)
    assert time.monotonic() - start < 1.5


def assert_same(there: Any, here: Any, path: str = "result") -> None:
    """``there`` equals ``here``: arrays bit for bit (dtype, shape, writability, bytes), everything else equal, except
    a result's measured ``seconds``."""
    assert type(there) is type(here), f"{path}: {type(there).__name__} vs {type(here).__name__}"
    if dataclasses.is_dataclass(here):
        for item in dataclasses.fields(here):
            if item.name != "seconds":  # a measured run time: differs between any two runs
                assert_same(getattr(there, item.name), getattr(here, item.name), f"{path}.{item.name}")
    elif isinstance(here, np.ndarray):
        assert (there.dtype, there.shape) == (here.dtype, here.shape), path
        assert there.flags.writeable == here.flags.writeable, path
        assert there.tobytes() == here.tobytes(), f"{path}: the numbers differ"
    elif isinstance(here, dict):
        assert list(there) == list(here), path
        for name, value in here.items():
            assert_same(there[name], value, f"{path}[{name!r}]")
    elif isinstance(here, (list, tuple)):
        assert len(there) == len(here), path
        for index, (a, b) in enumerate(zip(there, here, strict=True)):
            assert_same(a, b, f"{path}[{index}]")
    elif isinstance(here, float) and math.isnan(here):
        assert math.isnan(there), path
    else:
        assert there == here, f"{path}: {there!r} vs {here!r}"


def test_a_result_through_the_worker_equals_the_one_computed_here(replica: Any) -> None:
    """A light call sent to the worker changes no number the page shows: its result, back through Dask, equals the
    same view computed in this process with the worker's number of torch threads (deploy/loopback.py gives its one
    worker every core)."""
    spec = SPEC.replace(n=256, seed=103)
    remote = (
        views.ExactAttention(spec, 5.0, "cpu@worker"),
        views.MethodRun.of(spec, 5.0, "cpu@worker", "performer", {}, 0),
        views.MethodRun.of(spec.replace(n=1100), 5.0, "cpu@worker", "exact", {}, 0),  # reduced on the worker
    )
    for view in remote:
        assert placement.where(view).remote
        there = placement.compute(view)
        with cpu_threads(max(1, len(os.sched_getaffinity(0)))):
            here = view.replace(device="cpu").compute(None)
        assert_same(there, here, type(view).__name__)


def test_choosing_the_worker_device_sends_a_compare_visit_to_the_worker(
    replica: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from conftest import open_app_page

    worker = placement.worker_devices()[0]
    # n = 1024: the engine's share (exact, every method, the reductions) outweighs drawing the page's figures
    params = {"device": "cpu@worker", "n": "1024", "heads": "4"}
    open_app_page("pages/1_Compare.py", timeout=240, **params, seed="7")  # imports and first figures, not measured
    import traceback

    import core

    here: list[str] = []
    engine = core.approximate

    def counted(method: str, *args: Any, **kwargs: Any) -> Any:
        here.append(method + ":\n" + "".join(traceback.format_stack(limit=8)))
        return engine(method, *args, **kwargs)

    monkeypatch.setattr(core, "approximate", counted)
    before_here, before_worker = cpu_seconds(), cpu_seconds(worker.pid)
    at = open_app_page("pages/1_Compare.py", timeout=240, **params, seed="8")  # a fresh seed: nothing cached
    replica_seconds = cpu_seconds() - before_here
    worker_seconds = cpu_seconds(worker.pid) - before_worker
    assert not at.exception, at.exception
    captions = " ".join(c.value for c in at.sidebar.caption)
    assert f"cpu on worker {worker.name}" in captions, captions
    print(f"Compare visit: worker {worker_seconds:.2f} s CPU, replica {replica_seconds:.2f} s CPU")
    assert not here, "engine calls in the replica:\n" + "\n".join(here)
    assert worker_seconds > replica_seconds


HEAP_REUSE = """
import resource, sys
import numpy as np
from service import dask_client
if sys.argv[1] == "kept":
    assert dask_client.keep_freed_memory()
def faults():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    block = np.ones(1 << 20, dtype=np.float32)  # 4 MiB, every page written
    del block
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
faults()
print(min(faults() for _ in range(5)))
"""


@pytest.mark.parametrize("heap", ["kept", "nanny default"])
def test_a_worker_reuses_the_heap_a_call_freed(heap: str) -> None:
    """Under a Dask nanny's ``MALLOC_TRIM_THRESHOLD_=65536`` every 4 MiB block is mapped and faulted in afresh
    (hundreds of page faults each time); the worker's preload (``keep_freed_memory``) lets the next block reuse the
    freed one."""
    import subprocess
    import sys

    if not hasattr(__import__("ctypes").CDLL("libc.so.6"), "mallopt"):
        unavailable("glibc mallopt is missing")
    env = {**os.environ, "MALLOC_TRIM_THRESHOLD_": "65536", "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    done = subprocess.run(
        [sys.executable, "-c", HEAP_REUSE, heap.split()[0]], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    faults = int(done.stdout.split()[-1])
    if heap == "kept":
        assert faults < 64, faults
    else:
        assert faults >= 256, faults  # what the worker did before (514 here): the test sees the difference
