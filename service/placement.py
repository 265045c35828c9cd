"""Where a view computes: in this process, or on a Dask worker whose device fits. One function decides: ``where``.

Every path that computes a view asks it: the light path (``service.views.cached`` and ``run``'s at-once branch, so
inputs, exact attention, method runs, parts and the sidebar's entropy readout) through ``compute``, and the
scheduler's heavy jobs (``service.scheduler.Scheduler._run``) with ``heavy=True``.

A view names its device in its ``device`` field. Besides ``cpu`` and ``cuda`` it may name a worker's device,
``cpu@worker`` or ``cuda@worker``: the page chose a device that a cluster worker has. Such a view, and a plain
``cuda`` view in a process without CUDA, computes on a worker that reports that device (for ``cuda`` also one that
advertises the ``GPU`` resource); the worker reduces the result to display size on its device, as in-process
computation does, and sends back the result cache's parts (its JSON and arrays). With no worker that fits, or
without a scheduler (``ATTN_EXPLORER_SCHEDULER``), it computes here, exactly as before. On a worker everything
computes in place.

Workers report their devices (``core.device.available_devices()``), host name and pid through ``client.run``; the
answer is kept ``DEVICES_SECONDS``.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

from core import cancel as core_cancel
from core import device as core_device
from core import limits as core_limits
from service import dask_client

REMOTE = "@worker"  # a device name's suffix: that device on a cluster worker
DEVICES_SECONDS = 5.0


@dataclass(frozen=True)
class Placement:
    """Where a view computes: ``host`` (this host's name, or the worker's), ``device`` (cpu | cuda), ``remote``.
    ``worker`` is the Dask worker's address a remote light call is pinned to (None: any fitting worker)."""

    host: str
    device: str
    remote: bool
    worker: str | None = None
    name: str = ""  # the worker's name

    def describe(self) -> str:
        if not self.remote:
            return f"{self.device} in this process ({self.host})"
        who = f"worker {self.name}" if self.name else "a worker"
        return f"{self.device} on {who} ({self.host})"


@dataclass(frozen=True)
class WorkerDevices:
    address: str
    name: str
    host: str
    pid: int
    devices: tuple[str, ...]
    gpu: bool  # advertises the GPU resource


def computing_here(device: str) -> Placement:
    """Where a computation running now runs: this Dask worker (its name and host), or this process."""
    name = dask_client.worker_name()
    if name is not None:
        return Placement(this_host(), device, True, name=name)
    return _here(device)


def this_host() -> str:
    return socket.gethostname()


def base_device(name: str) -> str:
    """``cuda@worker`` -> ``cuda``; other names unchanged."""
    return name[: -len(REMOTE)] if name.endswith(REMOTE) else name


def is_remote_name(name: str) -> bool:
    return name.endswith(REMOTE)


def _report() -> dict[str, Any]:
    """Run on each worker by ``client.run``."""
    return {"devices": core_device.available_devices(), "host": this_host(), "pid": os.getpid()}


_cache_lock = threading.Lock()
_cached: tuple[float, str, list[WorkerDevices]] | None = None


def worker_devices(runner: dask_client.ClusterRunner | None = None) -> list[WorkerDevices]:
    """The cluster's workers and their devices (kept ``DEVICES_SECONDS``); [] without a reachable scheduler."""
    global _cached
    if dask_client.on_worker():
        return []
    runner = runner if runner is not None else dask_client.runner()
    if runner is None:
        return []
    with _cache_lock:
        now = time.monotonic()
        if _cached is not None and _cached[1] == runner.address and now - _cached[0] < DEVICES_SECONDS:
            return _cached[2]
        client = runner.client()
        if client is None:
            return []
        try:
            info = client.scheduler_info(n_workers=-1).get("workers", {})
            reports = client.run(_report, on_error="return")  # a worker that fails to answer is left out
        except Exception:  # a worker left between the two calls, or the scheduler went away: ask again later
            reports, info = {}, {}
        found = [
            WorkerDevices(
                address=address,
                name=str(info.get(address, {}).get("name", address)),
                host=str(report.get("host", "")),
                pid=int(report.get("pid", 0)),
                devices=tuple(str(d) for d in report.get("devices", ())),
                gpu=info.get(address, {}).get("resources", {}).get(dask_client.GPU_RESOURCE, 0) > 0,
            )
            for address, report in sorted(reports.items())
            if address in info and isinstance(report, dict)
        ]
        _cached = (now, runner.address, found)
        return found


def _fitting(device: str, runner: dask_client.ClusterRunner | None = None) -> WorkerDevices | None:
    """The worker a ``device`` computation goes to: it has the device (for cuda, with the GPU resource); workers
    with the GPU resource first, then by address."""
    fits = [w for w in worker_devices(runner) if device in w.devices and (device != "cuda" or w.gpu)]
    fits.sort(key=lambda w: (not w.gpu, w.address))
    return fits[0] if fits else None


def offered() -> list[str]:
    """The worker devices a Device control offers: ``cpu@worker``, ``cuda@worker`` where a worker has them."""
    return [f"{d}{REMOTE}" for d in ("cpu", "cuda") if _fitting(d) is not None]


def _here(device: str) -> Placement:
    return Placement(this_host(), device, False)


def _remote(worker: WorkerDevices, device: str) -> Placement:
    host = worker.host or worker.address
    return Placement(host, device, True, worker.address, worker.name)


def for_device(name: str, runner: dask_client.ClusterRunner | None = None) -> Placement | None:
    """The remote placement a device name asks for (None: it computes here). ``X@worker`` goes to a worker with X;
    ``cuda`` and ``auto`` go to a CUDA worker when this process has no CUDA."""
    if dask_client.on_worker():
        return None
    if is_remote_name(name):
        wanted = base_device(name)
    elif name in ("cuda", "auto") and not core_device.cuda_available():
        wanted = "cuda"
    else:
        return None
    worker = _fitting(wanted, runner)
    return _remote(worker, wanted) if worker is not None else None


def view_device_name(requested: str, used: Any) -> str:
    """The device a page's views carry: ``X@worker`` when the requested device computes on a worker, else the
    local device's type (``used``: the torch device the Device control resolved)."""
    remote = for_device(requested)
    return f"{remote.device}{REMOTE}" if remote is not None else str(used.type)


def describe_choice(requested: str, used: Any) -> str:
    """The "Running on ..." caption: the worker's host and device, or this machine's device."""
    remote = for_device(requested)
    return remote.describe() if remote is not None else core_device.describe(used)


def where(view: Any, *, heavy: bool = False, runner: dask_client.ClusterRunner | None = None) -> Placement:
    """Where ``view`` computes. A worker's device (``X@worker``), or ``cuda`` without CUDA here, goes to a worker
    that has it; a heavy job goes to any worker (``cuda`` ones to a worker advertising the GPU) when a scheduler is
    reachable; everything else computes in this process."""
    device = dask_client.view_device(view) or "cpu"
    if dask_client.on_worker():
        return _here(base_device(device))
    if runner is None:
        runner = dask_client.runner()
    if runner is None:
        return _here(base_device(device))
    if is_remote_name(device) or (device == "cuda" and not core_device.cuda_available()):
        remote = for_device(device, runner)
        if remote is not None:
            return remote
    if heavy and runner.client() is not None:
        return Placement("a worker", base_device(device), True)
    return _here(base_device(device))


def compute(view: Any, report: Any = None) -> Any:
    """``view``'s result computed where ``where`` says (no cache): here, or on the worker, whose result comes back
    in the result cache's format. Waiting for a worker follows this thread's cancel token."""
    placement = where(view)
    if not placement.remote:
        return view.compute(report)
    return run_remote(view, placement)


def run_remote(view: Any, placement: Placement) -> Any:
    """``view`` computed on the worker ``placement`` names, under the job time limit; waiting follows this thread's
    cancel token (a cancel stops the wait at once)."""
    runner = dask_client.runner()
    client = runner.client() if runner is not None else None
    if runner is None or client is None:  # the scheduler went away since ``where``: compute here
        return view.compute(None)
    if placement.worker is None:
        return runner.compute(client, view, core_limits.job_seconds(), core_cancel.current())
    return runner.light_call(client, placement.worker, view, core_limits.job_seconds(), core_cancel.current())


__all__ = [
    "REMOTE",
    "Placement",
    "WorkerDevices",
    "base_device",
    "compute",
    "computing_here",
    "describe_choice",
    "for_device",
    "is_remote_name",
    "offered",
    "this_host",
    "view_device_name",
    "where",
    "worker_devices",
]
