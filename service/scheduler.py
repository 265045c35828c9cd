"""The process-wide scheduler for heavy work: a fixed number of compute slots and a fair queue across sessions.

- Slots: ``ATTN_EXPLORER_SLOTS``, else one per GPU, else ``cores // 2`` (at least 1). Each job runs with
  ``cores // slots`` torch threads, so all slots together never oversubscribe the CPU.
- Fairness: queued jobs are started round-robin across session ids, so a session that submits many jobs
  waits behind its own jobs, never in front of everyone else's.
- Sharing: a job is identified by its cache key; a second session asking for the same result while it is
  queued or running joins it (a class opening one link costs one computation). The result is stored in the
  shared disk cache (``service.result_cache``) when it finishes.
- Cancellation: a job is cancelled when every session waiting on it has gone: its script run was stopped
  (the user changed a setting, pressed Cancel, or closed the tab) or the watchdog sees that the session is
  no longer active in the front end's runtime (``session_active``, a hook ``ui.jobs`` installs). Each job also stops
  at ``ATTN_EXPLORER_JOB_SECONDS``.
- Where: in this process, or, when ``ATTN_EXPLORER_SCHEDULER`` names a Dask scheduler, on its workers
  (``service.dask_client``): a job that carries its view (``task``) is sent there once it starts; this scheduler still
  admits, queues, shows progress and cancels it. Slots then default to the workers' threads.

Pages call ``run_heavy(name, key, compute, estimate_seconds)`` (through ``service.views.run``); ``compute(report)``
gets a progress callback ``report(fraction, label)`` that also stops the job once it is cancelled. How a page waits
(queue place, progress bar, Cancel) is the front end's part: ``ui.jobs`` installs it here. This module imports no
Streamlit.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, cast

import torch

from core import cancel as core_cancel
from core import config, limits
from core.cancel import Cancelled, CancelToken
from core.device import cpu_threads
from service import dask_client, placement, result_cache
from service.host import usable_cpus

if TYPE_CHECKING:
    from service.dask_client import ClusterRunner

T = TypeVar("T")

LIGHT_SECONDS = 2.0  # estimated work below this runs at once in the page's own thread, never queued
POLL_SECONDS = 0.2  # how often a waiting page refreshes its status (and notices that it was stopped)
WATCHDOG_SECONDS = 0.5  # how often the watchdog looks for jobs whose sessions have gone
# Attention-matrix entries a page's engine work gets through per second on the reference 2-core CPU (the
# default 12-temperature sweep touches 12 x 4 heads x 512^2 x 4 passes = 5e7). Only used to tell light work from
# heavy work.
ELEMENTS_PER_SECOND = 3e7


def estimate_seconds(elements: float) -> float:
    """A rough run time for work touching ``elements`` attention entries (for ``run_heavy``'s light/heavy split)."""
    return float(elements) / ELEMENTS_PER_SECOND


def default_slots() -> int:
    configured = config.read("slots")  # ATTN_EXPLORER_SLOTS
    if configured is not None:
        return configured
    if torch.cuda.is_available():
        return max(1, torch.cuda.device_count())
    return max(1, usable_cpus() // 2)


def threads_per_job(slots: int) -> int:
    """The torch threads each of ``slots`` compute slots gets on this host's CPUs."""
    return max(1, usable_cpus() // max(1, slots))


def light_slots() -> int:
    """How many light computations run at once (``ATTN_EXPLORER_LIGHT_SLOTS``, default: one per core)."""
    configured = config.read("light_slots")
    return configured if configured is not None else usable_cpus()


_light_gates: dict[int, threading.BoundedSemaphore] = {}
_light_gates_lock = threading.Lock()
_light_held = threading.local()


@contextmanager
def light_work() -> Iterator[None]:
    """Hold one of ``light_slots()`` while computing a light result (a method at the page's settings, exact attention).

    Twenty sessions that each compute a new setting otherwise all compute at once: on two cores they finish no
    sooner, each holds its intermediate matrices (tens of MB at n = 512) meanwhile, and the first of them waits for
    all. Light work still never waits behind heavy work (the scheduler's slots are separate). Re-entrant per
    thread: a light computation that calls another does not wait for itself. Also a decorator.
    """
    if getattr(_light_held, "holding", False):  # the outermost block holds the slot and gives it back
        yield
        return
    slots = light_slots()
    with _light_gates_lock:
        gate = _light_gates.setdefault(slots, threading.BoundedSemaphore(slots))
    with gate:
        _light_held.holding = True
        try:
            yield
        finally:
            _light_held.holding = False


def job_seconds() -> float:
    """The time limit of one job (``ATTN_EXPLORER_JOB_SECONDS``, default 60); a bad value raises ParameterError."""
    return limits.job_seconds()


class Report:
    """The progress callback a job's compute function gets: ``report(fraction, label)``; ``.token`` for loops.

    Every report checks the token, so a compute function that reports between steps stops once cancelled.
    """

    def __init__(self, token: CancelToken, job: Job | None = None) -> None:
        self._job = job
        self.token = token

    def __call__(self, fraction: float, label: str = "") -> None:
        self.token.check()
        if self._job is not None:
            self._job.progress = min(1.0, max(0.0, float(fraction)))
            self._job.label = str(label)


@dataclass(eq=False)
class Job:
    name: str
    key: str  # the full cache key (one job per key at a time)
    compute: Callable[[Report], Any]
    estimate: float | None
    token: CancelToken  # no deadline while queued; ``limit`` is set when the job starts
    limit: float
    owners: set[str] = field(default_factory=set)
    state: str = "queued"  # queued | running | done | failed | cancelled
    progress: float = 0.0
    label: str = ""
    result: Any = None
    error: BaseException | None = None
    submitted: float = field(default_factory=time.monotonic)
    started: float | None = None
    finished: float | None = None
    done_event: threading.Event = field(default_factory=threading.Event)
    id: int = 0
    task: Any = None  # the View that ``compute`` belongs to: what a cluster worker is sent (None: in-process only)
    expire: float | None = None  # seconds the shared cache keeps the result (None: until evicted)

    @property
    def finished_state(self) -> bool:
        return self.state in ("done", "failed", "cancelled")


_ids = itertools.count(1)


class Scheduler:
    """Fixed compute slots, a round-robin queue over sessions, shared jobs, and a watchdog."""

    def __init__(
        self,
        slots: int | None = None,
        *,
        is_active: Callable[[str], bool | None] | None = None,
        store: Callable[..., None] | None = None,  # (name, key, value[, expire=seconds])
        watchdog_seconds: float = WATCHDOG_SECONDS,
        cluster: Callable[[], ClusterRunner | None] | None = None,
    ) -> None:
        self._cluster = cluster
        if slots is None:
            remote = cluster() if cluster is not None else None
            slots = config.read("slots") or (remote.slots() if remote is not None else None) or default_slots()
        self.slots = slots
        self.threads_per_job = threads_per_job(self.slots)
        self._executor = ThreadPoolExecutor(max_workers=self.slots, thread_name_prefix="attn-job")
        self._lock = threading.RLock()
        self._queues: OrderedDict[str, deque[Job]] = OrderedDict()  # session id -> its queued jobs, RR order
        self._running: set[Job] = set()
        self._by_key: dict[str, Job] = {}
        self._history: dict[str, float] = {}  # name -> recent run time, for estimates
        self._is_active = is_active if is_active is not None else session_active
        self._store = store
        self._closed = threading.Event()
        self._watchdog = threading.Thread(
            target=self._watch, args=(watchdog_seconds,), name="attn-job-watchdog", daemon=True
        )
        self._watchdog.start()

    # -------------------------------------------------------------- submitting and leaving

    def submit(
        self,
        name: str,
        key: str,
        compute: Callable[[Report], Any],
        session_id: str,
        estimate: float | None = None,
        deadline: float | None = None,
        task: Any = None,
        expire: float | None = None,
    ) -> Job:
        """Queue ``compute`` for ``session_id``, or join the queued/running job with the same key."""
        with self._lock:
            job = self._by_key.get(key)
            if job is not None and not job.finished_state and not job.token.cancelled:
                if session_id not in job.owners:
                    job.owners.add(session_id)
                return job
            limit = job_seconds() if deadline is None else deadline
            job = Job(name, key, compute, estimate, CancelToken(), limit, {session_id}, id=next(_ids), task=task)
            job.expire = expire
            self._by_key[key] = job
            self._queues.setdefault(session_id, deque()).append(job)
            self._dispatch()
            return job

    def release(self, job: Job, session_id: str, reason: str = "the page stopped waiting") -> None:
        """``session_id`` no longer waits for ``job``; cancel it when nobody else does."""
        with self._lock:
            job.owners.discard(session_id)
            if not job.owners and not job.finished_state:
                self._cancel(job, reason)

    def cancel_session(self, session_id: str, reason: str) -> None:
        with self._lock:
            for job in self.jobs():
                if session_id in job.owners:
                    self.release(job, session_id, reason)

    def _cancel(self, job: Job, reason: str) -> None:
        job.token.cancel(reason)
        if job.state == "queued":
            self._drop_queued(job)
            self._finish(job, "cancelled", error=Cancelled(reason))

    def _drop_queued(self, job: Job) -> None:
        for session_id, queue in list(self._queues.items()):
            if job in queue:
                queue.remove(job)
            if not queue:
                del self._queues[session_id]

    # -------------------------------------------------------------- running

    def _next_job(self) -> Job | None:
        """Round robin: the first session in line gives its oldest job and goes to the back of the line."""
        while self._queues:
            session_id, queue = next(iter(self._queues.items()))
            job = queue.popleft()
            del self._queues[session_id]
            if queue:
                self._queues[session_id] = queue  # re-inserted at the end
            if not job.token.cancelled:
                return job
            self._finish(job, "cancelled", error=Cancelled(job.token.reason or "cancelled"))
        return None

    def _dispatch(self) -> None:
        with self._lock:
            while len(self._running) < self.slots and not self._closed.is_set():
                job = self._next_job()
                if job is None:
                    return
                job.state = "running"
                job.started = time.monotonic()
                job.token.start(job.limit)  # the time limit counts from the start, not from the queue
                self._running.add(job)
                self._executor.submit(self._run, job)

    def _run(self, job: Job) -> None:
        state, result = "done", None
        error: BaseException | None = None
        remote = self._cluster() if self._cluster is not None and job.task is not None else None
        client = remote.client() if remote is not None else None  # None: unreachable, so compute here
        # The one decision of where a view computes (service.placement): a heavy job goes to a worker that fits.
        place = placement.where(job.task, heavy=True, runner=remote) if client is not None else None
        try:
            with core_cancel.active(job.token), cpu_threads(self.threads_per_job):
                job.token.check()
                if remote is not None and client is not None and place is not None and place.remote:
                    result = remote.run(job, client, place.worker)
                else:
                    result = job.compute(Report(job.token, job))
        except Cancelled as exc:
            state, error = "cancelled", exc
        except BaseException as exc:  # handed to the waiting page, which shows it
            state, error = "failed", exc
        if state == "done" and self._store is not None:
            try:
                if job.expire is None:
                    self._store(job.name, job.key, result)
                else:
                    self._store(job.name, job.key, result, expire=job.expire)
            except Exception as exc:  # a full disk must not lose the result for the waiting page
                job.label = f"not cached: {exc}"
        with self._lock:
            self._running.discard(job)
            if state == "done" and job.started is not None:
                self._history[job.name] = time.monotonic() - job.started
            self._finish(job, state, result=result, error=error)
            self._dispatch()

    def _finish(self, job: Job, state: str, result: Any = None, error: BaseException | None = None) -> None:
        job.state, job.result, job.error = state, result, error
        job.finished = time.monotonic()
        if self._by_key.get(job.key) is job:
            del self._by_key[job.key]
        job.done_event.set()

    # -------------------------------------------------------------- what a waiting page shows

    def jobs(self) -> list[Job]:
        with self._lock:
            return [*self._running, *self.queue_order()]

    def queue_order(self) -> list[Job]:
        """Queued jobs in the order the round robin will start them."""
        with self._lock:
            queues = [list(q) for q in self._queues.values()]
        order: list[Job] = []
        for depth in range(max((len(q) for q in queues), default=0)):
            order.extend(q[depth] for q in queues if depth < len(q))
        return order

    def expected_seconds(self, job: Job) -> float:
        value = job.estimate if job.estimate is not None else self._history.get(job.name)
        return float(value) if value is not None else 10.0

    def position(self, job: Job) -> tuple[int, float]:
        """(1-based place in the queue, estimated seconds until it starts); (0, 0) once it runs."""
        with self._lock:
            if job.state != "queued":
                return 0, 0.0
            order = self.queue_order()
            if job not in order:
                return 0, 0.0
            ahead = order[: order.index(job)]
            now = time.monotonic()
            running = sum(max(0.0, self.expected_seconds(j) - (now - (j.started or now))) for j in self._running)
            work = running + sum(self.expected_seconds(j) for j in ahead)
            return len(ahead) + 1, work / self.slots

    # -------------------------------------------------------------- the watchdog

    def _watch(self, every: float) -> None:
        while not self._closed.wait(every):
            self.sweep_inactive()

    def sweep_inactive(self) -> None:
        """Release every job from sessions that are no longer active (closed tabs)."""
        for job in self.jobs():
            for session_id in list(job.owners):
                if self._is_active(session_id) is False:
                    self.release(job, session_id, "the browser tab was closed")

    def cancel_all(self, reason: str = "the server is shutting down") -> None:
        self._closed.set()
        with self._lock:
            for job in self.jobs():
                self._cancel(job, reason)

    def shutdown(self) -> None:
        self.cancel_all()
        self._executor.shutdown(wait=True, cancel_futures=True)


# ------------------------------------------------------------------ what the front end installs

# The service imports no Streamlit. Where it needs the front end (whether a session is still connected, how a page
# waits for a heavy job), the front end installs a hook at startup (``ui.jobs`` does, on import); without one, a
# bare script or a worker gets the plain behaviour below.


def no_session_runtime(session_id: str) -> bool | None:
    """The default ``session_active`` hook: there is no runtime to ask (tests, bare scripts): None."""
    return None


@dataclass
class Hooks:
    """``session_active(session_id)``: True/False from the front end's runtime, None where it cannot tell.
    ``run_heavy(name, key, compute, estimate_seconds, *, title, task, expire)``: how a page waits for heavy work
    (queue place, progress bar, Cancel); ``run_here`` when none is installed."""

    session_active: Callable[[str], bool | None] = no_session_runtime
    run_heavy: Callable[..., Any] | None = None


HOOKS = Hooks()


def install(
    *, session_active: Callable[[str], bool | None] | None = None, run_heavy: Callable[..., Any] | None = None
) -> None:
    """Install the front end's hooks (each one given replaces the current one)."""
    if session_active is not None:
        HOOKS.session_active = session_active
    if run_heavy is not None:
        HOOKS.run_heavy = run_heavy


def session_active(session_id: str) -> bool | None:
    """Whether a session is still connected, from the installed hook (None: cannot tell)."""
    return HOOKS.session_active(session_id)


def run_here(
    name: str,
    key: Any,
    compute: Callable[[Report], T],
    estimate_seconds: float | None = None,
    *,
    title: str | None = None,
    task: Any = None,
    expire: float | None = None,
) -> T:
    """A heavy result without a front end: the shared cache, else ``run_at_once`` under the caller's cancel token."""
    full = result_cache.make_key(name, key)
    hit = result_cache.get_key(full)
    if hit is not None:
        return cast(T, hit)
    return run_at_once(full, compute, expire, parent=core_cancel.current())


def run_at_once(
    full: str, compute: Callable[[Report], T], expire: float | None = None, *, parent: CancelToken | None
) -> T:
    """``compute`` at once in this thread under the job time limit and ``parent``'s cancel (raises Cancelled), stored
    under the cache key ``full`` unless cancelled (a stopped page run does not spend a second writing the cache).
    ``run_here`` and the front end's light path (``ui.jobs.run_heavy``) both compute this way."""
    token = CancelToken(deadline=job_seconds(), parent=parent)
    with core_cancel.active(token):
        value = compute(Report(token))
    if not token.cancelled:
        result_cache.put_key(full, value, expire)
    return value


def run_heavy(
    name: str,
    key: Any,
    compute: Callable[[Report], T],
    estimate_seconds: float | None = None,
    *,
    title: str | None = None,
    task: Any = None,
    expire: float | None = None,
) -> T:
    """A heavy result through the front end's hook when one is installed (``ui.jobs.run_heavy``), else ``run_here``."""
    runner = HOOKS.run_heavy or run_here
    return cast(T, runner(name, key, compute, estimate_seconds, title=title, task=task, expire=expire))


def _store_result(name: str, key: str, value: Any, expire: float | None = None) -> None:
    result_cache.put_key(key, value, expire)


_scheduler: Scheduler | None = None
_scheduler_lock = threading.Lock()


def scheduler() -> Scheduler:
    """The process-wide scheduler (created on first use)."""
    global _scheduler
    with _scheduler_lock:
        if _scheduler is None:
            _scheduler = Scheduler(store=_store_result, cluster=dask_client.runner)
            # At interpreter exit the executor joins its workers; cancel first so a running job does not hold
            # the exit for up to ATTN_EXPLORER_JOB_SECONDS (the same hook concurrent.futures itself uses).
            register = getattr(threading, "_register_atexit", None)
            if register is not None:
                register(_scheduler.cancel_all)
        return _scheduler


def any_running() -> bool:
    """A job of this process's scheduler is running (False, without creating one, when there is none yet)."""
    return _scheduler is not None and any(job.state == "running" for job in _scheduler.jobs())
