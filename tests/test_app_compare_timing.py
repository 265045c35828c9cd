"""Compare's time column says what it measured: one cold run by default, a warm median on request."""

from __future__ import annotations

from collections.abc import Callable

from streamlit.testing.v1 import AppTest


def time_column(open_compare: Callable[..., AppTest], extra: dict[str, str]) -> list[str]:
    at = open_compare(timeout=120, **{"n": "64", "methods": "performer", **extra})
    assert not at.exception, [e.value for e in at.exception]
    table = at.table[0].value  # a static table that wraps (a grid cut its columns)
    column = next(c for c in table.columns if c.startswith("time"))
    return [str(v) for v in table[column]]


def test_default_time_is_one_cold_measurement(open_compare) -> None:
    assert all("one cold measurement" in cell for cell in time_column(open_compare, {}))


def test_warm_timings_on_request_give_a_median(open_compare) -> None:
    assert all("median of" in cell for cell in time_column(open_compare, {"warm_times": "true"}))
