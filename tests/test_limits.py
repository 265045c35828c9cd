"""core.limits: the server limits come from the environment, the estimates are conservative but not absurd
(checked against measured peak memory and wall time of small real runs), and refusals name the knob and the
largest value that fits."""

from __future__ import annotations

import math
import time

import pytest
import torch

import core
from core import limits, profiling, regime, sweeps
from core import rank_heads as rh
from core.errors import ParameterError

GIB = 1024**3


@pytest.fixture(autouse=True)
def _default_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(limits.MEMORY_ENV, raising=False)
    monkeypatch.delenv(limits.SECONDS_ENV, raising=False)


def test_defaults_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert limits.memory_limit_bytes() == 4 * GIB
    assert limits.job_seconds() == 60
    monkeypatch.setenv(limits.MEMORY_ENV, str(2 * GIB))
    monkeypatch.setenv(limits.SECONDS_ENV, "20")
    assert limits.memory_limit_bytes() == 2 * GIB
    assert limits.job_seconds() == 20


@pytest.mark.parametrize("bad", ["abc", "-1", "0", "inf", "nan"])
def test_bad_environment_value_is_a_parameter_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, bad: str
) -> None:
    monkeypatch.setenv(limits.SECONDS_ENV, bad)
    with pytest.raises(ParameterError) as err:
        limits.job_seconds()
    assert limits.SECONDS_ENV in str(err.value)


def test_engine_reads_the_memory_limit_at_call_time(monkeypatch: pytest.MonkeyPatch) -> None:
    x = core.data.clustered(n=256, d=16, clusters=8, spread=0.3, seed=0)
    core.approximate("performer", x.q, x.k, x.v, features=64)  # fits the default
    monkeypatch.setenv(limits.MEMORY_ENV, str(64 * 1024))
    with pytest.raises(ParameterError) as err:
        core.approximate("performer", x.q, x.k, x.v, features=64)
    assert "limit" in str(err.value) and err.value.parameter == "n"


def test_largest_fitting_is_the_linear_scan_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(limits.SECONDS_ENV, "10")
    candidates = list(range(1, 200))
    estimate = lambda c: limits.Estimate(0, c * 0.37)  # noqa: E731
    expected = max(c for c in candidates if c * 0.37 <= 10)
    assert limits.largest_fitting(candidates, estimate) == expected == 27
    assert limits.largest_fitting(candidates, lambda c: limits.Estimate(0, 11 + c)) is None


def test_refusal_names_the_knob_and_the_largest_value_that_fits() -> None:
    estimate = lambda n: limits.construction_estimate(64, n)  # noqa: E731
    with pytest.raises(ParameterError) as err:
        limits.check("N for this panel", 256, range(2, 257), estimate)
    message = str(err.value)
    best = limits.largest_fitting(range(2, 257), estimate)
    assert best is not None and 2 <= best < 256
    assert err.value.parameter == "N for this panel"
    assert f"the largest N for this panel that fits is {best}." in message, message
    assert estimate(best).fits() and not estimate(best + 1).fits()
    assert limits.MEMORY_ENV in message and limits.SECONDS_ENV in message
    assert limits.check("N for this panel", best, range(2, 257), estimate).fits()


def test_the_issue_links_are_refused_up_front_under_the_default_limits() -> None:
    # Fact 1 at d = 64, N = 256 drove the server to 7.9 GB.
    assert not limits.construction_estimate(64, 256).fits()
    assert limits.construction_estimate(64, 256).bytes > 4 * GIB
    # Compare at n = 4096 with every estimator (2 heads: the sidebar's own cap at that n).
    every = {m: {} for m, s in core.methods().items() if m != "exact" and (s.max_n is None or s.max_n >= 4096)}
    assert not limits.compare_estimate(every, 4096, 64, 2).fits()
    # Robust PCA on one 1024 x 1024 head with its budget's 60 iterations; a 16 x 12 regime map at n = 4096.
    assert not limits.rpca_estimate(1024, 1, 60).fits()
    estimators = {"lsh": {}, "performer": {}, "scatterbrain": {}}
    assert not limits.sweep_estimate(estimators, 4096, 64, 1, 16, rows=12).fits()
    # The pages' defaults still run.
    assert limits.compare_estimate({m: {} for m in ("performer", "lsh", "scatterbrain", "nystrom")}, 512, 64, 4).fits()
    assert limits.sweep_estimate(estimators, 256, 64, 1, 8, rows=5).fits()
    assert limits.sweep_estimate(estimators, 512, 64, 4, 12).fits()
    assert limits.construction_estimate(16, 16).fits()


def measured(fn) -> tuple[int, float]:  # type: ignore[no-untyped-def]
    if not profiling.cpu_peak_supported():
        pytest.fail("this test needs Linux's RSS peak reset (/proc/self/clear_refs)")
    started = time.perf_counter()
    _, peak = profiling.measure_peak(fn, "cpu")
    seconds = time.perf_counter() - started
    assert peak.bytes is not None and peak.bytes > 0
    return peak.bytes, seconds


def assert_conservative(estimate: limits.Estimate, peak: int, seconds: float) -> None:
    assert peak <= estimate.bytes, (peak, estimate)
    # Not absurd: the part that scales with the work is within 10x of what was measured.
    assert estimate.bytes - limits.BASE_BYTES <= 10 * peak, (peak, estimate)
    assert seconds <= estimate.seconds, (seconds, estimate)


def test_fact1_construction_estimate_against_a_real_run() -> None:
    d, n_points = 16, 64
    cs = list(torch.logspace(0, math.log10(4096), 13).tolist())
    peak, seconds = measured(lambda: rh.construction_sweep(d, n_points, cs, samples=8_000))
    assert_conservative(limits.construction_estimate(d, n_points, samples=8_000), peak, seconds)


def test_compare_estimate_against_a_real_run() -> None:
    n, d, heads = 1024, 32, 2
    x = core.data.clustered(n=n, d=d, clusters=16, spread=0.3, seed=0, heads=heads)
    chosen = {"performer": {}, "lsh": {}, "nystrom": {}}
    kept: list[torch.Tensor] = []

    def run() -> None:
        exact = core.approximate("exact", x.q, x.k, x.v).attention()
        kept.append(exact)
        for method in chosen:
            params = core.budget_params(method, n, d, 1 / 8)
            dense = core.approximate(method, x.q, x.k, x.v, seed=0, **params).attention()
            kept.extend([dense, (dense - exact).abs()])  # the page keeps each view and its error map

    peak, seconds = measured(run)
    assert_conservative(limits.compare_estimate(chosen, n, d, heads), peak, seconds)


def test_rank_heads_estimate_counts_each_training_run() -> None:
    """Short runs cost mostly their set-up and final evaluation: the default grid's 9 runs of 20 steps took 2.5 s on
    the quiet reference machine, which a per-step estimate alone put at 0.54 s (then settings like these trained
    without a click for a minute on a loaded server). The estimate is a calibrated median, not a bound: within 3x of
    the run."""
    from core import rank_heads_study as study

    cells = study.grid_cells(16, [1, 4, 16], [1, 4, 16])
    settings = study.TrainSettings("nearest", 16, 2, 20, 1, 0, "cpu")
    study.train_cell(settings, 1, 1)  # warm-up: the first run in a process pays its imports
    started = time.perf_counter()
    study.train_cells(settings, cells)
    seconds = time.perf_counter() - started
    assert settings.seconds(cells) >= seconds / 3, (settings.seconds(cells), seconds)
    assert settings.seconds(cells) <= seconds * 3, (settings.seconds(cells), seconds)


def test_rpca_estimate_against_a_real_run() -> None:
    n = 512
    x = core.data.clustered(n=n, d=32, clusters=16, spread=0.3, seed=0)
    peak, seconds = measured(lambda: core.approximate("rpca", x.q, x.k, x.v, iterations=3).attention())
    estimate = limits.rpca_estimate(n, 1, 3)
    assert peak <= estimate.bytes and seconds <= estimate.seconds, (peak, seconds, estimate)


def test_sweep_estimate_against_a_real_run() -> None:
    n, d, points = 512, 32, 6
    x = core.data.clustered(n=n, d=d, clusters=16, spread=0.3, seed=0)
    chosen = {"lsh": {}, "performer": {}, "scatterbrain": {}}
    peak, seconds = measured(
        lambda: core.sweeps.error_vs_entropy(x.q, x.k, x.v, list(chosen), taus=[0.1 * (i + 1) for i in range(points)])
    )
    assert_conservative(limits.sweep_estimate(chosen, n, d, 1, points), peak, seconds)


def test_sweep_estimate_holds_at_a_larger_n_where_its_margin_is_smallest() -> None:
    # The measured cost per entry grows with n (benchmarks/limits_calibration.py: 2.9x margin at n = 2048).
    n, d, heads, points = 1024, 64, 2, 12
    x = core.data.clustered(n=n, d=d, clusters=16, spread=0.3, seed=0, heads=heads)
    chosen = {"lsh": {}, "performer": {}, "scatterbrain": {}}
    taus = [0.01 * 2**i for i in range(points)]
    peak, seconds = measured(lambda: core.sweeps.error_vs_entropy(x.q, x.k, x.v, list(chosen), taus=taus))
    assert_conservative(limits.sweep_estimate(chosen, n, d, heads, points), peak, seconds)


def test_sweeps_of_a_few_seconds_are_not_refused() -> None:
    # Error vs entropy's defaults (3 estimators, 4 heads, 12 temperatures) at n = 2048 take about 9 s on the 2-core
    # reference CPU; the Compare page's per-entry cost, charged per temperature, made this 218 s and refused it.
    estimators = {"lsh": {}, "performer": {}, "scatterbrain": {}}
    assert limits.sweep_estimate(estimators, 2048, 64, 4, 12).fits()
    # The regime map at its defaults (n = 256, 8 x 5 cells, 3 seeds) and at n = 1024.
    assert limits.regime_estimate(estimators, 1024, 64, 8, 5, 3).fits()
    # Still refused: the issue's 16 x 12 map at n = 4096, and 40 temperatures at n = 4096 with 4 heads.
    assert not limits.regime_estimate(estimators, 4096, 64, 16, 12, 1).fits()
    assert not limits.sweep_estimate(estimators, 4096, 64, 4, 40).fits()


def test_compare_refusal_names_the_costly_method_when_no_n_fits() -> None:
    knobs = {"performer": {}, "learned_kernel": {"steps": 2000, "features": 1024}}
    with pytest.raises(ParameterError) as err:
        limits.check_compare(knobs, 4096, 64, 2)
    assert err.value.parameter == "methods"
    assert str(err.value).startswith("methods: learned_kernel alone would need"), str(err.value)
    with pytest.raises(ParameterError) as err:
        limits.check_compare({"performer": {}, "lsh": {}}, 4096, 256, 16)
    best = limits.largest_fitting(
        limits.sizes_up_to(4096), lambda n: limits.compare_estimate({"performer": {}, "lsh": {}}, n, 256, 16)
    )
    assert best is not None and f"the largest n that fits is {best}." in str(err.value)


def test_error_vs_entropy_at_n_4096_is_refused_naming_n() -> None:
    # /Error_vs_entropy?n=4096 (the sidebar caps heads at 2 there) ran into the 60 s limit with no chart: its n x n
    # rows leave the CPU's caches, so the time per entry grows with n (SWEEP_CACHE_*).
    estimators = {"lsh": {}, "performer": {}, "scatterbrain": {}}
    with pytest.raises(ParameterError, match=r"the largest n that fits is (\d+)") as err:
        limits.check("n", 4096, limits.sizes_up_to(4096), lambda n: limits.sweep_estimate(estimators, n, 64, 2, 12))
    assert 2048 <= int(err.value.args[-1].split("the largest n that fits is ")[1].rstrip(".")) < 4096


def test_check_knobs_names_the_first_knob_that_can_fit() -> None:
    def cost(m: int, r: int, n: int) -> limits.Estimate:
        return limits.Estimate(0, m * r * n / 1000)

    knobs = lambda m, r, n: [  # noqa: E731
        ("m", m, [8, 64, 512], lambda x: cost(x, r, n)),
        ("redraws", r, range(1, 9), lambda x: cost(m, x, n)),
        ("n", n, [64, 128, 256], lambda x: cost(m, r, x)),
    ]
    assert limits.check_knobs(knobs(8, 1, 64)).seconds < 60
    with pytest.raises(ParameterError, match="the largest m that fits is 64"):
        limits.check_knobs(knobs(512, 1, 256))
    with pytest.raises(ParameterError, match="the largest redraws that fits is 2"):
        limits.check_knobs(knobs(8, 8, 2560))  # no m fits (even 8 is too much), 2 redraws do
    with pytest.raises(ParameterError, match="no n fits"):
        limits.check_knobs(knobs(512, 8, 10**6))


def test_the_kernels_issue_link_is_refused_and_its_defaults_run_at_once() -> None:
    from core import kernel_study as study

    # /Kernels?n=1024&d=256&heads=16&draws=5000&entry_m=1024&entry_redraws=8&att_redraws=10: the Monte Carlo is
    # refused; the attention-level panels (each its own job, under the job limit with the calibrated estimates) wait
    # for their buttons instead of starting on open.
    assert not study.kernel_mse_estimate(256, 5000).fits()
    for heavy in (
        study.entry_estimate(1024, 16, 1024, 8),
        study.trig_estimate(1024, 16, 256, (16, 64, 256)),
        study.attention_estimate(1024, 16, 10),
    ):
        assert heavy.seconds > 3
    assert not study.entry_estimate(4096, 16, 1024, 8).fits()  # four times the n: refused
    # The page's defaults (n = 256, one head, d = 16) still draw without a button (under 3 s).
    assert study.entry_estimate(256, 1, 64, 3).seconds < 3
    assert study.trig_estimate(256, 1, 16, (16, 64, 256)).seconds < 3


def test_oracle_regime_estimate_is_conservative_and_not_fifteen_times_over() -> None:
    """Robust PCA's SVDs run far above the assumed rate: the oracle regime map is charged at its own rate (the
    assumed one made the defaults 15x over and refused a map that takes about 14 s per seed)."""
    n, betas, spreads = 128, [1.0, 5.0, 20.0, 50.0], [0.1, 0.5]
    oracles = dict(sweeps.ORACLES)
    params: dict[str, dict] = {m: {} for m in oracles.values()}
    peak, seconds = measured(
        lambda: regime.averaged_regime_map(
            n=n, d=64, clusters=32, betas=betas, spreads=spreads, seeds=1, methods=oracles, fraction=1 / 8, seed=0,
            method_params=params, device=torch.device("cpu"),
        )
    )  # fmt: skip
    estimate = limits.regime_estimate(params, n, 64, len(betas), len(spreads), 1)
    assert_conservative(estimate, peak, seconds)
    assert estimate.seconds < 8 * seconds


def test_the_oracle_regime_map_at_its_defaults_is_refused_naming_the_seeds() -> None:
    params: dict[str, dict] = {m: {} for m in dict(sweeps.ORACLES).values()}
    with pytest.raises(ParameterError, match="largest seeds that fits is 1"):
        limits.check_knobs(
            [
                ("seeds", 3, range(1, 4), lambda k: limits.regime_estimate(params, 256, 64, 8, 5, k)),
                ("n", 256, limits.sizes_up_to(256), lambda n: limits.regime_estimate(params, n, 64, 8, 5, 3)),
            ]
        )
