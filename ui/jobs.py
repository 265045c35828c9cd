"""The page side of the scheduler (``service.scheduler``): how a page waits for a heavy job (queue place, progress
bar, Cancel), the page run's cancel token, and which session a job belongs to. Importing this module installs these
into the service (``service.scheduler.install``): the service itself imports no Streamlit.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import streamlit as st

from core import cancel as core_cancel
from core.cancel import Cancelled, CancelToken
from service import result_cache
from service import scheduler as service_scheduler
from service.dask_client import EngineMismatch, WorkerLost
from service.scheduler import LIGHT_SECONDS, POLL_SECONDS, Job, Report, Scheduler, estimate_seconds
from ui import page_lifecycle, streamlit_compat

__all__ = ["LIGHT_SECONDS", "estimate_seconds", "page_token", "run_heavy"]

T = TypeVar("T")


PAGE_TOKEN_ATTRIBUTE = "_attn_explorer_cancel"
STOPPED_REASON = "the page run was stopped (the browser tab closed, or the run was stopped)"


def page_token() -> CancelToken | None:
    """The cancel token of the page run on this thread (None off a script thread), cancelled once the run is told
    to stop: Streamlit asks a session's script run to stop when its browser tab closes, but the run only notices at
    its next Streamlit call, so a long engine loop computing in the page thread would go on. The engine's loops
    check this token (``core.cancel.set_fallback``). One token per script runner: a stopped runner never reruns.
    """
    ctx = streamlit_compat.script_run_ctx()
    if ctx is None:
        return None
    token = getattr(ctx, PAGE_TOKEN_ATTRIBUTE, None)
    if token is None:
        requests = ctx.script_requests

        def stopped() -> str | None:
            # Not a public API: where Streamlit renames it, page-thread work runs on as before (jobs still stop).
            return STOPPED_REASON if streamlit_compat.script_request_state(requests) == "STOP" else None

        token = CancelToken(watch=stopped if requests is not None else None)
        setattr(ctx, PAGE_TOKEN_ATTRIBUTE, token)
    return token


def _halt() -> None:
    """End this page run here, still drawing the page's footer (notices, share link), or the fragment's end."""
    try:
        page_lifecycle.finish_stopped()
    except (AttributeError, KeyError, RuntimeError):  # a bare script without ui.page()
        pass
    st.stop()


def _session_id() -> str:
    ctx = streamlit_compat.script_run_ctx()
    return ctx.session_id if ctx is not None else f"thread-{threading.get_ident()}"


def _click_waits_in_this_fragment() -> bool:
    """True when the browser sent a widget change made in the fragment this run is in, and the change waits.

    Streamlit lets a change inside an ``st.fragment`` wait for the run in progress instead of stopping it, so a
    Cancel click under a job's progress bar would wait for the job. This reads the runner's pending request (not
    a public API): if Streamlit changes it, this answers False and the change waits as Streamlit decides.
    """
    ctx = streamlit_compat.script_run_ctx()
    fragment = streamlit_compat.script_thread_state().fragment_id if ctx is not None else None
    requests = getattr(ctx, "script_requests", None)
    if fragment is None or requests is None:
        return False
    return fragment in streamlit_compat.pending_rerun_fragment_ids(requests)


def _status_text(sched: Scheduler, job: Job, title: str) -> str:
    if job.state == "queued":
        place, wait = sched.position(job)
        others = "" if place <= 1 else f" ({place - 1} ahead of you)"
        return f"{title}: waiting for a free compute slot, number {place} in the queue{others}, starts in ~{wait:.0f} s"
    elapsed = time.monotonic() - (job.started or time.monotonic())
    limit = job.token.deadline
    of = f" of at most {limit:.0f} s" if limit is not None else ""
    label = f": {job.label}" if job.label else ""
    return f"{title}{label} ({elapsed:.0f} s{of})"


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
    """Compute (or fetch) a heavy result for the page: the shared cache first, then the scheduler's queue.

    ``key``: the plain settings that determine the result (scalars, tuples, ``InputSpec``); ``name`` + ``key`` +
    the engine version form the cache key. ``compute(report)`` must only use those settings; it runs on a
    worker thread, so it must not call Streamlit. ``estimate_seconds`` at or below ``LIGHT_SECONDS`` runs at once
    in this thread (light work never waits behind heavy work); above it, or unknown, the job is queued. While
    waiting the page shows the place in the queue and an estimate, then a progress bar and a Cancel button.
    A stopped script run (a changed setting, Cancel, a closed tab) releases the job; nobody waiting cancels it.
    Errors raised by ``compute`` are raised here; a job past ``ATTN_EXPLORER_JOB_SECONDS`` ends the page run
    with a message naming that setting.
    """
    full = result_cache.make_key(name, key)
    hit = result_cache.get_key(full)
    if hit is not None:
        return hit
    title = title or name.replace("_", " ").capitalize()
    session_id = _session_id()

    if estimate_seconds is not None and estimate_seconds <= LIGHT_SECONDS:
        try:
            return service_scheduler.run_at_once(full, compute, expire, parent=page_token())
        except Cancelled as exc:
            st.error(f"{title} stopped: {exc}")
            _halt()

    widget = f"jobs_{full.replace(':', '_')[:40]}"  # one Cancel button per job, even with many on a page
    cancelled: set[str] = st.session_state.setdefault("_jobs_cancelled", set())
    if full in cancelled:
        if not st.button("Run it again", key=f"{widget}_again", icon=":material/replay:"):
            st.warning(f"{title} was cancelled. Change a setting, or run it again.")
            _halt()
        cancelled.discard(full)

    sched = service_scheduler.scheduler()
    placeholder = st.empty()
    with placeholder.container():
        bar = st.progress(0.0, text=f"{title}: starting…")
        stop = st.button("Cancel", key=f"{widget}_cancel", icon=":material/cancel:")
    if stop:
        cancelled.add(full)
        for job in sched.jobs():
            if job.key == full:
                sched.release(job, session_id, "cancelled by the user")
        placeholder.empty()
        st.button("Run it again", key=f"{widget}_again", icon=":material/replay:")
        st.warning(f"{title} was cancelled. Change a setting, or run it again.")
        _halt()

    # Joining happens under the scheduler's lock and only for a job nobody has cancelled, so a job this page
    # waits on ends done, failed, or cancelled by its own time limit (or a server shutdown).
    job = sched.submit(name, full, compute, session_id, estimate_seconds, task=task, expire=expire)
    try:
        while True:
            bar.progress(job.progress, text=_status_text(sched, job, title))  # also where a stop request arrives
            if job.done_event.wait(POLL_SECONDS):
                break
            if _click_waits_in_this_fragment():
                # Stop waiting so the click (Cancel, a changed knob) acts now, as it does outside fragments.
                st.rerun(scope="fragment" if page_lifecycle.fragment_rerun() else "app")
    finally:
        if not job.finished_state:
            sched.release(job, session_id)
    if job.state == "done":
        placeholder.empty()
        return job.result
    if job.state == "failed" and job.error is not None:
        placeholder.empty()
        if isinstance(job.error, (WorkerLost, EngineMismatch)):  # the cluster's trouble, not the page's: no traceback
            st.error(f"{title} stopped: {job.error}")
            _halt()
        raise job.error
    placeholder.empty()
    st.error(f"{title} stopped: {job.token.reason or 'cancelled'}.")
    _halt()
    raise AssertionError("unreachable: st.stop() raises")


def streamlit_session_active(session_id: str) -> bool | None:
    """True/False from the Streamlit runtime; None where there is no runtime (tests, bare scripts)."""
    return streamlit_compat.session_active(session_id)


def install() -> None:
    """Put the page side into the service: Streamlit's session liveness, the page's waiting, the page run's token."""
    service_scheduler.install(session_active=streamlit_session_active, run_heavy=run_heavy)
    core_cancel.set_fallback(page_token)


install()
