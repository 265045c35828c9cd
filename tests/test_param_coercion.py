"""ParamSpec.coerce: one check of every input, shared by the engine (validate) and the URL layer (ui/url_params.py).

Each finding kind is produced by the raw value that should produce it; validate refuses exactly where coercion
had to change a value; and no text, however long or strange, makes coercion raise.
"""

from __future__ import annotations

import math
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import ParameterError
from core.registry import Coerced, Finding, ParamSpec

COUNT = ParamSpec("n", "int", 512, "tokens", low=16, high=4096)
SPREAD = ParamSpec("spread", "float", 0.5, "spread", low=0.0, high=1.5)
TAU = ParamSpec("tau", "float", 0.5, "temperature", grid=(0.1, 0.2, 0.5, 1.0), log=True)
LINEAR_GRID = ParamSpec("tau", "float", 0.5, "temperature", grid=(0.1, 0.2, 0.5, 1.0))
SOURCE = ParamSpec(
    "source", "choice", "gaussian", "input", choices=("gaussian", "real"), aliases=(("Real model", "real"),)
)
SIDE = ParamSpec("side", "choice", 48, "pixels", choices=(32, 48, 64))
SWITCH = ParamSpec("on", "bool", False, "switch")
TEXT = ParamSpec("text", "text", "hello", "text", low=1, high=10, multiline=True)
LINE = ParamSpec("line", "text", "", "line", high=10)
METHODS = ParamSpec("methods", "multi", ["lsh"], "methods", high=2, choices=("lsh", "performer", "nystrom"))
TAU_RANGE = ParamSpec("taus", "range", (0.1, 1.0), "range", grid=(0.1, 0.2, 0.5, 1.0), log=True)
LEVELS = ParamSpec("levels", "int_list", None, "levels", low=1, high=8)


def case_id(value: Any) -> str:
    if isinstance(value, ParamSpec):
        return f"{value.name}:{value.kind}"
    if isinstance(value, Coerced):
        return value.finding.kind if value.finding is not None else "kept"
    return repr(value)[:24]


@pytest.mark.parametrize(
    ("spec", "raw", "expected"),
    [
        (COUNT, "512", Coerced(512)),
        (COUNT, " 512 ", Coerced(512)),
        (COUNT, 512.0, Coerced(512)),
        (COUNT, "100.6", Coerced(101, Finding("not_whole"))),
        (COUNT, "-3", Coerced(16, Finding("below_minimum", 16))),
        (COUNT, "99999", Coerced(4096, Finding("above_maximum", 4096))),
        (COUNT, "15.6", Coerced(16, Finding("not_whole"))),  # rounded first, then inside the range
        (COUNT, "4096/8", Coerced(512)),
        (COUNT, "abc", Coerced(None, Finding("not_a_number"))),
        (COUNT, True, Coerced(None, Finding("not_a_number"))),  # a boolean is not a count
        (COUNT, None, Coerced(None, Finding("not_a_number"))),
        (COUNT, [512], Coerced(None, Finding("not_a_number"))),
        (COUNT, 10**400, Coerced(4096, Finding("above_maximum", 4096))),  # exact, no float overflow
        (SPREAD, "1/8", Coerced(0.125)),
        (SPREAD, "-1/8", Coerced(0.0, Finding("below_minimum", 0.0))),
        (SPREAD, "3", Coerced(1.5, Finding("above_maximum", 1.5))),
        (SPREAD, 10**400, Coerced(1.5, Finding("above_maximum", 1.5))),  # beyond any float, still clamped
        (ParamSpec("x", "float", 0.0, "unbounded"), 10**400, Coerced(None, Finding("not_a_number"))),
        (SPREAD, "1/0", Coerced(None, Finding("not_a_number"))),
        (SPREAD, "0/0", Coerced(None, Finding("not_a_number"))),
        (TAU, "0.5", Coerced(0.5)),
        (TAU, "1/5", Coerced(0.2)),
        (TAU, "0.3", Coerced(0.2, Finding("off_grid", 0.2))),  # log-nearest: |ln 0.3/0.2| < |ln 0.5/0.3|
        (TAU, "0.33", Coerced(0.5, Finding("off_grid", 0.5))),
        (LINEAR_GRID, "0.33", Coerced(0.2, Finding("off_grid", 0.2))),  # linear-nearest: 0.13 < 0.17
        (TAU, "0.01", Coerced(0.1, Finding("below_minimum", 0.1))),
        (TAU, "1e9", Coerced(1.0, Finding("above_maximum", 1.0))),
        (TAU, "-1", Coerced(None, Finding("not_positive"))),
        (TAU, "0", Coerced(None, Finding("not_positive"))),
        (LINEAR_GRID, "0", Coerced(0.1, Finding("below_minimum", 0.1))),
        (SOURCE, "real", Coerced("real")),
        (SOURCE, "Real model", Coerced("real")),  # the label Streamlit writes into the address bar
        (SOURCE, "REAL", Coerced(None, Finding("not_a_choice"))),
        (SOURCE, 3.5, Coerced(None, Finding("not_a_choice"))),
        (SIDE, "64", Coerced(64)),  # a choice named by its text
        (SIDE, 64, Coerced(64)),
        (SIDE, "65", Coerced(None, Finding("not_a_choice"))),
        (SWITCH, " ON ", Coerced(True)),
        (SWITCH, "0", Coerced(False)),
        (SWITCH, 1, Coerced(True)),
        (SWITCH, "maybe", Coerced(None, Finding("not_a_bool"))),
        (SWITCH, 2, Coerced(None, Finding("not_a_bool"))),
        (SWITCH, None, Coerced(None, Finding("not_a_bool"))),
        (TEXT, "a\nb", Coerced("a\nb")),
        (TEXT, "a\x00b", Coerced("ab", Finding("control_characters"))),
        (TEXT, "x" * 11, Coerced("x" * 10, Finding("too_long", 10))),
        (TEXT, " \n ", Coerced(None, Finding("too_short", 1))),
        (TEXT, 5, Coerced(None)),  # not a text: nothing to use, nothing to say
        (LINE, "a\nb", Coerced("ab", Finding("control_characters"))),
        (LINE, "", Coerced("")),
        (METHODS, ["performer", "lsh"], Coerced(["performer", "lsh"])),
        (METHODS, "lsh", Coerced(["lsh"])),
        (METHODS, ["lsh", "bogus", "lsh"], Coerced(["lsh"], Finding("unknown_items", dropped=("bogus",)))),
        (METHODS, ["lsh", "performer", "nystrom"], Coerced(["lsh", "performer"])),  # at most high items
        (METHODS, ["bogus"], Coerced(None, Finding("unknown_items", dropped=("bogus",)))),
        (METHODS, [], Coerced(None, Finding("no_items"))),
        (TAU_RANGE, ["1", "0.1"], Coerced((0.1, 1.0))),  # put in order
        (TAU_RANGE, ["0.1"], Coerced(None, Finding("not_a_pair"))),
        (TAU_RANGE, ["0.1", "0.3"], Coerced((0.1, 0.2), Finding("off_grid", 0.2, part="0.3"))),
        (TAU_RANGE, ["x", "0.3"], Coerced(None, Finding("not_a_number", part="x"))),
        (LEVELS, "1, 2,3", Coerced([1, 2, 3])),
        (LEVELS, 4, Coerced([4])),
        (LEVELS, [1, 9], Coerced([1, 8], Finding("above_maximum", 8, part=9))),
        (LEVELS, [1, "x"], Coerced(None, Finding("not_a_number", part="x"))),
        (LEVELS, [], Coerced(None, Finding("no_items"))),
    ],
    ids=case_id,
)
def test_coerce_gives_the_allowed_value_and_the_finding(spec: ParamSpec, raw: Any, expected: Coerced) -> None:
    coerced = spec.coerce(raw)
    assert coerced == expected
    assert type(coerced.value) is type(expected.value)


@pytest.mark.parametrize("raw", ["nan", "NaN", "inf", "-inf", "Infinity", "1e999", "-1e999", math.nan, math.inf])
@pytest.mark.parametrize("spec", [COUNT, SPREAD, TAU], ids=["int", "float", "grid"])
def test_nan_and_infinity_are_not_numbers(spec: ParamSpec, raw: Any) -> None:
    assert spec.coerce(raw) == Coerced(None, Finding("not_a_number"))


def test_huge_strings_are_read_from_their_start_and_fast() -> None:
    started = time.perf_counter()
    # A number as text is read from its first 64 characters: 64 nines is above any maximum.
    assert COUNT.coerce("9" * 1_000_000) == Coerced(4096, Finding("above_maximum", 4096))
    assert SPREAD.coerce("0." + "0" * 1_000_000 + "1") == Coerced(0.0)
    assert COUNT.coerce("x" * 1_000_000).finding == Finding("not_a_number")
    assert SOURCE.coerce("r" * 1_000_000).finding == Finding("not_a_choice")
    assert TEXT.coerce("y" * 1_000_000) == Coerced("y" * 10, Finding("too_long", 10))
    assert time.perf_counter() - started < 5


def test_validate_refuses_where_coerce_changes_the_value() -> None:
    cases = [(COUNT, "100.6"), (COUNT, "-3"), (COUNT, 99999), (SPREAD, 3.0), (TAU, 0.3), (SOURCE, "bogus")]
    cases += [(SWITCH, "yes"), (SWITCH, 2), (TEXT, "x" * 11), (METHODS, ["lsh", "bogus"]), (LEVELS, "1,2")]
    for spec, raw in cases:
        with pytest.raises(ParameterError) as err:
            spec.validate(raw, 0, 0, "m")
        assert f"m.{spec.name}" in str(err.value) and repr(raw)[:30] in str(err.value)


def test_validate_returns_what_coerce_keeps() -> None:
    assert COUNT.validate(512.0, 0, 0, "m") == 512 and isinstance(COUNT.validate(512.0, 0, 0, "m"), int)
    assert SPREAD.validate("1/8", 0, 0, "m") == 0.125
    assert TAU.validate(0.5, 0, 0, "m") == 0.5
    assert SWITCH.validate(1, 0, 0, "m") is True
    assert METHODS.validate(["nystrom"], 0, 0, "m") == ["nystrom"]
    assert LEVELS.validate((1, 2), 0, 0, "m") == [1, 2]


def test_bounds_may_depend_on_the_input_size() -> None:
    rank = ParamSpec("rank", "int", 64, "rank", low=1, high=lambda n, d: n)
    assert rank.coerce("64", n=16, d=8) == Coerced(16, Finding("above_maximum", 16))
    assert rank.coerce("64", n=128, d=8) == Coerced(64)


@settings(max_examples=300, deadline=None)
@given(raw=st.one_of(st.text(max_size=200), st.lists(st.text(max_size=20), max_size=4), st.floats(), st.integers()))
def test_coerce_never_raises_and_stays_inside_the_bounds(raw: Any) -> None:
    for spec in (COUNT, SPREAD, TAU, SOURCE, SWITCH, TEXT, LINE, METHODS, TAU_RANGE, LEVELS):
        coerced = spec.coerce(raw)
        if coerced.value is None:
            continue
        if spec is COUNT:
            assert isinstance(coerced.value, int) and 16 <= coerced.value <= 4096
        elif spec is SPREAD:
            assert 0.0 <= coerced.value <= 1.5
        elif spec is TAU:
            assert coerced.value in TAU.grid
        elif spec is TAU_RANGE:
            low, high = coerced.value
            assert low in TAU.grid and high in TAU.grid and low <= high
        elif spec is TEXT:
            assert 1 <= len(coerced.value.strip()) and len(coerced.value) <= 10
        elif spec is METHODS:
            assert 1 <= len(coerced.value) <= 2 and set(coerced.value) <= set(METHODS.choices)
        if coerced.finding is None and not isinstance(raw, str | list):
            assert spec.validate(raw, 0, 0, "m") == coerced.value
