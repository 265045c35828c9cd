"""Process-level tuning for serving a class: many sessions at once on one server process.

Two Streamlit 1.67 behaviours made 40 cached sessions of one link take 10-25 s together while one alone takes
well under a second; ``install()`` removes both, and starts the idle trimmer of point 3. The server calls it once,
at its start (``deploy/serve.py``); importing ``ui`` changes nothing in Streamlit. Streamlit's internals used here
go through ``ui/streamlit_compat.py``.

1. The post-run garbage collection. Streamlit runs ``gc.collect(2)`` after every script run
   (``runner.postScriptGC``): a full collection over every tracked object, holding the GIL. A class of 40 sessions
   pays it 40 times in a row, each over all 40 sessions' live objects. Two changes:

   - ``gc.freeze()`` after the imports moves the 256,000 objects that torch, plotly, pandas and the app's modules
     leave behind to the permanent generation (a collection over them took about 0.15 s).
   - The app's config turns the post-run collection off (``.streamlit/config.toml``), and the idle thread of point 3
     collects instead, once the server has done some work and no run is in progress, or after
     ``IdleTrimmer.BUSY_COLLECT_CPU_S`` of work while it stays busy. A wave of 40 sessions on one cached Compare
     link then costs the server less CPU per session and draws its last first chart sooner, measured side by side
     with the post-run collection in ``benchmarks/results/class_wave.md``. Python's own generational collections
     run as always.

2. Lock-free reads of Streamlit's config options.

Streamlit 1.67 takes one process-wide ``RLock`` in ``config.get_option`` and ``config.get_options_for_section``.
They are called for every element a script sends (``forward_msg_cache.populate_hash_if_needed``), for every
``st.*`` call (usage metrics) and, on the event-loop thread, for every new session's theme message. With a class
of 40 sessions running at once on 2 cores, the lock became a convoy: a thread holding it is preempted by the GIL
switch, every other thread (the event loop included) queues behind it, and a py-spy profile of 40 cached
Compare sessions put most of the server's samples inside those two functions.

After Streamlit has parsed its config, the options dict is only read, and reading a dict is atomic under the GIL,
so the readers skip the lock. Before the first parse they let Streamlit parse (under its lock), and an unknown key
raises Streamlit's own error. ``install()`` is idempotent.

3. Garbage is collected and freed memory goes back to the system once the server is idle. glibc keeps the pages of
freed blocks (torch's CPU tensors among them) in its heap, so a server's resident memory after a class reflected its
busiest moment, not what it still holds: after each wave of 40 + 20 sessions the load benchmark saw 1.5-2.6 GiB, up and
down with no trend, and 1.7 and 2.6 GiB once it had settled before waves 2 and 3 (with the trimmer: 1.3 and 1.5). A
thread (``IdleTrimmer``) runs a full collection and then ``malloc_trim(0)`` when no script run or job is in progress
and the process has used some CPU since its last pass. ``ATTN_EXPLORER_TRIM=0`` turns the thread off (``core.config``);
the server then relies on Python's own collections.

4. A lower memory peak, on request: ``ATTN_EXPLORER_MALLOC_MMAP_BYTES`` (bytes, 0 to 32 MiB) makes glibc map every
allocation of at least that size on its own and unmap it at free, instead of keeping it in the heap until the next
trim. While a class computes, the server then holds only what is live; each large array costs fresh pages instead.
docs/deploying.md says when to use it.

5. Developer messages from browsers are refused. Any websocket client can send the messages of Streamlit's developer
menu, whatever its toolbar shows: ``clear_cache`` empties every ``st.cache_data`` and ``st.cache_resource`` of the
process for every session (a stranger could make a whole class recompute, again and again), ``set_run_on_save``
reruns scripts on file changes, and ``load_git_info`` sends the repository's remote and branch. ``install()`` wraps
``AppSession.handle_backmsg`` so that these are dropped (with a log line) unless ``ATTN_EXPLORER_DEVELOPER=1``;
the app's config hides the menu that offers them (``client.toolbarMode = "viewer"``). The wrap is in place
before the server accepts its first session.
"""

from __future__ import annotations

import gc
import logging
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from core import config
from ui import streamlit_compat

_log = logging.getLogger(__name__)


def get_option(key: str) -> Any:
    option = streamlit_compat.config_options().get(key)
    if option is None:
        raise RuntimeError(f'Config key "{key}" not defined.')  # Streamlit's own message
    return option.value


def get_options_for_section(section: str) -> dict[str, Any]:
    options = streamlit_compat.config_options()
    return {option.name: option.value for option in list(options.values()) if option.section == section}


_frozen = threading.Event()


def freeze_import_heap() -> int:
    """Move every object tracked so far (the imported modules) out of future collections; once per process.
    Returns how many objects the permanent generation holds."""
    if not _frozen.is_set():
        _frozen.set()
        gc.collect(2)  # free what is already garbage first: frozen garbage would never be freed
        gc.freeze()
    return gc.get_freeze_count()


class IdleTrimmer:
    """Collects garbage and gives freed heap back to the system (``core.profiling.release_free_memory``) when the
    server is idle and has done some work since the last pass; collects garbage alone after a long busy stretch.
    ``step()`` once per poll."""

    POLL_S = 0.5
    WORK_CPU_S = 0.5  # process CPU seconds since the last pass that make another one worth its few milliseconds
    # A server that never goes idle (a class working for an hour) still collects, once per this much CPU: a full
    # collection of a busy server (about 50 ms) is then well under 1 % of its work.
    BUSY_COLLECT_CPU_S = 20.0

    def __init__(
        self,
        busy: Callable[[], bool],
        release: Callable[[], None],
        cpu_seconds: Callable[[], float] = time.process_time,
        collect: Callable[[], object] = gc.collect,
    ) -> None:
        self.busy, self.release, self.cpu_seconds, self.collect = busy, release, cpu_seconds, collect
        self.last_cpu = cpu_seconds()
        self.trims = 0
        self.busy_collections = 0

    def step(self) -> bool:
        """One poll; True when it trimmed (after a collection)."""
        spent = self.cpu_seconds() - self.last_cpu
        if spent < self.WORK_CPU_S:
            return False
        if self.busy():
            if spent >= self.BUSY_COLLECT_CPU_S:
                self.collect()
                self.busy_collections += 1
                self.last_cpu = self.cpu_seconds()
            return False
        self.collect()  # what the collection frees is then trimmed too
        self.release()
        self.trims += 1
        self.last_cpu = self.cpu_seconds()
        return True

    def run_forever(self) -> None:
        while True:
            time.sleep(self.POLL_S)
            try:
                self.step()
            except Exception:  # noqa: BLE001 - memory hygiene must never take the server down
                pass


def server_busy() -> bool:
    """A script run, a scheduled job or work done ahead (service/prefetch.py) is in progress in this process."""
    from service import prefetch, scheduler  # here, not at import: deploy/serve.py imports this before the engine

    return prefetch.runs_in_progress() > 0 or prefetch.working() or scheduler.any_running()


_trimmer: IdleTrimmer | None = None
_mmap_applied = threading.Event()


def start_idle_trimmer() -> IdleTrimmer | None:
    """Start the collecting and trimming thread once per process (not when ``ATTN_EXPLORER_TRIM=0``; without glibc
    it collects and does not trim)."""
    global _trimmer
    from core import profiling

    if _trimmer is None and config.read("trim"):
        _trimmer = IdleTrimmer(server_busy, profiling.release_free_memory)
        threading.Thread(target=_trimmer.run_forever, name="attn-idle-trim", daemon=True).start()
    return _trimmer


MMAP_BYTES_VARIABLE = config.variable("malloc_mmap_bytes")


def apply_mmap_threshold(environ: Mapping[str, str] | None = None) -> str | None:
    """Apply ``ATTN_EXPLORER_MALLOC_MMAP_BYTES`` if set. Returns None when all is well, else why it was not applied
    (the server then runs with glibc's defaults). A value outside its range raises ``core.errors.ConfigError``."""
    from core import profiling

    value = config.read("malloc_mmap_bytes", environ)
    if value is None:
        return None
    if not profiling.set_mmap_threshold(value):
        return f"{MMAP_BYTES_VARIABLE} ignored: this C library has no glibc mallopt"
    return None


DEVELOPER_MESSAGES = frozenset({"clear_cache", "set_run_on_save", "load_git_info"})
DEVELOPER_VARIABLE = config.variable("developer")


def developer_messages_allowed(environ: Mapping[str, str] | None = None) -> bool:
    """``ATTN_EXPLORER_DEVELOPER=1`` (or true/yes/on) lets browsers send the developer menu's messages."""
    return bool(config.read("developer", environ))


def refuse_developer_messages(handle: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """Wrap an ``AppSession.handle_backmsg``: a ``BackMsg`` of a ``DEVELOPER_MESSAGES`` type is dropped, with a
    warning in the server log, unless ``developer_messages_allowed()``; every other message passes unchanged."""
    if getattr(handle, "refuses_developer_messages", False):
        return handle

    def handle_backmsg(session: Any, msg: Any) -> Any:
        kind = msg.WhichOneof("type")
        if kind in DEVELOPER_MESSAGES and not developer_messages_allowed():
            _log.warning("refused a %s message from a browser session (%s=1 allows it)", kind, DEVELOPER_VARIABLE)
            return None
        return handle(session, msg)

    handle_backmsg.refuses_developer_messages = True  # type: ignore[attr-defined]
    handle_backmsg.__doc__ = handle.__doc__
    return handle_backmsg


def install() -> None:
    """Route Streamlit's own config reads (``config.get_option`` / ``get_options_for_section``) to the lock-free
    readers, freeze the import heap, start the idle trimmer, and refuse the developer menu's messages. Process-wide
    and idempotent: the server's start calls it (``deploy/serve.py``), and the tests that need it."""
    # Only over Streamlit's own functions: AppTest swaps in a mock get_option for the length of a run (to set
    # global.appTest), and that mock must stay in charge.
    streamlit_compat.install_config_readers(get_option, get_options_for_section)
    streamlit_compat.wrap_handle_backmsg(refuse_developer_messages)
    freeze_import_heap()
    start_idle_trimmer()
    if not _mmap_applied.is_set():
        _mmap_applied.set()
        problem = apply_mmap_threshold()
        if problem is not None:
            print(f"attention explorer: {problem}", file=sys.stderr, flush=True)
