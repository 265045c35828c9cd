"""core.regime: the regime map averaged over seeds, its standard errors and its within-noise mask."""

from __future__ import annotations

import math

import numpy as np
import pytest

from core import limits, regime, sweeps
from core.errors import ParameterError


def test_identical_methods_are_within_noise_everywhere() -> None:
    rng = np.random.default_rng(0)
    same = rng.uniform(0.1, 1.0, size=(4, 3, 5))
    stats = regime.seed_statistics({"a": same, "b": same.copy(), "c": same + 1.0})
    assert stats.within_noise.all()
    assert (stats.lead == 0).all()


def test_a_clear_cut_winner_is_not_within_noise() -> None:
    rng = np.random.default_rng(1)
    noise = rng.normal(0, 0.01, size=(5, 2, 3))
    stats = regime.seed_statistics({"a": 0.5 + noise, "b": 0.2 + noise[::-1], "c": 0.9 + noise})
    assert not stats.within_noise.any()
    assert (stats.winner == 1).all()
    np.testing.assert_allclose(stats.mean["b"], (0.2 + noise[::-1]).mean(axis=0))
    np.testing.assert_allclose(stats.stderr["a"], noise.std(axis=0, ddof=1) / np.sqrt(5))


def test_a_lead_smaller_than_the_seed_noise_is_within_noise() -> None:
    # b beats a by 0.01 on average, but the per-seed difference swings by +-0.2
    swings = np.array([0.2, -0.2, 0.21, -0.19]).reshape(4, 1, 1)
    a = np.full((4, 1, 1), 0.5)
    stats = regime.seed_statistics({"a": a, "b": a - 0.0025 - swings + swings.mean()})
    assert stats.winner[0, 0] == 1 and stats.within_noise[0, 0]


def test_one_seed_marks_only_exact_ties() -> None:
    e = np.array([[[0.1, 0.3]]])
    stats = regime.seed_statistics({"a": e, "b": np.array([[[0.2, 0.3]]])})
    assert stats.within_noise.tolist() == [[False, True]]
    assert np.isnan(stats.stderr["a"]).all()


def test_one_seed_reproduces_the_single_seed_map() -> None:
    kwargs = {"n": 64, "d": 16, "clusters": 4, "betas": [1.0, 8.0], "spreads": [0.1, 0.5], "seed": 3}
    single = sweeps.regime_map(**kwargs)
    averaged = regime.averaged_regime_map(seeds=1, **kwargs)
    for role in single.roles:
        np.testing.assert_array_equal(averaged.errors[role], single.errors[role])
    np.testing.assert_array_equal(averaged.winner, single.winner)
    np.testing.assert_array_equal(averaged.gain, single.gain)


def test_seeds_average_the_individual_maps() -> None:
    kwargs = {"n": 64, "d": 16, "clusters": 4, "betas": [2.0, 20.0], "spreads": [0.2]}
    maps = [sweeps.regime_map(seed=s, **kwargs) for s in (5, 6, 7)]
    averaged = regime.averaged_regime_map(seeds=3, seed=5, **kwargs)
    assert averaged.stats.seeds == 3
    for role in averaged.roles:
        np.testing.assert_allclose(averaged.errors[role], np.mean([m.errors[role] for m in maps], axis=0))
    rows = averaged.rows()
    assert len(rows) == 2 and {"within_noise", "stderr_sparse", "error_low_rank"} <= set(rows[0])


@pytest.mark.parametrize("bad", [0, -1, regime.MAX_SEEDS + 1, 2.5, True])
def test_bad_seed_counts_are_refused(bad: object) -> None:
    with pytest.raises(ParameterError):
        regime.averaged_regime_map(n=32, d=8, clusters=2, betas=[1.0], spreads=[0.1], seeds=bad)  # type: ignore[arg-type]


def test_the_estimate_grows_with_the_seed_count() -> None:
    methods = {m: {} for m in sweeps.ESTIMATORS.values()}
    one = limits.regime_estimate(methods, 256, 64, 8, 5, seeds=1)
    three = limits.regime_estimate(methods, 256, 64, 8, 5, seeds=3)
    assert three.seconds > 2.5 * one.seconds and three.bytes == one.bytes
    assert one == limits.sweep_estimate(methods, 256, 64, 1, 8, rows=5)
    # a map that fits with one seed may not with ten
    assert limits.regime_estimate(methods, 1024, 64, 16, 12, seeds=10).seconds > (
        limits.regime_estimate(methods, 1024, 64, 16, 12, seeds=1).seconds * 9
    )


def test_grid_is_geometric_or_linear_and_one_value_for_an_empty_range() -> None:
    np.testing.assert_allclose(regime.grid(1.0, 100.0, 3, log=True), [1.0, 10.0, 100.0])
    np.testing.assert_allclose(regime.grid(0.1, 0.5, 5, log=False), [0.1, 0.2, 0.3, 0.4, 0.5])
    assert regime.grid(2.0, 2.0, 8, log=True).tolist() == [2.0]


def test_work_estimate_counts_cells_seeds_methods_and_the_slow_rpca() -> None:
    assert regime.work_estimate(64, cells=6, seeds=3, methods=dict(sweeps.ESTIMATORS)) == 6 * 3 * 64**2 * 4
    oracles = dict(sweeps.ORACLES)
    assert "rpca" in oracles.values()
    assert regime.work_estimate(64, cells=6, seeds=3, methods=oracles) == 20 * 6 * 3 * 64**2 * (len(oracles) + 1)


def test_theorem_boundaries_are_ln_n_over_ln_d_and_ln_n() -> None:
    low, high = regime.theorem_boundaries(256, 16)
    assert low == pytest.approx(2.0) and high == pytest.approx(math.log(256))
    assert regime.theorem_boundaries(256, 1)[0] == pytest.approx(math.log(256) / math.log(2))


def test_win_counts_list_every_role() -> None:
    stats = regime.seed_statistics(
        {"sparse": np.full((1, 1, 2), 0.1), "low_rank": np.full((1, 1, 2), 0.5), "sparse_low_rank": np.ones((1, 1, 2))}
    )
    methods = {"sparse": "a", "low_rank": "b", "sparse_low_rank": "c"}
    result = regime.AveragedRegimeMap(np.array([1.0, 2.0]), np.array([0.5]), methods, stats, np.zeros((1, 2)))
    assert result.win_counts() == {"sparse": 2, "low_rank": 0, "sparse_low_rank": 0}


def test_headline_numbers_come_only_from_cells_outside_the_noise() -> None:
    # #42: "best gain of S+L 44 %" came from a cell the map marked within noise.
    from core.regime import AveragedRegimeMap

    mean = {
        "sparse": np.array([[1.0, 0.2]]),
        "low_rank": np.array([[1.0, 0.5]]),
        "sparse_low_rank": np.array([[0.4, 0.19]]),  # gain 60 % in cell 0, 5 % in cell 1
    }
    zeros = np.zeros((1, 2))
    stats = regime.SeedStatistics(
        roles=list(mean),
        mean=mean,
        stderr=dict.fromkeys(mean, zeros),
        winner=np.array([[2, 2]]),
        lead=zeros,
        lead_stderr=zeros,
        within_noise=np.array([[True, False]]),
        seeds=3,
    )
    res = AveragedRegimeMap(np.array([1.0, 2.0]), np.array([0.1]), dict.fromkeys(mean, "m"), stats, np.zeros((1, 2)))
    assert res.win_counts()["sparse_low_rank"] == 2 and res.clear_win_counts()["sparse_low_rank"] == 1
    assert abs(res.best_clear_gain() - 0.05) < 1e-9  # not the noisy cell's 60 %
