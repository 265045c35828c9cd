"""Switching the input to the real model puts τ at the model's own temperature (1) and the budget at 1/2, says why
in one caption, and leaves a link's explicit values alone (AppTest)."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from ui.fields import DEFAULTS, REAL_DEFAULTS, REAL_NOTE


def captions(at: AppTest) -> str:
    return "\n".join(c.value for c in at.caption)


def test_switching_to_the_real_model_sets_its_temperature_and_budget_and_says_why(open_compare) -> None:
    at = open_compare(n="64", heads="1", methods="performer")
    assert at.select_slider(key="tau").value == DEFAULTS["tau"]
    assert REAL_NOTE not in captions(at)
    at.selectbox(key="input").set_value("real").run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.select_slider(key="tau").value == REAL_DEFAULTS["tau"] == 1.0
    assert at.select_slider(key="budget").value == REAL_DEFAULTS["budget"]
    assert REAL_NOTE in captions(at)
    assert "features=13" in captions(at)  # the parameters line under the metrics: not 3, as at a 1/8 budget
    error = float(at.metric[0].value)
    # ... and back: the synthetic defaults return.
    at.selectbox(key="input").set_value("clustered").run()
    assert at.select_slider(key="tau").value == DEFAULTS["tau"]
    assert at.select_slider(key="budget").value == DEFAULTS["budget"]
    assert error > 0


def test_a_real_model_link_gets_the_real_defaults_unless_it_sets_them(open_compare) -> None:
    at = open_compare(input="real", methods="performer")
    assert at.select_slider(key="tau").value == 1.0
    assert at.select_slider(key="budget").value == REAL_DEFAULTS["budget"]
    assert "tau" not in at.query_params and "budget" not in at.query_params  # the defaults for this input
    explicit = open_compare(input="real", tau="0.2", budget="0.125", methods="performer")
    assert explicit.select_slider(key="tau").value == 0.2
    assert explicit.select_slider(key="budget").value == 0.125
    assert explicit.query_params.get("tau") == "0.2"
