"""core.kernels: the Performer feature study against the notes' checkable claims E1-E12."""

from __future__ import annotations

import math

import pytest
import torch

import core
from core import kernels as K
from core.errors import ParameterError

# Pairs (length, angle) at d = 16 spanning small and moderate kernel values; x = sqrt(beta) q already.
PAIRS = [(1.0, 2.5), (1.0, 2.9), (0.7, 1.2), (0.5, 0.3)]


@pytest.mark.parametrize("orthogonal", [False, True])
@pytest.mark.parametrize("kernel", ["positive", "trig"])
@pytest.mark.parametrize(("length", "angle"), PAIRS)
def test_raw_kernel_estimates_are_unbiased(kernel: str, orthogonal: bool, length: float, angle: float) -> None:
    # E1 (positive) and the raw trig kernel: E[phi(x).phi(y)] = exp(x.y), with iid or orthogonal frequencies.
    x, y = K.pair_at(16, length, angle)
    mc = K.kernel_mse_monte_carlo(x, y, 16, kernel, orthogonal, draws=20_000, seed=11)
    assert mc.true_value == pytest.approx(math.exp(length**2 * math.cos(angle)), rel=1e-12)
    assert abs(mc.mean - mc.true_value) < 4.5 * mc.standard_error_of_mean + 1e-12, (mc.mean, mc.true_value)


def test_a_biased_estimator_would_be_caught() -> None:
    # The unbiasedness check has power: scaling the estimates by 3% is far outside the tolerance.
    x, y = K.pair_at(16, 1.0, 2.5)
    mc = K.kernel_mse_monte_carlo(x, y, 16, "positive", False, draws=20_000, seed=11)
    assert abs(1.03 * mc.mean - mc.true_value) > 4.5 * mc.standard_error_of_mean


@pytest.mark.parametrize("kernel", ["positive", "trig"])
@pytest.mark.parametrize(("length", "angle"), [(1.0, 2.5), (1.0, 2.9), (0.7, 1.2)])
@pytest.mark.parametrize("features", [8, 64])
def test_iid_mse_follows_lemma2(kernel: str, length: float, angle: float, features: int) -> None:
    # E3 / E11: measured MSE of iid features matches Lemma 2 (which falls as 1/M) within Monte Carlo error.
    x, y = K.pair_at(16, length, angle)
    mc = K.kernel_mse_monte_carlo(x, y, features, kernel, False, draws=20_000, seed=5)
    theory = float(K.lemma2_mse(x, y, features, kernel))
    assert mc.mse == pytest.approx(theory, rel=0.08), (mc.mse, theory)


def test_lemma2_matches_the_notes_values() -> None:
    # C1 in the notes (per frequency): SM = 0.449 pair, 16 frequencies: trig 0.2185, positive 6.149e-3.
    x, y = K.pair_at(16, 1.0, 2.5)
    assert float(K.lemma2_mse(x, y, 32, "trig")) == pytest.approx(0.2185, rel=2e-3)  # 32 features = 16 frequencies
    assert float(K.lemma2_mse(x, y, 16, "positive")) == pytest.approx(6.149e-3, rel=2e-3)


def test_mse_ratio_closed_form() -> None:
    # E6: r(phi, l) = MSE_trig / MSE_pos; crosses 1 near 1.74 rad at l = 1, r(pi/2, 1) ~ 0.43, r(3pi/4, 1) ~ 17.8.
    assert K.mse_ratio(math.pi / 2, 1.0) == pytest.approx(0.43, abs=0.01)
    assert K.mse_ratio(3 * math.pi / 4, 1.0) == pytest.approx(17.8, rel=0.02)
    assert K.mse_ratio(1.70, 1.0) < 1 < K.mse_ratio(1.78, 1.0)
    assert K.mse_ratio(0.95 * math.pi, 2.0) > 1e7
    # Consistent with Lemma 2 at an equal number of frequencies (trig with 2m features has m frequencies).
    for length, angle in PAIRS:
        x, y = K.pair_at(8, length, angle)
        ratio = float(K.lemma2_mse(x, y, 32, "trig") / K.lemma2_mse(x, y, 16, "positive"))
        assert ratio == pytest.approx(K.mse_ratio(angle, length), rel=1e-9)


def test_orthogonal_features_have_lower_mse_on_average() -> None:
    # E8: at m <= d, orthogonal frequencies lower the kernel MSE; the ORF theorem's bound holds.
    ratios = []
    for length, angle in PAIRS:
        x, y = K.pair_at(16, length, angle)
        iid = K.kernel_mse_monte_carlo(x, y, 16, "positive", False, draws=20_000, seed=2).mse
        orth = K.kernel_mse_monte_carlo(x, y, 16, "positive", True, draws=20_000, seed=3).mse
        bound = float(K.orthogonal_mse_bound(x, y, 16))
        assert orth <= bound * 1.08, (orth, bound)
        ratios.append(orth / iid)
    assert sum(ratios) / len(ratios) < 0.95, ratios
    assert max(ratios) < 1.05


def test_kernel_mse_curves_shape() -> None:
    x, y = K.pair_at(16, 1.0, 2.5)
    curves = K.kernel_mse_curves(x, y, [4, 16, 64], draws=3000)
    assert [c.label for c in curves] == ["positive iid", "positive orthogonal", "trig iid", "trig orthogonal"]
    for c in curves:
        assert c.measured[0] > c.measured[-1]  # MSE falls with m
        assert c.theory[0] == pytest.approx(16 * c.theory[-1], rel=1e-9)  # exactly 1/M
    assert curves[1].bound[1] is not None and curves[1].bound[2] is None  # bound only for m <= d


def test_entry_errors_positive_wins_on_small_entries_trig_on_large() -> None:
    # E4 / E5 (notes C4: tau = 2, M = 64, d = 16): small entries pos ~0.3 vs trig ~5; large entries trig wins.
    x = core.data.gaussian(256, 16, seed=0)
    bins = K.entry_error_by_size(x.q, x.k, 0.5, 64, redraws=3)
    pos, trig = bins.medians["positive iid"], bins.medians["trig iid"]
    assert bins.counts[0] > 0 and bins.counts[-1] > 0
    assert pos[0] < 0.6 and trig[0] > 2.0 and trig[0] > 5 * pos[0]
    assert bins.medians["trig orthogonal"][-1] < bins.medians["positive orthogonal"][-1]
    assert trig[0] > trig[-1]  # trig's relative error falls steeply with the entry size
    assert len(bins.bin_labels()) == len(bins.counts) == 6


def test_trig_normalisers_go_nonpositive_at_low_temperature() -> None:
    # E7: ~0% of rows at tau = 4, tens of percent at tau = 0.5 (scale = 1 / tau on gaussian inputs).
    x = core.data.gaussian(256, 16, seed=0)
    taus = [4.0, 1.0, 0.5]
    frac = K.trig_nonpositive_fraction(x.q, x.k, [1 / t for t in taus], [16, 64], redraws=3)
    assert frac.shape == (2, 3)
    assert float(frac[:, 0].max()) < 0.02
    assert float(frac[0, 2]) > 0.3
    assert bool((frac[:, 0] <= frac[:, 1]).all() and (frac[:, 1] <= frac[:, 2] + 0.02).all())
    # Positive features never do: their normaliser is a sum of positive terms.
    approx = core.approximate("performer", x.q, x.k, x.v, scale=2.0, features=16, kernel="positive")
    assert bool((approx.attention() >= 0).all())


def test_attention_error_falls_with_features_and_rises_as_temperature_falls() -> None:
    # E11 / E12 at the attention level.
    x = core.data.gaussian(256, 16, seed=1)
    variants = [("positive", True)]
    hot = K.attention_error_vs_features(x.q, x.k, x.v, 0.25, [16, 256], redraws=3, variants=variants)[0]
    cold = K.attention_error_vs_features(x.q, x.k, x.v, 1.0, [16, 256], redraws=3, variants=variants)[0]
    assert hot.tv_median[1] < 0.6 * hot.tv_median[0]
    assert cold.tv_median[0] > hot.tv_median[0]
    assert hot.tv_low[0] <= hot.tv_median[0] <= hot.tv_high[0]


def test_normalised_favor_is_biased_toward_uniform() -> None:
    # E2: the ratio estimator shrinks large entries and inflates small ones; the raw kernel stays unbiased (E1).
    x = core.data.gaussian(64, 8, seed=2)
    exact = core.approximate("exact", x.q, x.k, x.v, scale=1.0).attention().double()
    mean = torch.zeros_like(exact)
    redraws = 150
    for seed in range(redraws):
        mean += core.approximate("performer", x.q, x.k, x.v, scale=1.0, seed=seed, features=4).attention().double()
    mean /= redraws
    relative = (mean - exact) / exact
    n = exact.shape[-1]
    assert float(relative[exact > 2 / n].mean()) < -0.2
    assert float(relative[exact < 0.5 / n].mean()) > 0.3


def test_bad_input_is_refused() -> None:
    x, y = K.pair_at(4, 1.0, 1.0)
    with pytest.raises(ParameterError, match="kernel"):
        K.kernel_mse_monte_carlo(x, y, 4, "cosine", False)
    with pytest.raises(ParameterError, match="features"):
        K.kernel_mse_monte_carlo(x, y, 0, "positive", False)
    with pytest.raises(ParameterError, match="draws"):
        K.kernel_mse_monte_carlo(x, y, 4, "positive", False, draws=K.MAX_DRAWS + 1)
    with pytest.raises(ParameterError, match="features"):
        K.orthogonal_mse_bound(x, y, 8)
