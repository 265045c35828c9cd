"""ui.serving.IdleTrimmer: garbage is collected and freed heap goes back to the system when the server is idle after
some work; Streamlit's collection after every script run is off in the app's config."""

from __future__ import annotations

import sys
from pathlib import Path

import ci_env
import pytest

from ui import serving


class Clock:
    def __init__(self) -> None:
        self.cpu = 0.0

    def __call__(self) -> float:
        return self.cpu


def test_trims_once_after_work_and_only_when_idle() -> None:
    clock, released, busy, collected = Clock(), [], [False], []
    trimmer = serving.IdleTrimmer(
        lambda: busy[0], lambda: released.append(clock.cpu), clock, lambda: collected.append(len(released))
    )
    assert not trimmer.step()  # nothing done since it started
    clock.cpu = 2.0
    busy[0] = True
    assert not trimmer.step() and collected == []  # a run in progress: wait
    busy[0] = False
    assert trimmer.step() and released == [2.0]
    assert collected == [0]  # collected first, so what the collection frees is trimmed too
    assert not trimmer.step()  # no new work since: no second trim
    clock.cpu += serving.IdleTrimmer.WORK_CPU_S / 2
    assert not trimmer.step()
    clock.cpu += serving.IdleTrimmer.WORK_CPU_S
    assert trimmer.step() and trimmer.trims == 2 and len(collected) == 2


def test_a_server_that_stays_busy_still_collects_after_a_long_stretch_of_work() -> None:
    clock, released, collected = Clock(), [], []
    trimmer = serving.IdleTrimmer(lambda: True, lambda: released.append(clock.cpu), clock, lambda: collected.append(1))
    clock.cpu = serving.IdleTrimmer.BUSY_COLLECT_CPU_S / 2
    assert not trimmer.step() and collected == []  # busy, and not long enough: the class is not held up
    clock.cpu = serving.IdleTrimmer.BUSY_COLLECT_CPU_S * 1.5
    assert not trimmer.step()
    assert collected == [1] and trimmer.busy_collections == 1 and released == []  # collected, never trimmed busy
    assert not trimmer.step() and collected == [1]  # the count starts again from there


def test_a_pass_frees_cyclic_garbage_that_no_run_collected() -> None:
    """With the post-run collection off, objects in a reference cycle wait for the idle pass (or Python's own
    collection, kept off here so that only the pass can free them)."""
    import gc
    import weakref

    class Node:
        pass

    clock = Clock()
    trimmer = serving.IdleTrimmer(lambda: False, lambda: None, clock)
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        node = Node()
        node.self = node  # type: ignore[attr-defined]
        alive = weakref.ref(node)
        del node
        assert alive() is not None  # a cycle: reference counting alone never frees it
        clock.cpu = 1.0
        assert trimmer.step()
        assert alive() is None
    finally:
        if was_enabled:
            gc.enable()


def test_the_apps_config_turns_off_streamlits_collection_after_every_run() -> None:
    """Streamlit reads the option from the repo's .streamlit/config.toml as the servers do (a misspelt key would be
    ignored with a warning and leave the collection on)."""
    import subprocess

    code = (
        "import streamlit.config as c; c.get_config_options(force_reparse=True);"
        " print(c.get_option('runner.postScriptGC'))"
    )
    repo = Path(__file__).resolve().parent.parent
    result = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "False", result.stdout + result.stderr


def test_the_server_is_busy_while_a_script_runs() -> None:
    import threading

    assert not serving.server_busy()
    stop = threading.Event()
    runner = threading.Thread(target=stop.wait, name="ScriptRunner.scriptThread")
    runner.start()
    try:
        assert serving.server_busy()
    finally:
        stop.set()
        runner.join()


def test_a_trim_returns_freed_heap_to_the_system() -> None:
    """What the trimmer relies on: heap blocks freed between live ones stay resident until malloc_trim."""
    ci_env.require(sys.platform == "linux", "glibc's malloc_trim: the app's hosts are Debian")
    import psutil

    from core import profiling

    assert profiling.can_release_free_memory()
    process = psutil.Process()
    profiling.release_free_memory()  # start from a trimmed heap: the blocks below then take fresh pages
    blocks = [b"\x01" * 65536 for _ in range(4000)]  # 64 KiB each: from the heap, below glibc's mmap threshold
    kept = blocks[::16]  # live blocks between the freed ones keep the heap from shrinking by itself
    del blocks
    before = process.memory_info().rss
    profiling.release_free_memory()
    after = process.memory_info().rss
    assert len(kept) == 250
    assert before - after > 150 * 2**20, (before / 2**20, after / 2**20)


def test_the_trimmer_starts_once_when_enabled(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from core import profiling

    monkeypatch.setattr(profiling, "can_release_free_memory", lambda: True)  # glibc or not
    ran = threading.Event()
    monkeypatch.setattr(serving.IdleTrimmer, "run_forever", lambda self: ran.set())  # no endless thread in tests
    monkeypatch.setattr(serving, "_trimmer", None)
    monkeypatch.setenv("ATTN_EXPLORER_TRIM", "0")
    assert serving.start_idle_trimmer() is None and not ran.wait(0.2)
    monkeypatch.setenv("ATTN_EXPLORER_TRIM", "1")
    first = serving.start_idle_trimmer()
    assert first is not None and ran.wait(5)
    assert serving.start_idle_trimmer() is first
