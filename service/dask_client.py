"""Heavy jobs on Dask distributed workers, when ``ATTN_EXPLORER_SCHEDULER`` names a Dask scheduler.

Why Dask (not Ray): its wheels are pure Python and install wherever the app does; a cluster is two commands
(``dask scheduler``, ``dask worker ADDRESS --resources GPU=1``); and it has what this needs built in: a cluster-wide
``Event`` (cancellation), worker events pushed to subscribed clients (progress), worker resources (GPU placement) and
the rescheduling of a dead worker's tasks, bounded by ``distributed.scheduler.allowed-failures`` (set it to 1: one
retry). Ray would add its own object store, a control service and several hundred MB of wheels per host.

The app's scheduler (``service.scheduler``) stays the admission layer: estimates, limits, the fair per-session queue,
queue places and progress bars. Only where a started job computes changes. What travels:
- to the worker: the job's ``View`` (a frozen dataclass of plain settings, ``service.views``), the app's engine version,
  the time limit and a job id. The worker refuses a job from another engine version (its numbers would be cached
  under the wrong key).
- back: the result in the result cache's own parts (``service.result_cache.encode_parts``: its arrays plus the JSON of
  its structure, never a pickle of the result), the arrays as raw buffers with no archive on the way; the app stores
  it in the shared cache, so a job that fails or is cancelled leaves nothing there. A light call
  (``service.placement``) is the same call without a job: no progress, and the app stops waiting to cancel it.
- progress: ``report(fraction, label)`` on the worker logs an event on one topic; the app's client is subscribed to
  it and updates the waiting job (at most ``PROGRESS_PER_SECOND`` events per job).
- cancellation: the app sets the job's Dask ``Event``; a thread on the worker waits on it and cancels the engine's
  ``CancelToken``, whose next check (between engine steps) stops the computation.

The scheduler's port runs code it is sent: keep it on loopback or a private network (docs/deploying.md).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import logging
import os
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from core import cancel as core_cancel
from core import config
from core.cancel import Cancelled, CancelToken
from core.device import cpu_threads
from service import result_cache
from service.host import usable_cpus

if TYPE_CHECKING:
    from service.scheduler import Job

log = logging.getLogger(__name__)

PROGRESS_TOPIC = "attn-explorer-progress"
PROGRESS_PER_SECOND = 4.0
CANCEL_WAIT_SECONDS = 0.25  # how often the worker's watcher re-arms its wait on the cancel event
POLL_SECONDS = 0.1  # how often the app's job thread looks for a result or a cancellation
CANCEL_GRACE_SECONDS = 5.0  # a worker that has not stopped this long after the cancel event is left behind
CONNECT_SECONDS = 5.0
RETRY_SECONDS = 10.0  # after a failed connection, jobs compute in-process this long before trying again
GPU_RESOURCE = "GPU"
# A result is fetched from its worker itself, not relayed by the scheduler (Dask's default): on loopback that took a
# 4.7 MB result's fetch from 67 ms to 11 ms (benchmarks/placement.py). Replicas must reach the workers' ports, as
# they do on one private network; where one cannot, Dask falls back to the scheduler after its connect timeout.
GATHER_DIRECT = True
# A light call is a request to the worker's own handler (``ClusterRunner.light_call``), computed in its own one-thread
# executor, so a heavy job running on the worker does not hold Compare's light calls behind it.
LIGHT_CALL = "attn_light_call"
LIGHT_EXECUTOR = "attn-light"


class WorkerLost(RuntimeError):
    """The workers computing a job died (it was retried on another worker as many times as the cluster allows)."""


class EngineMismatch(RuntimeError):
    """A worker runs another version of the engine than the app that sent it the job."""


def address() -> str | None:
    """The Dask scheduler named by ``ATTN_EXPLORER_SCHEDULER`` (None: jobs compute in the app's process)."""
    value = config.read("scheduler")
    return str(value) if value is not None else None


def view_device(task: Any) -> str | None:
    """The device a view computes on: its own ``device`` field, else the first nested view's (None: no device)."""
    if not dataclasses.is_dataclass(task):
        return None
    device = getattr(task, "device", None)
    if isinstance(device, str):
        return device
    for item in dataclasses.fields(task):
        nested = view_device(getattr(task, item.name))
        if nested is not None:
            return nested
    return None


def resources_for(task: Any) -> dict[str, float] | None:
    """A job that computes on CUDA (``cuda`` or ``cuda@worker``) needs a worker that advertises a GPU; any other job
    goes to any worker."""
    device = view_device(task)
    return {GPU_RESOURCE: 1} if device is not None and device.split("@")[0] == "cuda" else None


# ------------------------------------------------------------------ the worker side

_worker_name: str | None = None  # set in a Dask worker (its preload's ``dask_setup``, or its first task): its name


def dask_setup(worker: Any) -> None:
    """The worker preload's hook (``dask worker --preload service.dask_client``): this process is a worker, so every
    view it is sent computes here (``service.placement.where``); its tasks' threads compute with
    ``worker_torch_threads()`` torch threads."""
    global _worker_name
    _worker_name = str(worker.name)
    # Set in the main thread, torch's process-wide count seeds every new thread's, a task's included.
    torch.set_num_threads(worker_torch_threads())
    keep_freed_memory()
    worker.executors[LIGHT_EXECUTOR] = ThreadPoolExecutor(1, thread_name_prefix=LIGHT_EXECUTOR)

    from distributed.protocol import to_serialize

    async def light_call(task: Any = None, engine_version: str = "", limit: float = 0.0) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        meta, arrays = await loop.run_in_executor(
            worker.executors[LIGHT_EXECUTOR], _compute, worker, task, engine_version, limit, None
        )
        return {"meta": meta, "arrays": [to_serialize(array) for array in arrays]}

    worker.handlers[LIGHT_CALL] = light_call


# glibc's mallopt parameters (malloc.h), and what a worker sets them to.
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
KEPT_FREE_BYTES = 128 * 2**20  # freed heap a worker keeps for its next call before returning it to the system
MAPPED_FROM_BYTES = 32 * 2**20  # glibc's largest mmap threshold: smaller blocks come from the heap, reused


def keep_freed_memory() -> bool:
    """Let this worker's heap keep the blocks a call frees for the next call. A Dask nanny starts its worker with
    ``MALLOC_TRIM_THRESHOLD_=65536``, which also fixes glibc's mmap threshold at 128 KiB: every tensor of a call was
    mapped, faulted in page by page and unmapped, and performer at n = 512 computed in 42-56 ms there against 12-14
    with these settings (20-24 ms with glibc's defaults). False where there is no glibc ``mallopt``."""
    import ctypes

    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, MAPPED_FROM_BYTES)) and bool(mallopt(M_TRIM_THRESHOLD, KEPT_FREE_BYTES))


def worker_torch_threads() -> int:
    """The torch threads this worker process computes with: ``OMP_NUM_THREADS`` when the deployment sets it, else the
    CPUs it may use. Without this, a task thread takes MKL's count, and a Dask nanny starts its worker with
    ``MKL_NUM_THREADS=1``: every task computed on one thread (a light call at n = 512 took twice as long)."""
    text = os.environ.get("OMP_NUM_THREADS", "").strip()
    return max(1, int(text)) if text.isdigit() else usable_cpus()


def on_worker() -> bool:
    """Whether this process is a Dask worker: views compute in place, never sent on."""
    return _worker_name is not None


def worker_name() -> str | None:
    """This Dask worker's name (None outside a worker)."""
    return _worker_name


class WorkerReport:
    """``report(fraction, label)`` for a view computing on a worker: checks the token, logs throttled progress."""

    def __init__(self, token: CancelToken, job_id: str, send: Any) -> None:
        self.token = token
        self._job_id = job_id
        self._send = send
        self._last = 0.0

    def __call__(self, fraction: float, label: str = "") -> None:
        self.token.check()
        now = time.monotonic()
        if now - self._last >= 1.0 / PROGRESS_PER_SECOND or fraction >= 1.0:
            self._last = now
            self._send({"job": self._job_id, "fraction": float(fraction), "label": str(label)[:200]})


def _watch_cancel(event: Any, token: CancelToken, finished: threading.Event) -> None:
    while not finished.is_set():
        try:
            if event.wait(timeout=CANCEL_WAIT_SECONDS):
                token.cancel("cancelled: nobody waits for this result any more")
                return
        except Exception:  # the worker is shutting down; the task ends with it
            return


def compute_on_worker(
    task: Any, engine_version: str, limit: float, job_id: str | None = None
) -> tuple[str, list[np.ndarray]]:
    """Run on a Dask worker as a task: compute ``task`` (a View) under a token with the time limit ``limit``; the result
    as the cache's parts (``result_cache.encode_parts``: JSON and arrays, which Dask sends as raw buffers).

    A heavy job (``job_id`` given) reports progress on ``PROGRESS_TOPIC`` and stops when the app sets the Dask
    ``Event`` ``attn-cancel-<job_id>``. Without one (a light call sent as a task to a worker without this module's
    preload) there is neither: the app stops waiting instead (light work ends within seconds)."""
    from distributed import get_worker

    global _worker_name
    worker = get_worker()
    _worker_name = str(worker.name)
    return _compute(worker, task, engine_version, limit, job_id)


def _compute(
    worker: Any, task: Any, engine_version: str, limit: float, job_id: str | None
) -> tuple[str, list[np.ndarray]]:
    """``task`` computed in this worker's thread (a task's or the light calls' executor's), as the cache's parts."""
    from distributed import Event, get_client

    if engine_version != result_cache.ENGINE_VERSION:
        raise EngineMismatch(
            f"worker {worker.name} runs engine {result_cache.ENGINE_VERSION}, the app {engine_version}: "
            "deploy the same version of the app on every worker"
        )
    token = CancelToken(deadline=limit)
    finished = threading.Event()
    report: WorkerReport | None = None
    if job_id is not None:
        watcher = threading.Thread(
            # The client is looked up here: the watcher's own thread is outside the task's context.
            target=_watch_cancel,
            args=(Event(f"attn-cancel-{job_id}", client=get_client()), token, finished),
            daemon=True,
        )
        watcher.start()
        report = WorkerReport(token, job_id, lambda msg: worker.log_event(PROGRESS_TOPIC, msg))
    threads = max(1, worker_torch_threads() // max(1, worker.state.nthreads))
    try:
        with core_cancel.active(token), cpu_threads(threads):
            token.check()
            value = task.compute(report)
        return result_cache.encode_parts(value)
    finally:
        finished.set()


# ------------------------------------------------------------------ the app side


class ClusterRunner:
    """The app's connection to a Dask cluster: submits started jobs, forwards progress and cancellation."""

    def __init__(self, scheduler_address: str) -> None:
        self.address = scheduler_address
        self._client: Any = None
        self._lock = threading.Lock()
        self._failed_at: float | None = None
        self._problem: str | None = None
        self._waiting: dict[str, Job] = {}  # job id -> the app's job, for progress events

    def client(self) -> Any | None:
        """The connected client, or None while the scheduler is unreachable (retried every RETRY_SECONDS)."""
        with self._lock:
            if self._client is not None and self._client.status == "running":
                return self._client
            if self._failed_at is not None and time.monotonic() - self._failed_at < RETRY_SECONDS:
                return None
            try:
                from distributed import Client

                client = Client(self.address, timeout=CONNECT_SECONDS, set_as_default=False)
                client.subscribe_topic(PROGRESS_TOPIC, self._on_progress)
            except Exception as exc:  # unreachable, refused, timed out
                self._failed_at = time.monotonic()
                self._problem = f"the compute cluster at {self.address} is unreachable ({type(exc).__name__})"
                log.warning("%s; computing jobs in this process", self._problem)
                return None
            self._client, self._failed_at, self._problem = client, None, None
            return client

    def problem(self) -> str | None:
        """Why jobs compute in this process although a cluster is configured (None: it is reachable)."""
        return self._problem

    def slots(self) -> int | None:
        """How many jobs the workers can run at once: their threads in all (None when unreachable)."""
        client = self.client()
        if client is None:
            return None
        workers = client.scheduler_info(n_workers=-1).get("workers", {})
        return max(1, sum(int(w.get("nthreads", 1)) for w in workers.values()))

    def gpu_workers(self) -> int:
        client = self.client()
        if client is None:
            return 0
        workers = client.scheduler_info(n_workers=-1).get("workers", {})
        return sum(1 for w in workers.values() if w.get("resources", {}).get(GPU_RESOURCE, 0) > 0)

    def _on_progress(self, event: Any) -> None:
        _, message = event
        job = self._waiting.get(str(message.get("job"))) if isinstance(message, dict) else None
        if job is not None:
            job.progress = min(1.0, max(0.0, float(message.get("fraction", 0.0))))
            job.label = str(message.get("label", ""))

    def light_call(self, client: Any, worker: str, task: Any, limit: float, token: CancelToken | None) -> Any:
        """``task``'s result computed on ``worker`` under the time limit ``limit``, asked of the worker directly (its
        preload's ``LIGHT_CALL`` handler): one round trip, no scheduler, no task state, which on loopback took 13 ms
        of a light call's hop. A cancel of ``token`` stops the wait at once; the worker finishes and drops the result
        (light work ends within seconds). A worker without the handler gets the call as a task instead."""
        from distributed.core import CommClosedError
        from distributed.protocol import to_serialize

        async def ask() -> Any:
            call = getattr(client.rpc(worker), LIGHT_CALL)
            return await call(task=to_serialize(task), engine_version=result_cache.ENGINE_VERSION, limit=limit)

        reply = asyncio.run_coroutine_threadsafe(ask(), client.loop.asyncio_loop)
        try:
            while True:
                try:
                    answer = reply.result(timeout=POLL_SECONDS)
                    break
                except concurrent.futures.TimeoutError:
                    if token is not None and token.cancelled:
                        reply.cancel()
                        raise Cancelled(token.reason or "cancelled") from None
        except (CommClosedError, OSError):
            raise WorkerLost(f"the worker {worker} went away while computing this; try again") from None
        if not isinstance(answer, dict) or "meta" not in answer:  # no handler there: the task way
            return self.compute(client, task, limit, token, worker=worker)
        return result_cache.decode_parts(answer["meta"], list(answer["arrays"]))

    def run(self, job: Job, client: Any, worker: str | None = None) -> Any:
        """Compute a started heavy ``job`` on a worker (``worker``: that one only) and return its result; raises what
        the computation raised there. Its progress follows the worker's reports; a cancel of its token reaches the
        worker, which stops at its next step (left behind after ``CANCEL_GRACE_SECONDS``)."""
        return self.compute(client, job.task, job.limit, job.token, worker=worker, job=job, name=job.name)

    def compute(
        self,
        client: Any,
        task: Any,
        limit: float,
        token: CancelToken | None,
        *,
        worker: str | None = None,
        job: Job | None = None,
        name: str | None = None,
    ) -> Any:
        """``task``'s result computed on a worker (``worker``: that one only) under the time limit ``limit``; raises
        what the computation raised there. Without a ``job`` (a light call) a cancel of ``token`` stops the wait at
        once and the worker's result is dropped; with one, the worker is told to stop."""
        from distributed import Event, KilledWorker

        job_id = uuid.uuid4().hex
        cancel_event = Event(f"attn-cancel-{job_id}", client=client) if job is not None else None
        if job is not None:
            self._waiting[job_id] = job
        future = client.submit(
            compute_on_worker,
            task,
            result_cache.ENGINE_VERSION,
            limit,
            job_id if job is not None else None,
            key=f"attn-{name or 'light-' + type(task).__name__}-{job_id}",
            pure=False,
            resources=resources_for(task),
            workers=[worker] if worker is not None else None,
            allow_other_workers=False,
        )
        cancelled_at: float | None = None
        done = done_event(future)
        try:
            while not done.wait(POLL_SECONDS):
                if cancelled_at is None and token is not None and token.cancelled:
                    if cancel_event is None:  # a light call: stop waiting now
                        future.cancel()
                        raise Cancelled(token.reason or "cancelled")
                    cancel_event.set()
                    cancelled_at = time.monotonic()
                if cancelled_at is not None and time.monotonic() - cancelled_at > CANCEL_GRACE_SECONDS:
                    future.cancel()
                    reason = (token.reason if token is not None else None) or "cancelled"
                    raise Cancelled(f"{reason} (the worker did not stop in time)")
            meta, arrays = client.gather(future, direct=GATHER_DIRECT)
        except KilledWorker as exc:
            raise WorkerLost(
                f"the workers computing this died ({exc.allowed_failures + 1} tries); the job was not cached. "
                "Try again: another worker takes it."
            ) from None
        finally:
            self._waiting.pop(job_id, None)
            if cancel_event is not None and cancelled_at is not None:
                try:
                    cancel_event.clear()  # frees it on the scheduler
                except Exception:
                    pass
        return result_cache.decode_parts(meta, arrays)

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None


def done_event(future: Any) -> threading.Event:
    """An event set when ``future`` finishes. Waiting on it in slices replaces ``future.result(timeout=...)``, whose
    timeout path in distributed 2026.8 can raise ``UnboundLocalError`` on a busy machine (seen in
    benchmarks/placement.py at load average 4 on 2 cores)."""
    done = threading.Event()
    future.add_done_callback(lambda _: done.set())
    return done


_runner: ClusterRunner | None = None
_runner_lock = threading.Lock()


def runner() -> ClusterRunner | None:
    """The process's cluster runner when ``ATTN_EXPLORER_SCHEDULER`` is set (None: compute in-process)."""
    global _runner
    wanted = address()
    with _runner_lock:
        if _runner is not None and _runner.address != wanted:
            _runner.close()
            _runner = None
        if wanted is not None and _runner is None:
            _runner = ClusterRunner(wanted)
        return _runner


def problem() -> str | None:
    """Why heavy jobs compute in this process although ``ATTN_EXPLORER_SCHEDULER`` is set (None when all is well)."""
    current = _runner
    return current.problem() if current is not None else None
