"""Cooperative cancellation for long engine loops (training steps, sweep points, robust-PCA iterations).

A loop calls ``check(cancel)`` between steps; it raises ``Cancelled`` once someone called
``token.cancel(reason)`` (from any thread) or once the token's deadline has passed. The deadline enforces
``ATTN_EXPLORER_JOB_SECONDS`` for jobs started by the app. A loop without an explicit token checks the thread's
ambient one (``with active(token): ...``), so a job's whole call tree stops without threading the token through.
Without an ambient token it asks the fallback that ``set_fallback`` installed (the app's: the token of the page run
on this thread, cancelled once its browser tab closes), so work a page computes in its own thread stops too.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections.abc import Callable, Iterator


class Cancelled(Exception):
    """A computation was stopped before it finished (cancelled, or past its time limit)."""


class CancelToken:
    """Thread-safe cancel flag with an optional deadline (seconds from creation, or from ``start()``).

    ``watch``: asked on every check, returns a reason to cancel (or None): for a condition nobody signals, such as a
    page run that was told to stop. ``parent``: this token is cancelled whenever the parent is.
    """

    def __init__(
        self,
        deadline: float | None = None,
        *,
        watch: Callable[[], str | None] | None = None,
        parent: CancelToken | None = None,
    ) -> None:
        if deadline is not None and not deadline > 0:
            raise ValueError(f"deadline must be a positive number of seconds, got {deadline!r}")
        self.deadline = deadline
        self._watch = watch
        self._parent = parent
        self._lock = threading.Lock()
        self._event = threading.Event()
        self._reason: str | None = None
        self._started = time.monotonic()

    def start(self, deadline: float | None = None) -> None:
        """Restart the deadline clock, optionally setting the deadline (a queued job's limit counts from its start)."""
        if deadline is not None and not deadline > 0:
            raise ValueError(f"deadline must be a positive number of seconds, got {deadline!r}")
        with self._lock:
            self._started = time.monotonic()
            if deadline is not None:
                self.deadline = deadline

    def cancel(self, reason: str = "cancelled") -> None:
        with self._lock:
            if self._reason is None:
                self._reason = reason
        self._event.set()

    @property
    def elapsed(self) -> float:
        with self._lock:
            return time.monotonic() - self._started

    @property
    def cancelled(self) -> bool:
        if self._event.is_set():
            return True
        if self._parent is not None and self._parent.cancelled:
            self.cancel(self._parent.reason or "cancelled")
            return True
        if self._watch is not None:
            reason = self._watch()
            if reason is not None:
                self.cancel(reason)
                return True
        if self.deadline is not None and self.elapsed > self.deadline:
            self.cancel(
                f"stopped after {self.deadline:g} s, the time limit of one job "
                f"(set ATTN_EXPLORER_JOB_SECONDS to allow longer jobs)"
            )
            return True
        return False

    @property
    def reason(self) -> str | None:
        with self._lock:
            return self._reason

    def check(self) -> None:
        """Raise ``Cancelled`` (with the reason) if the token was cancelled or its deadline passed."""
        if self.cancelled:
            raise Cancelled(self.reason or "cancelled")

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``, waking early on cancel; True if cancelled."""
        self._event.wait(seconds)
        return self.cancelled


_current: contextvars.ContextVar[CancelToken | None] = contextvars.ContextVar("attn_explorer_cancel", default=None)


@contextlib.contextmanager
def active(token: CancelToken | None) -> Iterator[None]:
    """Make ``token`` the ambient token of this thread, so nested loops check it without extra arguments."""
    reset = _current.set(token)
    try:
        yield
    finally:
        _current.reset(reset)


_fallback: Callable[[], CancelToken | None] | None = None


def set_fallback(provider: Callable[[], CancelToken | None] | None) -> None:
    """The token to check where no ambient token is active (``None`` removes it). The app installs one per page run."""
    global _fallback
    _fallback = provider


def current() -> CancelToken | None:
    """The ambient token of this thread, else the fallback's token (None when there is neither)."""
    token = _current.get()
    if token is None and _fallback is not None:
        token = _fallback()
    return token


def check(token: CancelToken | None = None) -> None:
    """Raise ``Cancelled`` if ``token`` (or, without one, the ambient token of this thread) was cancelled."""
    token = token if token is not None else current()
    if token is not None:
        token.check()


ProgressFn = Callable[[float, str], None]


def checking(progress: ProgressFn | None, token: CancelToken | None) -> ProgressFn | None:
    """A progress callback that checks ``token`` on every report (and forwards to ``progress``)."""
    if token is None:
        token = current()
    if token is None:
        return progress

    def report(fraction: float, label: str) -> None:
        token.check()
        if progress is not None:
            progress(fraction, label)

    return report
