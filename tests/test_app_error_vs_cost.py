"""The Error vs cost page (Streamlit AppTest): it measures the chosen methods at the chosen budgets, says where and how
the times were measured, keeps one measurement per settings (the memory choice only redraws), and refuses settings
over the server's limits before starting. Small n: a few seconds per run."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable

import pytest
from streamlit.testing.v1 import AppTest

from ui import share_box

PAGE = "pages/10_Error_vs_cost.py"
SMALL = {"n": "64", "heads": "1", "runs": "2", "methods": ["performer", "lsh"], "budgets": ["1/8", "1/4"]}


@pytest.fixture
def open_cost(open_page: Callable[..., AppTest]) -> Callable[..., AppTest]:
    return functools.partial(open_page, PAGE)


def chart_names(at: AppTest) -> list[str]:
    return [trace.get("name") for trace in json.loads(at.get("plotly_chart")[0].proto.spec)["data"]]


def test_the_page_measures_and_says_where_and_how(open_cost) -> None:
    at = open_cost(**SMALL)
    assert not at.exception, [e.value for e in at.exception]
    names = chart_names(at)
    assert {"Performer (FAVOR+) (low-rank)", "LSH sparse (Reformer/SMYRF)"} <= set(names), names
    assert any(name.startswith("Pareto front") for name in names)
    assert any(name.startswith("Exact softmax (error 0)") for name in names)
    caption = next(c.value for c in at.caption if c.value.startswith("Measured on"))
    assert "**cpu**" in caption and "thread(s)" in caption and "UTC" in caption, caption
    assert "median of 2 warm run(s)" in caption and "vary with the server's load" in caption, caption
    at.session_state["open_numbers_cost"] = True
    at.run()
    table = at.dataframe[0].value
    assert list(table["method"]) == ["exact", "performer", "lsh", "performer", "lsh"]
    assert (table["runs"] == 2).all() and (table["device"] == "cpu").all()


def test_the_memory_choice_redraws_the_same_measurement(open_cost) -> None:
    at = open_cost(**SMALL)
    measured = next(c.value for c in at.caption if c.value.startswith("Measured on"))
    at.radio(key="memory").set_value("model").run()
    assert not at.exception, [e.value for e in at.exception]
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert "analytic model" in spec["layout"]["xaxis2"]["title"]["text"]
    assert next(c.value for c in at.caption if c.value.startswith("Measured on")) == measured  # not measured again


def test_settings_over_the_job_limit_are_refused_before_starting(monkeypatch: pytest.MonkeyPatch, open_cost) -> None:
    monkeypatch.setenv("ATTN_EXPLORER_JOB_SECONDS", "5")
    at = open_cost(n="4096", heads="1", runs="20")
    said = "\n".join(e.value for e in at.error)
    assert "Refused before starting" in said and "the largest n that fits is" in said, said
    assert not at.get("plotly_chart")


def test_measure_again_takes_a_new_measurement_under_a_new_number(open_cost) -> None:
    at = open_cost(**SMALL)
    assert "take=" not in share_box.links_in(at)[-1]  # the first measurement is the default
    assert "measurement 1 of these settings" in next(c.value for c in at.caption if c.value.startswith("Measured"))
    next(b for b in at.button if b.label == "Measure again").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.number_input(key="take").value == 2
    assert "measurement 2 of these settings" in next(c.value for c in at.caption if c.value.startswith("Measured"))
    assert "take=2" in share_box.links_in(at)[-1]
