"""The process-wide scheduler: slots, the fair queue, shared jobs, cancellation by leaving, the watchdog, run_heavy."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from streamlit.runtime.scriptrunner import magic
from streamlit.testing.v1 import AppTest

from core.cancel import Cancelled
from core.errors import ConfigError, ParameterError
from service import result_cache, scheduler
from service.host import usable_cpus
from service.scheduler import Scheduler
from ui import jobs

# A job cancelled by its last session leaving must stop this soon (a closed tab frees its slot within 2 s).
STOP_SECONDS = 2.0


@pytest.fixture(scope="module", autouse=True)
def _no_job_threads_left_after_the_file() -> Iterator[None]:
    """After this file, the process-wide scheduler its tests (and their AppTest pages) made is shut down and its job
    threads joined; the next use makes a new one. An idle job thread keeps the OpenMP team it computed with, so
    libgomp counts more threads than cores and stops spinning at the barriers of every team, the main thread's
    included: the serial part's next timed test paid for it (tests/test_limits.py's oracle regime map at 2 torch
    threads, 0.6 s in a fresh process, took 2.1-2.6 s with one idle thread alive that had run torch on 2 threads;
    0.6 s again once it exited; it missed its 1.4 s estimate)."""
    yield
    sched = scheduler._scheduler
    if sched is not None:
        sched.shutdown()  # cancels what is left and joins the executor's threads
        scheduler._scheduler = None
    alive = [thread.name for thread in threading.enumerate() if thread.name.startswith("attn-job_")]
    assert not alive, f"job threads still alive after tests/test_jobs.py: {alive}"


@pytest.fixture(autouse=True)
def _no_work_left_behind() -> Iterator[None]:
    """Every test here leaves the process-wide scheduler idle and the result cache's writer done. A job still queued or
    running after a test (a blocker never released, a cancelled job that keeps computing) would take a core from the
    tests that run next in the same process: the serial part's timed ones (tests/test_limits.py) assume an idle
    machine. Waits up to ``STOP_SECONDS`` for running jobs to end, then fails the test naming what was left (and
    releases it, so the next test starts clean). The schedulers ``make_scheduler`` builds are shut down, which
    waits for their jobs, before this runs."""
    yield
    sched = scheduler._scheduler  # the process-wide one, where a test (or a page in AppTest) made it
    if sched is not None:
        deadline = time.monotonic() + STOP_SECONDS
        while sched.jobs() and time.monotonic() < deadline:
            time.sleep(0.01)
        left = sched.jobs()
        for job in left:
            for owner in list(job.owners):
                sched.release(job, owner, "the test ended")
        assert not left, f"work left running after the test: {[(job.name, job.key, job.state) for job in left]}"
    result_cache.flush_writes()


@pytest.fixture
def make_scheduler() -> Iterator[Callable[..., Scheduler]]:
    made: list[scheduler.Scheduler] = []

    def make(slots: int = 1, **kwargs: Any) -> scheduler.Scheduler:
        kwargs.setdefault("is_active", lambda session_id: None)
        sched = scheduler.Scheduler(slots, **kwargs)
        made.append(sched)
        return sched

    yield make
    for sched in made:
        sched.shutdown()


def gated(order: list[str], tag: str, gate: threading.Event | None = None) -> Callable[[scheduler.Report], str]:
    """A job that records when it starts, then waits (checking for cancel) until ``gate`` opens."""

    def work(report: scheduler.Report) -> str:
        order.append(tag)
        while gate is not None and not gate.is_set():
            report(0.5, "waiting")
            time.sleep(0.01)
        return tag

    return work


def wait_for(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def test_slots_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTN_EXPLORER_SLOTS", "3")
    assert scheduler.default_slots() == 3
    monkeypatch.setenv("ATTN_EXPLORER_SLOTS", "zero")
    with pytest.raises(ConfigError, match="ATTN_EXPLORER_SLOTS: 'zero' is not allowed; it must be an integer from 1"):
        scheduler.default_slots()
    expected = max(1, torch.cuda.device_count()) if torch.cuda.is_available() else max(1, usable_cpus() // 2)
    monkeypatch.delenv("ATTN_EXPLORER_SLOTS")
    assert scheduler.default_slots() == expected


def test_job_seconds_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTN_EXPLORER_JOB_SECONDS", "7.5")
    assert scheduler.job_seconds() == 7.5
    monkeypatch.setenv("ATTN_EXPLORER_JOB_SECONDS", "-1")
    with pytest.raises(ParameterError, match="ATTN_EXPLORER_JOB_SECONDS"):
        scheduler.job_seconds()


def test_threads_per_job_keep_slots_times_threads_within_cores(
    make_scheduler: Callable[..., Scheduler],
) -> None:
    sched = make_scheduler(1)
    assert sched.threads_per_job == usable_cpus()
    seen: list[int] = []
    job = sched.submit("threads", "threads", lambda report: seen.append(torch.get_num_threads()), "s")
    assert job.done_event.wait(10)
    assert seen == [sched.threads_per_job]
    many = make_scheduler(usable_cpus() * 2)
    assert many.threads_per_job == 1


def test_round_robin_across_sessions(make_scheduler: Callable[..., Scheduler]) -> None:
    sched = make_scheduler(1)
    order: list[str] = []
    gate = threading.Event()
    first = sched.submit("work", "a1", gated(order, "a1", gate), "alice")
    wait_for(lambda: order == ["a1"])
    for tag in ("a2", "a3", "a4"):
        sched.submit("work", tag, gated(order, tag), "alice")
    bob = sched.submit("work", "b1", gated(order, "b1"), "bob")
    carol = sched.submit("work", "c1", gated(order, "c1"), "carol")
    assert [j.key for j in sched.queue_order()] == ["a2", "b1", "c1", "a3", "a4"]
    assert sched.position(bob)[0] == 2 and sched.position(carol)[0] == 3
    gate.set()
    assert first.done_event.wait(10)
    wait_for(lambda: len(order) == 6)
    assert order == ["a1", "a2", "b1", "c1", "a3", "a4"]  # bob and carol did not wait for all of alice's jobs


def test_position_and_estimate(make_scheduler: Callable[..., Scheduler]) -> None:
    sched = make_scheduler(1)
    order: list[str] = []
    gate = threading.Event()
    running = sched.submit("work", "r", gated(order, "r", gate), "s1", estimate=30.0)
    wait_for(lambda: running.state == "running")
    queued = sched.submit("work", "q", gated(order, "q"), "s2", estimate=5.0)
    third = sched.submit("work", "t", gated(order, "t"), "s3", estimate=5.0)
    place, wait = sched.position(queued)
    assert place == 1 and 25 < wait <= 30
    place, wait = sched.position(third)
    assert place == 2 and 30 < wait <= 35
    assert sched.position(running) == (0, 0.0)
    gate.set()
    assert third.done_event.wait(10)


def test_identical_requests_share_one_job(make_scheduler: Callable[..., Scheduler]) -> None:
    sched = make_scheduler(1)
    calls: list[str] = []
    gate = threading.Event()
    first = sched.submit("work", "same", gated(calls, "x", gate), "s1")
    second = sched.submit("work", "same", gated(calls, "x", gate), "s2")
    assert first is second and first.owners == {"s1", "s2"}
    gate.set()
    assert first.done_event.wait(10)
    assert calls == ["x"] and first.result == "x"


def test_one_session_leaving_a_shared_job_does_not_cancel_it(
    make_scheduler: Callable[..., Scheduler],
) -> None:
    sched = make_scheduler(1)
    order: list[str] = []
    gate = threading.Event()
    job = sched.submit("work", "k", gated(order, "k", gate), "s1")
    sched.submit("work", "k", gated(order, "k", gate), "s2")
    wait_for(lambda: job.state == "running")
    sched.release(job, "s1")
    time.sleep(0.1)
    assert job.state == "running" and not job.token.cancelled
    gate.set()
    assert job.done_event.wait(10) and job.state == "done"


def test_last_session_leaving_cancels_a_running_job_quickly(make_scheduler: Callable[..., Scheduler]) -> None:
    sched = make_scheduler(1)
    order: list[str] = []
    job = sched.submit("work", "k", gated(order, "k", threading.Event()), "s1")
    wait_for(lambda: job.state == "running")
    start = time.monotonic()
    sched.release(job, "s1", "the user pressed Cancel")
    assert job.done_event.wait(2)
    assert time.monotonic() - start < 1
    assert job.state == "cancelled" and isinstance(job.error, Cancelled)
    assert "the user pressed Cancel" in str(job.error)


def test_leaving_a_queued_job_removes_it_and_frees_the_line(make_scheduler: Callable[..., Scheduler]) -> None:
    sched = make_scheduler(1)
    order: list[str] = []
    gate = threading.Event()
    sched.submit("work", "a", gated(order, "a", gate), "s1")
    wait_for(lambda: order == ["a"])
    queued = sched.submit("work", "b", gated(order, "b"), "s2")
    later = sched.submit("work", "c", gated(order, "c"), "s3")
    sched.release(queued, "s2")
    assert queued.state == "cancelled" and sched.position(later)[0] == 1
    gate.set()
    assert later.done_event.wait(10)
    assert order == ["a", "c"]  # the abandoned job never ran


def test_watchdog_cancels_jobs_of_closed_sessions(make_scheduler: Callable[..., Scheduler]) -> None:
    open_sessions = {"s1", "s2"}
    sched = make_scheduler(1, is_active=lambda session_id: session_id in open_sessions, watchdog_seconds=0.1)
    order: list[str] = []
    job = sched.submit("work", "k", gated(order, "k", threading.Event()), "s1")
    wait_for(lambda: job.state == "running")
    open_sessions.discard("s1")
    start = time.monotonic()
    assert job.done_event.wait(2)
    assert time.monotonic() - start < 2
    assert job.state == "cancelled" and "tab was closed" in str(job.error)


def test_deadline_stops_a_job_with_the_setting_named(
    make_scheduler: Callable[..., Scheduler], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ATTN_EXPLORER_JOB_SECONDS", "0.3")
    sched = make_scheduler(1)
    job = sched.submit("work", "k", gated([], "k", threading.Event()), "s1")
    assert job.done_event.wait(5)
    assert job.state == "cancelled" and "ATTN_EXPLORER_JOB_SECONDS" in str(job.error)


def test_failures_are_kept_for_the_page(make_scheduler: Callable[..., Scheduler]) -> None:
    sched = make_scheduler(1)

    def broken(report: scheduler.Report) -> None:
        raise ValueError("n: must be at most 4096")

    job = sched.submit("work", "k", broken, "s1")
    assert job.done_event.wait(10)
    assert job.state == "failed" and isinstance(job.error, ValueError)
    ok = sched.submit("work", "k2", lambda report: 1, "s1")  # the slot was freed
    assert ok.done_event.wait(10) and ok.result == 1


def test_finished_jobs_are_stored(make_scheduler: Callable[..., Scheduler]) -> None:
    stored: list[tuple[str, str, Any]] = []
    sched = make_scheduler(1, store=lambda name, key, value: stored.append((name, key, value)))
    job = sched.submit("work", "k", lambda report: {"x": 1}, "s1")
    assert job.done_event.wait(10)
    wait_for(lambda: bool(stored))
    assert stored == [("work", "k", {"x": 1})]


# ------------------------------------------------------------------ run_heavy in a page (AppTest)

PAGE = """
import time
import streamlit as st
import ui
from pathlib import Path

calls = Path({calls!r})
estimate = {estimate!r}
size = st.number_input("size", value=3)


def work(report):
    with calls.open("a") as fh:
        fh.write("x")
    for i in range(3):
        report(i / 3, f"step {{i}}")
        time.sleep(0.05)
    return {{"values": list(range(int(size)))}}


result = ui.run_heavy("test_page_work", (int(size),), work, estimate)
st.write(f"result {{result['values']}}")
"""


@pytest.mark.parametrize("estimate", [0.5, 30.0, None])
def test_run_heavy_in_a_page_computes_once(
    tmp_path: Path, estimate: float | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ATTN_EXPLORER_CACHE_DIR", str(tmp_path / "cache"))
    calls = tmp_path / "calls.txt"
    script = PAGE.format(calls=str(calls), estimate=estimate)
    first = AppTest.from_string(script, default_timeout=60).run()
    assert not first.exception, first.exception
    assert any("result [0, 1, 2]" in m.value for m in first.markdown)
    second = AppTest.from_string(script, default_timeout=60).run()  # another session, same settings
    assert any("result [0, 1, 2]" in m.value for m in second.markdown)
    assert calls.read_text() == "x"  # served from the shared cache
    second.number_input[0].set_value(4).run()
    assert any("result [0, 1, 2, 3]" in m.value for m in second.markdown)
    assert calls.read_text() == "xx"
    assert not second.button  # the Cancel button is gone once the result is there


def test_run_heavy_reports_failures_as_exceptions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTN_EXPLORER_CACHE_DIR", str(tmp_path / "cache"))
    script = """
import streamlit as st
import ui

def work(report):
    raise ValueError("n: must be at most 4096")

try:
    ui.run_heavy("test_page_failure", (1,), work, 30.0)
except ValueError as exc:
    st.error(f"could not run: {exc}")
"""
    at = AppTest.from_string(script, default_timeout=60).run()
    assert not at.exception
    assert [e.value for e in at.error] == ["could not run: n: must be at most 4096"]


def test_a_job_lost_with_its_workers_is_a_message_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ATTN_EXPLORER_CACHE_DIR", str(tmp_path / "cache"))
    script = """
import ui
from service.dask_client import WorkerLost

def work(report):
    raise WorkerLost("the workers computing this died (2 tries); the job was not cached. Try again.")

ui.run_heavy("test_worker_lost", (1,), work, 30.0, title="The sweep")
"""
    at = AppTest.from_string(script, default_timeout=60).run()
    assert not at.exception
    assert [e.value for e in at.error] == [
        "The sweep stopped: the workers computing this died (2 tries); the job was not cached. Try again."
    ]


def test_a_class_opening_one_link_costs_one_computation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTN_EXPLORER_CACHE_DIR", str(tmp_path / "cache"))
    calls = tmp_path / "calls.txt"
    script = PAGE.replace("time.sleep(0.05)", "time.sleep(0.5)").format(calls=str(calls), estimate=30.0)
    outputs: list[list[str]] = []
    # Each AppTest has its own script cache, so six threads parse the page at once. CPython 3.11 keeps the AST
    # constructor's recursion depth per interpreter, not per thread, and concurrent parses can fail with "AST
    # constructor recursion depth mismatch" (cpython gh-106905; it failed once in CI). A served app parses each
    # page once, under Streamlit's script-cache lock; here one lock stands in for that shared cache.
    parse_lock = threading.Lock()
    add_magic = magic.add_magic

    def add_magic_one_at_a_time(code: str, script_path: str) -> Any:
        with parse_lock:
            return add_magic(code, script_path)

    monkeypatch.setattr(magic, "add_magic", add_magic_one_at_a_time)

    def student() -> None:
        at = AppTest.from_string(script, default_timeout=120).run()
        outputs.append([m.value for m in at.markdown] + [str(e.value) for e in at.exception])

    threads = [threading.Thread(target=student) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=180)
    assert len(outputs) == 6
    assert all("result [0, 1, 2]" in out for out in outputs), outputs
    assert calls.read_text() == "x"  # six sessions at once, one computation


def test_light_work_never_waits_behind_heavy_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTN_EXPLORER_CACHE_DIR", str(tmp_path / "cache"))
    sched = scheduler.scheduler()
    gate = threading.Event()
    blockers = [
        sched.submit("blocker", f"blocker-{i}", gated([], "b", gate), f"other-{i}") for i in range(sched.slots + 2)
    ]
    try:
        wait_for(lambda: all(b.state == "running" for b in blockers[: sched.slots]))
        calls = tmp_path / "calls.txt"
        start = time.monotonic()
        at = AppTest.from_string(PAGE.format(calls=str(calls), estimate=0.5), default_timeout=60).run()
        assert time.monotonic() - start < 20
        assert any("result [0, 1, 2]" in m.value for m in at.markdown)
        assert blockers[-1].state == "queued"  # every slot was still taken by the heavy jobs
    finally:
        gate.set()
        for blocker in blockers:
            assert blocker.done_event.wait(10)


def test_compare_at_large_n_runs_through_the_scheduler(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, open_compare
) -> None:
    from service import compute, views

    monkeypatch.setenv("ATTN_EXPLORER_CACHE_DIR", str(tmp_path / "cache"))
    spec = views.InputSpec("clustered", 2048, 64, 4, 16, 0.3, 0)
    assert compute.method_seconds(spec, "performer", {}) > scheduler.LIGHT_SECONDS
    assert compute.method_seconds(views.InputSpec("clustered", 512, 64, 4, 16, 0.3, 0), "performer", {}) < 1
    seen: list[str] = []
    original = scheduler.Scheduler.submit

    def spy(self: scheduler.Scheduler, name: str, *args: Any, **kwargs: Any) -> scheduler.Job:
        seen.append(name)
        return original(self, name, *args, **kwargs)

    monkeypatch.setattr(scheduler.Scheduler, "submit", spy)
    at = open_compare(timeout=300, n="2048", methods="performer", redraws="1")  # one draw: the redraws are jobs too
    assert not at.exception, [e.value for e in at.exception]
    assert seen == ["run_method"]
    assert at.table  # the metrics table was drawn from the job's result


EXIT_SCRIPT = """
import time
from service import scheduler

def forever(report):
    while True:
        report(0.5, "working")
        time.sleep(0.01)

job = scheduler.scheduler().submit("forever", "forever", forever, "session")
while job.state != "running":
    time.sleep(0.01)
print("running", flush=True)
"""


def test_process_exit_does_not_wait_for_running_jobs(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    root = Path(__file__).parent.parent
    env = {**os.environ, "ATTN_EXPLORER_JOB_SECONDS": "600", "ATTN_EXPLORER_CACHE_DIR": str(tmp_path / "c")}
    env["PYTHONPATH"] = str(root)
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", EXIT_SCRIPT], cwd=root, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "running"
    assert time.monotonic() - start < 60  # the job alone would have run for 600 s


def test_time_in_the_queue_does_not_count_against_the_limit(make_scheduler: Callable[..., Scheduler]) -> None:
    sched = make_scheduler(1)
    order: list[str] = []
    gate = threading.Event()
    first = sched.submit("work", "first", gated(order, "first", gate), "s1", deadline=5.0)
    wait_for(lambda: first.state == "running")
    queued = sched.submit("work", "queued", gated(order, "queued"), "s2", deadline=0.3)
    time.sleep(0.5)  # longer than the queued job's own limit
    gate.set()
    assert queued.done_event.wait(10)
    assert queued.state == "done" and order == ["first", "queued"]


def test_robust_pca_parts_run_through_the_scheduler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, open_page) -> None:
    from service import compute, views

    monkeypatch.setenv("ATTN_EXPLORER_CACHE_DIR", str(tmp_path / "cache"))
    params = {"iterations": 60}
    assert compute.method_seconds(views.InputSpec("clustered", 256, 64, 1, 16, 0.3, 0), "rpca", params) > 2
    assert compute.method_seconds(views.InputSpec("clustered", 64, 64, 1, 16, 0.3, 0), "rpca", params) < 2
    seen: list[str] = []
    original = scheduler.Scheduler.submit

    def spy(self: scheduler.Scheduler, name: str, *args: Any, **kwargs: Any) -> scheduler.Job:
        seen.append(name)
        return original(self, name, *args, **kwargs)

    monkeypatch.setattr(scheduler.Scheduler, "submit", spy)
    at = open_page("pages/2_Sparse_plus_low_rank.py", timeout=300, n="256", rpca="1", f4_draws="1")
    assert not at.exception, [e.value for e in at.exception]
    assert seen == ["method_parts"]
    assert any("Parameters from the budget" in c.value for c in at.caption)  # the RPCA views were drawn


# ------------------------------------------------------------------ light work: at most light_slots() at once


def test_light_work_runs_at_most_its_slots_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTN_EXPLORER_LIGHT_SLOTS", "2")
    lock, inside, most = threading.Lock(), [0], [0]

    def work() -> None:
        with scheduler.light_work():
            with lock:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            time.sleep(0.1)
            with lock:
                inside[0] -= 1

    threads = [threading.Thread(target=work) for _ in range(6)]
    start = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert most[0] == 2  # two at a time, never more
    assert time.monotonic() - start >= 0.3  # six 0.1 s pieces in pairs


def test_light_work_inside_light_work_does_not_wait_for_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTN_EXPLORER_LIGHT_SLOTS", "1")
    done = threading.Event()

    def nested() -> None:
        with scheduler.light_work(), scheduler.light_work(), scheduler.light_work():
            pass
        with scheduler.light_work():  # the slot was given back
            done.set()

    thread = threading.Thread(target=nested, daemon=True)
    thread.start()
    thread.join(timeout=5)
    assert done.is_set(), "nested light work deadlocked"


@pytest.mark.parametrize(("raw", "expected"), [("3", 3), ("64", 64), ("", None), (" ", None)])
def test_light_slots_come_from_the_environment_or_the_cores(
    monkeypatch: pytest.MonkeyPatch, raw: str, expected: int | None
) -> None:
    monkeypatch.setenv("ATTN_EXPLORER_LIGHT_SLOTS", raw)
    assert scheduler.light_slots() == (usable_cpus() if expected is None else expected)


@pytest.mark.parametrize("raw", ["0", "junk", "999", "2.5"])
def test_a_bad_light_slot_count_is_refused_with_its_range(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv("ATTN_EXPLORER_LIGHT_SLOTS", raw)
    with pytest.raises(ConfigError, match=f"ATTN_EXPLORER_LIGHT_SLOTS: '{raw}' is not allowed.*from 1 to 64"):
        scheduler.light_slots()


def test_the_page_token_stops_engine_loops_once_the_page_run_is_told_to_stop(monkeypatch: pytest.MonkeyPatch) -> None:
    # A closed tab makes Streamlit ask the session's script run to stop; work computed in the page thread (an
    # st.cache_data call, a light job) checks the page token through core.cancel's fallback and stops too.
    from types import SimpleNamespace

    from streamlit.runtime.scriptrunner_utils import script_run_context
    from streamlit.runtime.scriptrunner_utils.script_requests import ScriptRequests

    import core
    from core import cancel

    ctx = SimpleNamespace(script_requests=ScriptRequests())
    monkeypatch.setattr(script_run_context, "get_script_run_ctx", lambda suppress_warning=False: ctx)
    x = core.data.clustered(n=64, d=8, clusters=4, spread=0.3, seed=0)
    core.approximate("performer", x.q, x.k, x.v)  # runs while the page run goes on
    assert jobs.page_token() is jobs.page_token()  # one token per script runner
    ctx.script_requests.request_stop()
    with pytest.raises(Cancelled, match="the page run was stopped"):
        cancel.check()
    with pytest.raises(Cancelled):
        core.sweeps.error_vs_entropy(x.q, x.k, x.v, ["performer"], taus=[1.0])
    child = cancel.CancelToken(deadline=60, parent=jobs.page_token())  # run_heavy's light path
    assert child.cancelled
