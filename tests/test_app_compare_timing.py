"""Compare's time column says what it measured: one cold run by default, a warm median on request."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parent.parent / "app.py")


def time_column(extra: dict[str, str]) -> list[str]:
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("pages/1_Compare.py")
    for key, value in {"n": "64", "methods": "performer", **extra}.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    table = at.table[0].value  # a static table that wraps (a grid cut its columns)
    column = next(c for c in table.columns if c.startswith("time"))
    return [str(v) for v in table[column]]


def test_default_time_is_one_cold_measurement() -> None:
    assert all("one cold measurement" in cell for cell in time_column({}))


def test_warm_timings_on_request_give_a_median() -> None:
    assert all("median of" in cell for cell in time_column({"warm_times": "true"}))
