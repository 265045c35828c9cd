"""What every benchmark shares: the app server as the README starts it, a baseline worktree of a git ref, the headless
Debian Chromium, engine timings through ``torch.utils.benchmark``, the machine's facts, and writing results (a
printed table, Markdown and JSON, optionally CSV, in ``benchmarks/results/``).

Nothing here imports Streamlit or torch at import time: the browser tests import the Chromium settings from here.
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

from deploy import processes

if TYPE_CHECKING:
    from playwright.sync_api import Page
    from torch.utils.benchmark import Measurement

ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = ROOT / "benchmarks" / "results"

# ------------------------------------------------------------------ the app server


@dataclass
class Server:
    """A running app: its base URL, process, log, and the result-cache folder it was given."""

    url: str
    process: subprocess.Popen[bytes]
    log_path: Path
    cache_dir: Path

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no server log)"


@contextmanager
def app_server(root: Path, *, start_timeout_s: float = 90.0, env: dict[str, str] | None = None) -> Iterator[Server]:
    """The README's app command from ``root`` on a free port, with an empty result-cache folder; stopped on exit.
    ``env``: extra environment variables for the server (e.g. ``{"ATTN_EXPLORER_WARMUP": "1"}``)."""
    scratch = Path(tempfile.mkdtemp(prefix="bench-server-"))
    cache_dir = scratch / "results"  # not created here: its existence says the app has a shared cache
    env = dict(os.environ, **(env or {}), ATTN_EXPLORER_CACHE_DIR=str(cache_dir))
    try:
        with processes.app_server(root, env=env, timeout_s=start_timeout_s) as app:
            yield Server(url=app.url, process=app.process, log_path=app.log_path, cache_dir=cache_dir)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _process_tree(pid: int) -> list[psutil.Process]:
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def server_rss(server: Server) -> int:
    """Resident memory of the server's whole process tree, in bytes."""
    total = 0
    for proc in _process_tree(server.process.pid):
        try:
            total += proc.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total


def server_cpu_seconds(server: Server) -> float:
    """User plus system CPU time of the server's whole process tree."""
    return tree_cpu_seconds([server.process.pid])


def tree_cpu_seconds(pids: list[int]) -> float:
    """User plus system CPU time of the process trees rooted at ``pids`` (processes that have gone count nothing)."""
    total = 0.0
    for pid in pids:
        for proc in _process_tree(pid):
            try:
                times = proc.cpu_times()
                total += times.user + times.system
            except psutil.NoSuchProcess:
                pass
    return total


def wait_quiet(server: Server, limit_s: float, *, busy_below: float = 0.15, window_s: float = 1.0) -> float:
    """Wait until the server uses under ``busy_below`` of one core over ``window_s``; return the seconds waited."""
    start = time.monotonic()
    while time.monotonic() - start < limit_s:
        before = server_cpu_seconds(server)
        time.sleep(window_s)
        if (server_cpu_seconds(server) - before) / window_s < busy_below:
            break
    return time.monotonic() - start


# ------------------------------------------------------------------ git


def commit(root: Path) -> str | None:
    """The short commit hash checked out at ``root``, or None outside git."""
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


@contextmanager
def baseline_tree(ref: str) -> Iterator[Path]:
    """A temporary detached ``git worktree`` of ``ref``, removed on exit."""
    path = Path(tempfile.mkdtemp(prefix="bench-baseline-"))
    subprocess.run(["git", "worktree", "add", "--detach", str(path), ref], cwd=ROOT, check=True, capture_output=True)
    try:
        yield path
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=ROOT, capture_output=True)
        shutil.rmtree(path, ignore_errors=True)


@contextmanager
def trees(baseline: str | None) -> Iterator[dict[str, Path]]:
    """The trees a side-by-side benchmark measures, by label: ``baseline``'s worktree first when given, then this
    tree ("this tree")."""
    with contextlib.ExitStack() as stack:
        found = {"this tree": ROOT}
        if baseline:
            found = {baseline: stack.enter_context(baseline_tree(baseline)), **found}
        yield found


# ------------------------------------------------------------------ pages


def page_paths() -> dict[str, str]:
    """Label -> URL path of every page but Home, in the app's order (ui/page_registry.py)."""
    from ui.page_registry import PAGES

    return {page.label: page.url_path for page in PAGES}


# ------------------------------------------------------------------ the browser

CHROMIUM = Path(os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium"))  # Debian's chromium
CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
VIEWPORT = {"width": 1400, "height": 1000}


def chromium_options() -> dict[str, Any]:
    """Keyword arguments of Playwright's ``chromium.launch`` (sync or async API) for the system Chromium."""
    return {"executable_path": str(CHROMIUM), "args": list(CHROMIUM_ARGS)}


def on_script_finished(page: Page, callback: Callable[[str], None]) -> None:
    """Call ``callback(status)`` whenever the page receives Streamlit's ``script_finished`` message (the end of a
    run); ``status`` is its name, e.g. FINISHED_SUCCESSFULLY or FINISHED_FRAGMENT_RUN_SUCCESSFULLY."""
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    def on_frame(payload: Any) -> None:
        if not isinstance(payload, bytes | bytearray):
            return
        message = ForwardMsg()
        try:
            message.ParseFromString(bytes(payload))
        except Exception:  # noqa: BLE001 - not a ForwardMsg (e.g. a ping)
            return
        if message.WhichOneof("type") == "script_finished":
            callback(ForwardMsg.ScriptFinishedStatus.Name(message.script_finished))

    page.on("websocket", lambda ws: ws.on("framereceived", on_frame))


# ------------------------------------------------------------------ engine timings

MIN_RUN_TIME_S = 0.2  # blocked_autorange's own default: enough blocks of a fast call for a steady median
# From this long a call, blocked_autorange's own block-size search settles on blocks of one call (timer overhead under
# 1e-4 of the call); the blocks are then timed here, without the search's extra call.
ONE_CALL_BLOCKS_S = 0.05


def _clocked(call: Callable[[], Any], clock: Callable[[], float]) -> float:
    start = clock()
    call()
    return clock() - start


def time_engine(
    call: Callable[[], Any],
    *,
    repeats: int = 5,
    label: str = "",
    sub_label: str = "",
    description: str = "",
    threads: int | None = None,
    clock: Callable[[], float] | None = None,
    budget_s: float = math.inf,
    warm_up_counts_from_s: float = math.inf,
) -> Measurement:
    """Seconds per call of ``call`` as a ``torch.utils.benchmark`` Measurement: one call to warm up and size the run,
    then blocks for about ``repeats`` times that call's length, at least ``MIN_RUN_TIME_S`` and at most about
    ``budget_s`` (at least one block: a call longer than the budget is timed once after its warm-up). The returned
    Measurement's ``.median`` is the figure; ``.times`` holds the seconds per call of each block.

    ``warm_up_counts_from_s``: a warm-up call at least this long is one of the timed calls too (its first-call setup
    is a small part of it, and a second untimed call of many seconds would only lengthen the run).

    A call shorter than ``ONE_CALL_BLOCKS_S`` goes through ``Timer.blocked_autorange``, which sizes its blocks; a
    longer one is timed in blocks of one call, the size blocked_autorange would pick, without its search's call.
    (``Timer.timeit`` is not used for the warm-up: it makes two more untimed calls first.)

    ``threads``: torch threads while timing (default: the current count; the Timer's own default is one).
    ``clock``: another clock than wall time, e.g. ``time.process_time``. The labels feed ``Compare`` tables."""
    import torch
    from torch.utils import benchmark
    from torch.utils.benchmark.utils import common
    from torch.utils.benchmark.utils.timer import timer as wall_clock  # synchronises CUDA where there is one

    threads = threads or torch.get_num_threads()
    clock = clock or wall_clock
    with common.set_torch_threads(threads):
        warm = _clocked(call, clock)  # first-call setup (allocator, feature draws) stays out of the figure
    min_run_time = max(MIN_RUN_TIME_S, min(max(repeats, 1) * warm, budget_s))
    if warm < ONE_CALL_BLOCKS_S:
        timer = benchmark.Timer(stmt="call()", globals={"call": call}, label=label, sub_label=sub_label,
                                description=description, num_threads=threads, timer=clock)  # fmt: skip
        return timer.blocked_autorange(min_run_time=min_run_time)
    times: list[float] = [warm] if warm >= warm_up_counts_from_s else []
    with common.set_torch_threads(threads):
        while sum(times) < min_run_time:
            times.append(_clocked(call, clock))
    task = common.TaskSpec(stmt="call()", setup="pass", label=label, sub_label=sub_label, description=description,
                           num_threads=threads)  # fmt: skip
    return common.Measurement(number_per_run=1, raw_times=times, task_spec=task)


def time_engine_two_clocks(
    call: Callable[[], Any], *, repeats: int = 5, label: str = "", sub_label: str = ""
) -> tuple[Any, Any]:
    """``time_engine`` on the wall clock and on process CPU time: (wall, cpu) Measurements. A call of
    ``ONE_CALL_BLOCKS_S`` or more is timed once on both clocks (the same calls); a shorter one, whose blocks the
    Timer sizes per clock, is timed once per clock."""
    import torch
    from torch.utils.benchmark.utils import common
    from torch.utils.benchmark.utils.timer import timer as wall_clock

    threads = torch.get_num_threads()
    with common.set_torch_threads(threads):
        warm = _clocked(call, wall_clock)
    if warm < ONE_CALL_BLOCKS_S:
        return (
            time_engine(call, repeats=repeats, label=label, sub_label=sub_label),
            time_engine(call, repeats=repeats, label=label, sub_label=sub_label, clock=time.process_time),
        )
    min_run_time = max(MIN_RUN_TIME_S, max(repeats, 1) * warm)
    walls: list[float] = []
    cpus: list[float] = []
    with common.set_torch_threads(threads):
        while sum(walls) < min_run_time:
            wall_start, cpu_start = wall_clock(), time.process_time()
            call()
            walls.append(wall_clock() - wall_start)
            cpus.append(time.process_time() - cpu_start)
    task = common.TaskSpec(stmt="call()", setup="pass", label=label, sub_label=sub_label, num_threads=threads)
    return (
        common.Measurement(number_per_run=1, raw_times=walls, task_spec=task),
        common.Measurement(number_per_run=1, raw_times=cpus, task_spec=task),
    )


def time_once(call: Callable[[], Any], *, threads: int | None = None) -> float:
    """Seconds of a single call, cold (no warm-up): work that is run once. (Not ``Timer.timeit``, which makes two
    untimed calls before the one it times.)"""
    import torch
    from torch.utils.benchmark.utils import common
    from torch.utils.benchmark.utils.timer import timer as wall_clock

    with common.set_torch_threads(threads or torch.get_num_threads()):
        return _clocked(call, wall_clock)


def compare_table(measurements: Sequence[Measurement]) -> str:
    """``torch.utils.benchmark.Compare``'s table of ``measurements`` (rows: sub_label, columns: description)."""
    from torch.utils import benchmark

    compare = benchmark.Compare(list(measurements))
    compare.trim_significant_figures()
    return str(compare)


# ------------------------------------------------------------------ fresh processes


def in_fresh_process(target: str, argument: Any, *, timeout_s: float, preload: Sequence[str] = ()) -> Any:
    """``module:function``'s result on ``argument``, computed in a process of its own: forked from a server that
    imported ``preload`` once (``multiprocessing``'s forkserver) and that never ran a computation, so each call
    starts with the same clean state (no torch thread pool, no allocator history, its own peak-memory counter)
    without paying a Python start and a torch import each time. The function runs by name, so a module run as
    ``__main__`` can name its own functions. Returns ``{"status": "failed: ..."}`` when the call raises, dies or
    runs past ``timeout_s`` (it is then killed)."""
    import multiprocessing

    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(preload))  # takes effect when the server starts: the first call
    receiving, sending = context.Pipe(duplex=False)
    process = context.Process(target=_call_by_name, args=(target, argument, sending), daemon=True)
    with parents_main_hidden():
        process.start()
    sending.close()
    try:
        if not receiving.poll(timeout_s):
            process.kill()
            return {"status": f"failed: timed out after {timeout_s:g} s"}
        try:
            return receiving.recv()
        except EOFError:  # it died without an answer (a signal, the OOM killer)
            process.join()
            return {"status": f"failed: the process ended with code {process.exitcode} and no result"}
    finally:
        process.join()
        receiving.close()


@contextmanager
def parents_main_hidden() -> Iterator[None]:
    """``multiprocessing`` makes a child run the parent's ``__main__`` again before its target. Children whose
    targets are named by module (here and in ``benchmarks.gpu``) never need it, so they start inside this: running it
    can fail (after Streamlit's AppTest, ``__main__`` is the app's page script, which raises outside a Streamlit run,
    and the child ends with code 1 and no result) or repeat work (``python -m benchmarks.gpu`` imported itself
    again in every step)."""
    main = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = main


def _call_by_name(target: str, argument: Any, sending: Any) -> None:
    import importlib

    module, name = target.split(":")
    try:
        result = getattr(importlib.import_module(module), name)(argument)
    except Exception as exc:  # noqa: BLE001 - reported as the point's status, as a failed subprocess was
        result = {"status": f"failed: {type(exc).__name__}: {exc}"[:208]}
    sending.send(result)
    sending.close()


# ------------------------------------------------------------------ machine facts and results


def machine_facts(load_start: Sequence[float] | None = None) -> dict[str, Any]:
    """The machine a benchmark ran on, with the load average at its start (when given) and now."""
    facts: dict[str, Any] = {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
    }
    if load_start is not None:
        facts["load_average_at_start"] = [round(x, 2) for x in load_start]
    facts["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    return facts


def finite(value: Any) -> Any:
    """JSON has no NaN or infinity: such numbers are written as null (a visit with no chart, a missing ratio)."""
    if isinstance(value, dict):
        return {str(k): finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return None if isinstance(value, float) and not math.isfinite(value) else value


def write_results(
    out: Path,
    name: str,
    result: dict[str, Any],
    markdown: str,
    *,
    csv_rows: tuple[Sequence[str], Sequence[dict[str, Any]]] | None = None,
) -> dict[str, Path]:
    """Print ``markdown`` and write ``<name>.json`` (``result``), ``<name>.md`` and, given ``csv_rows`` as
    (field names, rows), ``<name>.csv`` under ``out``; returns the paths by suffix."""
    print()
    print(markdown)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / f"{name}.json", "md": out / f"{name}.md"}
    paths["json"].write_text(json.dumps(finite(result), indent=2, default=str) + "\n")
    paths["md"].write_text(markdown)
    if csv_rows is not None:
        fields, rows = csv_rows
        paths["csv"] = out / f"{name}.csv"
        with open(paths["csv"], "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(fields), extrasaction="ignore")
            writer.writeheader()
            writer.writerows(rows)
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    return paths
