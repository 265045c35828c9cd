"""The Scaling page renders, measures tiny sizes live with a progress bar, stops at its limits and shows committed
results labelled with their device (Streamlit AppTest, no browser)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent
PAGE = "pages/8_Scaling.py"
TIMEOUT = 180


@pytest.fixture
def open_scaling(open_page: Callable[..., AppTest]) -> Callable[..., AppTest]:
    def open_with(methods: list[str] | None = None, sizes: tuple[int, int] | None = None, **query: str) -> AppTest:
        at = open_page(PAGE, timeout=TIMEOUT, **query)
        assert not at.exception, [e.value for e in at.exception]
        if methods is not None:
            at.multiselect(key="methods").set_value(methods).run()
        if sizes is not None:
            at.select_slider(key="sizes").set_value(sizes).run()
        assert not at.exception, [e.value for e in at.exception]
        return at

    return open_with


def measure(at: AppTest) -> AppTest:
    next(b for b in at.button if b.label == "Measure").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def chart_traces(at: AppTest, index: int) -> dict[str, Any]:
    spec = json.loads(at.get("plotly_chart")[index].proto.spec)
    return {trace.get("name"): trace for trace in spec["data"]}


def test_page_waits_for_measure_then_measures_tiny_sizes(open_scaling) -> None:
    at = open_scaling(methods=["performer", "local"], sizes=(64, 256))
    assert at.title[0].value.endswith("Scaling")
    # Before the button: the page opens on the committed table of this kind of device, nothing measured here.
    # One committed table alone: the caption names it (device and threads), its curves are named by method only.
    opened = set(chart_traces(at, 0))
    assert {"Performer (FAVOR+)", "Local window", "Exact softmax (torch SDPA)"} == {
        name.split(" (slope")[0] for name in opened
    }, opened
    assert any("Showing the committed benchmark table (cpu: " in c.value for c in at.caption)
    assert any("Press **Measure**" in c.value or "press **Measure**" in c.value for c in at.caption)
    measure(at)
    charts = at.get("plotly_chart")
    assert len(charts) == 2  # time and memory
    names = set(chart_traces(at, 0))
    assert any("[cpu: " in name for name in names), names  # beside a measurement, a committed curve names its table
    assert any(name.startswith("Performer (FAVOR+) (slope") for name in names), names
    assert any(name.startswith("Exact softmax (slope") for name in names), names
    assert any("FLOPs at GEMM rate" in name for name in names)
    assert any(name.endswith("model") for name in chart_traces(at, 1))
    assert [s.value for s in at.success], "all sizes fit in the default limits"
    table = at.dataframe[0].value
    assert set(table["method"]) == {"Performer (FAVOR+)", "Local window", "Exact softmax"}
    assert (table["largest n"] == 256).all()


def test_tight_memory_limit_stops_and_says_where(open_scaling) -> None:
    at = open_scaling(methods=["performer"], sizes=(64, 65536), exact="false", memory_mib="128")
    measure(at)
    warnings = [w.value for w in at.warning]
    assert warnings and "stopped at n =" in warnings[0] and "MiB" in warnings[0], warnings


def test_committed_results_are_labelled_with_their_device(tmp_path: Path, open_scaling) -> None:
    results = sorted((ROOT / "benchmarks" / "results").glob("scaling_*.json"))
    at = open_scaling()
    options = at.multiselect(key="committed").options
    assert len(options) == len(results)
    if results:  # the committed tables (CPU; GPU when measured) can be overlaid without measuring
        payload = json.loads(results[0].read_text())
        label = next(o for o in options if o.startswith(payload["machine"]["device"] + ":"))
        at.multiselect(key="committed").set_value([label]).run()
        assert not at.exception
        # The table alone: the caption names its device, and every curve is named by its method.
        assert any(f"Showing the committed benchmark table ({label})" in c.value for c in at.caption)
        names = set(chart_traces(at, 0))
        assert names and not any(payload["machine"]["device"] + ":" in name for name in names), names
        if len(options) > 1:  # two tables: each curve names its table
            at.multiselect(key="committed").set_value(options[:2]).run()
            names = set(chart_traces(at, 0))
            assert all("[" in name for name in names), names


def test_a_measurement_in_the_shared_cache_opens_in_a_new_session(open_scaling) -> None:
    measure(open_scaling(methods=["local"], sizes=(64, 128)))
    again = open_scaling(methods=["local"], sizes=(64, 128))  # a new session: nothing pressed there
    names = set(chart_traces(again, 0))
    assert any(name.startswith("Local window (slope") for name in names), names
