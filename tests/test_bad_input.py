"""Bad input (issue section 7): every mistake is a ParameterError (a ValueError) naming the parameter and the
allowed range, raised before any heavy work; never a crash inside torch and never silent garbage."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch

import core
from core import registry
from core.errors import ParameterError

METHODS = list(registry.methods())
N, D = 32, 8


def fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def numeric_params() -> list[tuple[str, registry.ParamSpec]]:
    return [(m, p) for m in METHODS for p in registry.methods()[m].params if p.kind in ("int", "float")]


def param_id(item: tuple[str, registry.ParamSpec]) -> str:
    return f"{item[0]}.{item[1].name}"


def assert_names_range(err: pytest.ExceptionInfo[ParameterError], method: str, p: registry.ParamSpec) -> None:
    message = str(err.value)
    assert p.name in message, message
    assert err.value.parameter in (p.name, f"{method}.{p.name}"), err.value.parameter
    low, high = p.bounds(N, D)
    assert fmt(low) in message and fmt(high) in message, message  # the allowed range, both ends


@pytest.mark.parametrize("item", numeric_params(), ids=param_id)
def test_numeric_parameter_out_of_range_zero_negative_nan_inf(item: tuple[str, registry.ParamSpec], random_qkv) -> None:
    method, p = item
    q, k, v = random_qkv((), N, D, seed=0, dtype=torch.float32)
    low, high = p.bounds(N, D)
    assert low is not None and high is not None
    step = 1 if p.kind == "int" else max(abs(low) * 0.5, 1e-3)
    bad_values: list[object] = [low - step, high + (1 if p.kind == "int" else max(abs(high), 1.0)), math.nan, math.inf]
    if low > 0:
        bad_values += [0, -1]  # zero and negative
    if p.kind == "int":
        bad_values.append(low + 0.5)  # not an integer
    for value in bad_values:
        with pytest.raises(ParameterError) as err:
            core.approximate(method, q, k, v, **{p.name: value})
        assert_names_range(err, method, p)


@pytest.mark.parametrize("item", numeric_params(), ids=param_id)
def test_numeric_parameter_wrong_type(item: tuple[str, registry.ParamSpec], random_qkv) -> None:
    method, p = item
    q, k, v = random_qkv((), N, D, seed=0, dtype=torch.float32)
    for value in ("abc", [1, 2], {"x": 1}, None):
        with pytest.raises(ParameterError) as err:
            core.approximate(method, q, k, v, **{p.name: value})
        assert p.name in str(err.value), (value, str(err.value))


@pytest.mark.parametrize("item", numeric_params(), ids=param_id)
def test_numeric_parameter_refuses_booleans(item: tuple[str, registry.ParamSpec]) -> None:
    """features=True is a wrong type, not the number 1 (silently running with m = 1 is garbage)."""
    method, p = item
    # validated the way approximate() validates, without running the method when it wrongly accepts
    with pytest.raises(ParameterError) as err:
        registry.methods()[method].validate({p.name: True}, N, D)
    assert p.name in str(err.value)


@pytest.mark.parametrize(
    "item",
    [(m, p) for m in METHODS for p in registry.methods()[m].params if p.kind in ("choice", "bool")],
    ids=param_id,
)
def test_choice_and_bool_parameters_refuse_other_values(item: tuple[str, registry.ParamSpec], random_qkv) -> None:
    method, p = item
    q, k, v = random_qkv((), N, D, seed=0, dtype=torch.float32)
    values: list[object] = ["no-such-option", 3.5] if p.kind == "choice" else ["yes", 2, None]
    for value in values:
        with pytest.raises(ParameterError) as err:
            core.approximate(method, q, k, v, **{p.name: value})
        message = str(err.value)
        assert p.name in message
        if p.kind == "choice":
            assert all(repr(c) in message or str(c) in message for c in p.choices), message
        else:
            assert "True" in message and "False" in message


@pytest.mark.parametrize("method", METHODS)
def test_unknown_parameter_name_is_refused_with_the_allowed_names(method: str, random_qkv) -> None:
    q, k, v = random_qkv((), N, D, seed=0, dtype=torch.float32)
    with pytest.raises(ParameterError) as err:
        core.approximate(method, q, k, v, no_such_parameter=1)
    message = str(err.value)
    assert "no_such_parameter" in message
    for p in registry.methods()[method].params:
        assert p.name in message


def test_unknown_method_lists_the_methods(random_qkv) -> None:
    q, k, v = random_qkv((), N, D, seed=0, dtype=torch.float32)
    with pytest.raises(ParameterError) as err:
        core.approximate("no-such-method", q, k, v)
    assert "method" in str(err.value) and "performer" in str(err.value) and "scatterbrain" in str(err.value)
    with pytest.raises(ParameterError):
        core.approximate(None, q, k, v)  # type: ignore[arg-type]


@pytest.mark.parametrize("method", METHODS)
def test_wrong_shapes_empty_and_non_finite_inputs(method: str, random_qkv) -> None:
    q, k, v = random_qkv((), N, D, seed=0, dtype=torch.float32)
    cases: list[tuple[tuple[object, object, object], str]] = [
        ((q[0], k, v), "q"),  # 1-D
        ((q, k[:, :-1], v), "k"),  # d mismatch
        ((q, k[:-1], v[:-1]), "k"),  # n mismatch
        ((q, k, v[:-1]), "v"),
        ((q[None].expand(2, N, D), k[None].expand(3, N, D), v[None].expand(3, N, D)), "q"),  # batch mismatch
        ((q[:0], k[:0], v[:0]), "n"),  # n = 0
        ((q[:, :0], k[:, :0], v), "d"),  # d = 0
        ((torch.where(torch.arange(N)[:, None] == 3, math.nan, q), k, v), "q"),
        ((q, torch.where(torch.arange(N)[:, None] == 5, math.inf, k), v), "k"),
        ((q, k, torch.where(torch.arange(N)[:, None] == 0, -math.inf, v)), "v"),
        ((q.tolist(), k, v), "q"),  # wrong type
        ((q.to(torch.int64), k.to(torch.int64), v.to(torch.int64)), "q"),  # integer dtype
        ((q.double(), k, v), "q"),  # mixed dtypes
        ((np.zeros((N, D), dtype=np.int32), k, v), "q"),
    ]
    for (a, b, c), name in cases:
        with pytest.raises(ParameterError) as err:
            core.approximate(method, a, b, c)
        assert err.value.parameter == name, (name, str(err.value))
        assert name in str(err.value)


@pytest.mark.parametrize("scale", [-1.0, math.nan, math.inf, "hot", torch.ones(5), [1.0, 2.0]])
def test_bad_scale(scale: object, random_qkv) -> None:
    q, k, v = random_qkv((), N, D, seed=0, dtype=torch.float32)
    with pytest.raises(ParameterError) as err:
        core.approximate(
            "performer", q[None].expand(3, N, D), k[None].expand(3, N, D), v[None].expand(3, N, D), scale=scale
        )
    assert err.value.parameter == "scale"
    assert "scale" in str(err.value)


@pytest.mark.parametrize("seed", [-1, 1.5, "0", True, 2**64])
def test_bad_seed(seed: object, random_qkv) -> None:
    q, k, v = random_qkv((), N, D, seed=0, dtype=torch.float32)
    with pytest.raises(ParameterError) as err:
        core.approximate("performer", q, k, v, seed=seed)
    assert err.value.parameter == "seed" and "2^63" in str(err.value)


def test_dense_view_above_the_cap_names_n_and_the_cap() -> None:
    from core.approximation import DENSE_MAX_N

    q = torch.zeros(DENSE_MAX_N + 1, 2)
    result = core.approximate("performer", q, q, q, features=4)
    with pytest.raises(ParameterError) as err:
        result.attention()
    assert err.value.parameter == "n"
    assert str(DENSE_MAX_N) in str(err.value) and str(DENSE_MAX_N + 1) in str(err.value)


def test_huge_n_is_refused_before_allocating() -> None:
    """n = 60000 exact attention would need ~54 GiB; it must be refused up front, naming n and the limit."""
    q = torch.zeros(60_000, 1)
    with pytest.raises(ParameterError) as err:
        core.approximate("exact", q, q, q)
    assert err.value.parameter == "n"
    assert "GiB" in str(err.value) and re.search(r"60000|60,000", str(err.value))
    # a large batch is the same problem
    q = torch.zeros(4096, 8192, 1)
    with pytest.raises(ParameterError) as err:
        core.approximate("local", q, q, q, window=8191)
    assert err.value.parameter == "n"


@pytest.mark.parametrize("method", [m for m in METHODS if registry.methods()[m].max_n is not None])
def test_oracles_cap_n_with_a_clear_message(method: str) -> None:
    cap = registry.methods()[method].max_n
    assert cap is not None
    q = torch.zeros(cap + 1, 2)
    with pytest.raises(ParameterError) as err:
        core.approximate(method, q, q, q)
    assert err.value.parameter == "n" and str(cap) in str(err.value)


@pytest.mark.parametrize("fraction", [0, -0.5, 1.5, math.nan, "half"])
def test_budget_params_bad_fraction(fraction: object) -> None:
    with pytest.raises(ParameterError) as err:
        core.budget_params("performer", 256, 32, fraction)  # type: ignore[arg-type]
    assert err.value.parameter == "fraction" and "(0, 1]" in str(err.value)


@pytest.mark.parametrize(("n", "d", "name"), [(0, 32, "n"), (256, 0, "d"), (2.5, 32, "n"), (256, "x", "d")])
def test_budget_params_bad_sizes(n: object, d: object, name: str) -> None:
    with pytest.raises(ParameterError) as err:
        core.budget_params("performer", n, d, 0.125)  # type: ignore[arg-type]
    assert err.value.parameter == name


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"n": 0, "d": 8, "clusters": 1, "spread": 0.3}, "n"),
        ({"n": 64, "d": 0, "clusters": 1, "spread": 0.3}, "d"),
        ({"n": 64, "d": 8, "clusters": 65, "spread": 0.3}, "clusters"),
        ({"n": 64, "d": 8, "clusters": 0, "spread": 0.3}, "clusters"),
        ({"n": 64, "d": 8, "clusters": 4, "spread": -0.1}, "spread"),
        ({"n": 64, "d": 8, "clusters": 4, "spread": math.nan}, "spread"),
        ({"n": 64, "d": 8, "clusters": 4, "spread": 0.3, "seed": -1}, "seed"),
        ({"n": 10**9, "d": 8, "clusters": 4, "spread": 0.3}, "n"),
    ],
)
def test_clustered_bad_arguments(kwargs: dict, name: str) -> None:
    with pytest.raises(ParameterError) as err:
        core.data.clustered(**kwargs)
    assert err.value.parameter == name
    assert re.search(r"\[.*\]", str(err.value)), str(err.value)  # states the allowed range


def test_real_bad_arguments() -> None:
    with pytest.raises(ParameterError) as err:
        core.data.real("")
    assert err.value.parameter == "text"
    with pytest.raises(ParameterError) as err:
        core.data.real("hello", max_tokens=1)
    assert err.value.parameter == "max_tokens" and "512" in str(err.value)
    with pytest.raises(ParameterError) as err:
        core.data.real("hello", model_path="/nonexistent/model")
    assert err.value.parameter == "model_path"
