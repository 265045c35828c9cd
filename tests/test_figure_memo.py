"""ui/figure_memo.py: a figure is shared only between equal arguments (arrays by their bytes, dtype and shape), and
its JSON is the figure's own."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import numpy as np
import plotly.graph_objects as go
import pytest

from ui import figure_memo
from ui.figures import compare as figs
from ui.figures import presenter_figure


@pytest.fixture(autouse=True)
def empty_memo() -> None:
    figure_memo.clear()


def maps(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.random((16, 16), dtype=np.float32), rng.standard_normal((16, 16)).astype(np.float32)


def figure(attention: np.ndarray, error: np.ndarray, **changes: Any) -> go.Figure:
    args = {"label": "Performer", "factor": 1, "log_colour": False, "error_title": "head 0", "zmax": None, **changes}
    return figure_memo.shared(
        figs.method_figure,
        args["label"],
        attention,
        error,
        args["factor"],
        args["log_colour"],
        args["error_title"],
        args["zmax"],
    )


def test_equal_arguments_share_one_figure_built_once(monkeypatch: pytest.MonkeyPatch) -> None:
    attention, error = maps()
    built: list[str] = []
    original = figs.method_figure

    def counting(*args: Any) -> go.Figure:
        built.append(args[0])
        return original(*args)

    counting.__qualname__ = original.__qualname__
    first = figure_memo.shared(counting, "Performer", attention, error, 1, False, "t", None)
    second = figure_memo.shared(counting, "Performer", attention.copy(), error.copy(), 1, False, "t", None)
    assert second is first and built == ["Performer"]


@pytest.mark.parametrize(
    "change",
    [
        "one value",
        "dtype",
        "shape",
        "label",
        "factor",
        "log colour",
        "zmax",
    ],
)
def test_any_different_argument_builds_its_own_figure(change: str) -> None:
    attention, error = maps()
    base = figure(attention, error)
    if change == "one value":
        changed = attention.copy()
        changed[3, 4] += 1e-3
        other = figure(changed, error)
    elif change == "dtype":
        other = figure(attention.astype(np.float64), error)
    elif change == "shape":
        other = figure(attention.reshape(8, 32), error.reshape(8, 32))
    elif change == "label":
        other = figure(attention, error, label="Nyström")
    elif change == "factor":
        other = figure(attention, error, factor=2)
    elif change == "log colour":
        other = figure(attention, error, log_colour=True)
    else:
        other = figure(attention, error, zmax=0.5)
    assert other is not base
    if change != "dtype":  # the builder draws float32 and float64 maps alike; the key still tells them apart
        assert figure_memo.figure_json(other) != figure_memo.figure_json(base)


def test_the_json_is_the_figures_own_and_made_once(monkeypatch: pytest.MonkeyPatch) -> None:
    attention, error = maps()
    expected = figs.method_figure("Performer", attention, error, 1, False, "head 0").to_json()
    calls: list[int] = []
    original = go.Figure.to_json

    def counting(self: go.Figure, *args: Any, **kwargs: Any) -> str:
        calls.append(1)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(go.Figure, "to_json", counting)
    fig = figure(attention, error)
    assert figure_memo.figure_json(fig) == expected
    assert figure_memo.figure_json(figure(attention.copy(), error.copy())) == expected
    assert len(calls) == 1
    assert json.loads(expected)["data"][0]["type"] == "heatmap"


def test_a_copy_or_an_unshared_figure_is_serialised_each_time() -> None:
    attention, error = maps()
    shared = figure(attention, error)
    big = presenter_figure(shared)  # the presenter view enlarges a copy
    assert figure_memo.figure_json(big) == big.to_json() != figure_memo.figure_json(shared)
    plain = figs.method_figure("Performer", attention, error, 1, False, "head 0")
    assert figure_memo.figure_json(plain) == plain.to_json()


def test_an_argument_of_another_kind_is_not_shared() -> None:
    class Opaque:
        pass

    built: list[int] = []

    def build(_: Any) -> go.Figure:
        built.append(1)
        return go.Figure()

    first, second = figure_memo.shared(build, Opaque()), figure_memo.shared(build, Opaque())
    assert first is not second and len(built) == 2


def test_sessions_that_miss_at_once_wait_for_one_build() -> None:
    """A class's first visit reaches its figures together, when the shared computation ends: one builds them."""
    attention, error = maps()
    built: list[int] = []
    start = threading.Barrier(8)

    def slow(label: str, a: np.ndarray, e: np.ndarray) -> go.Figure:
        built.append(1)
        time.sleep(0.2)
        return figs.method_figure(label, a, e, 1, False)

    found: list[go.Figure] = []

    def session() -> None:
        start.wait()
        fig = figure_memo.shared(slow, "Performer", attention.copy(), error.copy())
        found.append(fig)
        figure_memo.figure_json(fig)

    threads = [threading.Thread(target=session) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(found) == 8 and all(fig is found[0] for fig in found)
    assert len(built) == 1
