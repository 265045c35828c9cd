"""Error against cost (core/cost_study.py): the Pareto front, the table a study returns, its errors (the engine's own),
its refusals of bad settings, and cancellation between points. Small inputs: the whole file takes a few seconds."""

from __future__ import annotations

import math

import pytest

import core
from core import cost_study
from core.approximation import prepare_inputs
from core.cancel import Cancelled, CancelToken
from core.errors import ParameterError

N, D, HEADS, BETA, SEED = 64, 16, 2, 4.0, 3
METHODS = ["performer", "lsh", "local"]
BUDGETS = [0.25, 0.125]


@pytest.fixture(scope="module")
def qkv() -> core.data.Inputs:
    return core.data.clustered(N, D, 4, 0.2, 0, heads=HEADS)


@pytest.fixture(scope="module")
def study(qkv) -> cost_study.CostStudy:
    return cost_study.cost_study(prepare_inputs(qkv.q, qkv.k, qkv.v, BETA, SEED), METHODS, BUDGETS, warm_runs=2)


def test_pareto_front_of_a_hand_made_table() -> None:
    #        a    b    c    d    e (= b)  f (nan)  g (inf error)
    costs = [1.0, 2.0, 3.0, 4.0, 2.0, math.nan, 0.5]
    errors = [5.0, 3.0, 4.0, 1.0, 3.0, 0.1, math.inf]
    # c is dominated by b (cheaper and more accurate); b and e tie, so neither dominates the other; f and g have no
    # usable value, so they are never optimal and dominate nothing (f's error 0.1 would otherwise dominate d).
    assert cost_study.pareto_optimal(costs, errors) == [True, True, False, True, True, False, False]
    assert cost_study.pareto_optimal([1.0, 1.0], [2.0, 1.0]) == [False, True]  # equal cost: the lower error wins
    assert cost_study.pareto_optimal([], []) == []
    with pytest.raises(ValueError, match="same length"):
        cost_study.pareto_optimal([1.0], [])


def test_the_table_has_one_row_per_method_and_budget_exact_first(study: cost_study.CostStudy) -> None:
    plan = [("exact", 1.0)] + [(m, b) for b in sorted(BUDGETS) for m in METHODS]
    assert [(p.method, p.budget) for p in study.points] == plan
    rows = study.rows()
    assert len(rows) == len(plan)
    assert set(rows[0]) == {
        "method", "family", "budget", "params", "error", "median_s", "time_spread", "peak_mib", "model_mib",
        "device", "runs", "pareto_time", "pareto_memory", "pareto_model_memory", "status",
    }  # fmt: skip
    for point in study.points:
        assert point.ok, point.status
        assert point.device == "cpu" and point.runs == 2
        assert point.seconds > 0 and point.spread >= 0 and point.model_bytes > 0
        assert point.family == core.methods()[point.method].family
    assert study.points[0].error == 0.0 and study.points[0].params == core.methods()["exact"].defaults()
    assert study.warm_runs == 2 and study.n == N and study.heads == HEADS
    assert study.machine["device"] == "cpu" and study.machine["threads"] >= 1
    assert study.measured_at.endswith("+00:00")
    # The flags are pareto_optimal over the measured points, exact included (error 0 is the best error).
    assert rows[0]["pareto_time"]
    times = cost_study.pareto_optimal([p.seconds for p in study.points], [p.error for p in study.points])
    assert [r["pareto_time"] for r in rows] == times
    model = cost_study.pareto_optimal([p.model_bytes for p in study.points], [p.error for p in study.points])
    assert [r["pareto_model_memory"] for r in rows] == model


def test_errors_and_params_are_the_engines_for_the_same_budget(qkv, study: cost_study.CostStudy) -> None:
    exact = core.approximate("exact", qkv.q, qkv.k, qkv.v, scale=BETA).output
    for point in study.points[1:]:
        params = core.budget_params(point.method, N, D, point.budget)
        result = core.approximate(point.method, qkv.q, qkv.k, qkv.v, scale=BETA, seed=SEED, **params)
        assert point.params == result.params
        expected = float(core.metrics.relative_output_error(result.output, exact).mean())
        assert point.error == pytest.approx(expected, rel=1e-6, abs=1e-9), (point.method, point.budget)
        assert point.model_bytes == result.cost.memory * 4
    # The budgets matter: a larger budget gives each method more to store.
    by = {(p.method, p.budget): p for p in study.points}
    assert all(by[m, 0.25].model_bytes > by[m, 0.125].model_bytes for m in METHODS)


def test_errors_are_deterministic_across_studies(qkv, study: cost_study.CostStudy) -> None:
    again = cost_study.cost_study(prepare_inputs(qkv.q, qkv.k, qkv.v, BETA, SEED), METHODS, BUDGETS, warm_runs=1)
    assert [p.error for p in again.points] == [p.error for p in study.points]


def test_cancellation_stops_between_points(qkv) -> None:
    token = CancelToken()
    reports: list[str] = []

    def report(fraction: float, label: str) -> None:
        reports.append(label)
        if len(reports) == 2:
            token.cancel("the tab was closed")

    inputs = prepare_inputs(qkv.q, qkv.k, qkv.v, BETA, SEED)
    with pytest.raises(Cancelled, match="the tab was closed"):
        cost_study.cost_study(inputs, METHODS, BUDGETS, warm_runs=1, progress=report, cancel=token)
    assert len(reports) == 2, reports  # not one point measured after the cancel
    assert reports[0].startswith("exact attention") and "at budget 1/8" in reports[1]


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"budgets": [0.0]}, "budgets"),
        ({"budgets": [1.5]}, "budgets"),
        ({"warm_runs": 0}, "warm_runs"),
        ({"warm_runs": cost_study.MAX_WARM_RUNS + 1}, "warm_runs"),
        ({"methods": ["no_such_method"]}, "method"),
    ],
)
def test_bad_settings_are_refused_naming_the_parameter(qkv, kwargs, name: str) -> None:
    settings = {"methods": METHODS, "budgets": BUDGETS, "warm_runs": 1} | kwargs
    inputs = prepare_inputs(qkv.q, qkv.k, qkv.v, BETA, SEED)
    with pytest.raises(ParameterError) as caught:
        cost_study.cost_study(inputs, settings.pop("methods"), settings.pop("budgets"), **settings)
    assert caught.value.parameter == name, caught.value


def test_the_estimate_grows_with_runs_and_n() -> None:
    base = cost_study.estimate(METHODS, BUDGETS, 1024, 64, 2, 3, True)
    assert cost_study.estimate(METHODS, BUDGETS, 1024, 64, 2, 6, True).seconds > base.seconds
    assert cost_study.estimate(METHODS, BUDGETS, 4096, 64, 2, 3, True).seconds > 4 * base.seconds
    assert cost_study.estimate(METHODS, BUDGETS, 4096, 64, 2, 3, True).bytes > base.bytes


def test_budget_text() -> None:
    assert [cost_study.budget_text(b) for b in (1 / 32, 0.125, 1.0, 0.3)] == ["1/32", "1/8", "1", "0.3"]


def test_a_method_that_refuses_a_size_gets_a_refused_point_and_the_others_run() -> None:
    x = core.data.gaussian(2064, 4, 0, heads=1)  # above the top-k oracle's largest n, 2048
    study = cost_study.cost_study(
        prepare_inputs(x.q, x.k, x.v, 1.0, 0), ["topk", "local"], [0.125], warm_runs=1, with_exact=False
    )
    topk, local = study.points
    assert topk.status.startswith("refused:") and "2048" in topk.status and math.isnan(topk.error)
    assert local.ok and math.isfinite(local.error)
    assert [r["status"] for r in study.rows()] == [topk.status, "ok"]
