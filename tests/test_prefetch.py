"""Work done ahead (service/prefetch.py): Compare's methods at the neighbouring temperatures land in the shared cache
with the numbers the page would compute, the next slider step is served from there, and nothing is done ahead when
it is turned off or while script runs are in progress."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from service import compute, prefetch, views
from service.views import MethodRun
from ui.fields import TAU_OPTIONS


@pytest.fixture(autouse=True)
def prefetch_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTN_EXPLORER_PREFETCH", "1")  # tests/conftest.py turns it off for every other test


def test_neighbours_are_one_grid_step_either_side() -> None:
    grid = [0.1, 0.15, 0.2, 0.3]
    assert prefetch.neighbours(0.2, grid) == [0.15, 0.3]
    assert prefetch.neighbours(0.1, grid) == [0.15]
    assert prefetch.neighbours(0.3, grid) == [0.2]
    assert prefetch.neighbours(0.25, grid) == []  # off the grid: nothing to guess


def spec(seed: int) -> views.InputSpec:
    return views.InputSpec(source="clustered", n=64, d=16, heads=2, clusters=4, spread=0.3, seed=seed)


def test_the_next_slider_step_is_served_from_what_was_done_ahead(monkeypatch: pytest.MonkeyPatch, open_compare) -> None:
    at = open_compare(n="128", seed="97", methods=["performer", "nystrom"])
    assert not at.exception, [e.value for e in at.exception]
    assert prefetch.wait_idle(120), "the work done ahead did not finish"
    tau = at.select_slider(key="tau").value
    following = prefetch.neighbours(tau, TAU_OPTIONS)[-1]

    def not_again(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("computed again: the neighbouring temperature was not done ahead")

    monkeypatch.setattr(compute, "run_method_now", not_again)
    at.select_slider(key="tau").set_value(following).run()
    assert not at.exception, [e.value for e in at.exception]
    shown = {m.label: m.value for m in at.metric}
    assert len(shown) == 2, shown


def test_work_done_ahead_equals_the_pages_own_computation() -> None:
    s, beta, params = spec(91), 1 / 0.3, (("features", 16),)
    assert prefetch.compare_neighbours([MethodRun(s, 1 / 0.2, "cpu", "performer", params, 0)], 0.2, TAU_OPTIONS) == 2
    assert prefetch.wait_idle(120)
    ahead = views.lookup(MethodRun(s, beta, "cpu", "performer", params, 0))
    assert ahead is not None
    own = compute.run_method_now(MethodRun(s, beta, "cpu", "performer", params, 0))
    np.testing.assert_array_equal(ahead.attention, own.attention)
    np.testing.assert_array_equal(ahead.metrics["attention_error"], own.metrics["attention_error"])


def test_nothing_is_done_ahead_when_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTN_EXPLORER_PREFETCH", "0")
    run = MethodRun(spec(92), 1 / 0.2, "cpu", "performer", (("features", 16),), 0)
    assert prefetch.compare_neighbours([run], 0.2, TAU_OPTIONS) == 0
    assert views.lookup(run.replace(beta=1 / 0.3)) is None


def test_work_waits_while_a_script_run_is_in_progress(monkeypatch: pytest.MonkeyPatch) -> None:
    """A thread named like Streamlit's script thread stands for a run in progress: nothing is computed until it
    ends, and a task that waits longer than IDLE_WAIT_S is dropped."""
    monkeypatch.setattr(prefetch, "IDLE_WAIT_S", 0.5)
    release = threading.Event()
    busy = threading.Thread(target=release.wait, name="ScriptRunner.scriptThread", daemon=True)
    busy.start()
    try:
        s, params = spec(93), (("features", 16),)
        assert (
            prefetch.compare_neighbours([MethodRun(s, 1 / 0.2, "cpu", "performer", params, 0)], 0.2, TAU_OPTIONS) == 2
        )
        assert prefetch.wait_idle(30)
        for tau in (0.15, 0.3):
            assert views.lookup(MethodRun(s, 1 / tau, "cpu", "performer", params, 0)) is None
    finally:
        release.set()
        busy.join()
