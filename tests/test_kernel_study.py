"""The Kernels page's study functions (core.kernel_study) against the Performer paper's claims (Choromanski et al.)
and the trainable-kernel notes."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from core import data
from core import kernel_study as study
from core import kernels as K
from core.cancel import Cancelled, CancelToken, active


def by_label(curves: list[K.KernelMSECurve]) -> dict[str, K.KernelMSECurve]:
    return {c.label: c for c in curves}


def test_positive_features_are_unbiased_for_the_softmax_kernel() -> None:
    x, y = K.pair_at(16, 1.0, math.radians(60))
    for m in (4, 64):
        mc = K.kernel_mse_monte_carlo(x, y, m, "positive", False, draws=4000, seed=1)
        assert abs(mc.mean - mc.true_value) < 4 * mc.standard_error_of_mean
        assert (mc.estimates > 0).all()  # and never negative


def test_measured_mse_follows_lemma2_and_falls_like_one_over_m() -> None:
    curves = by_label(study.kernel_mse_at_pair(16, 1.0, math.radians(145), draws=1500, seed=0, features=(4, 64)))
    for label in ("positive iid", "trig iid"):
        measured, lemma2 = curves[label].measured, curves[label].theory
        for a, b in zip(measured, lemma2, strict=True):
            assert 0.6 < a / b < 1.6  # Lemma 2 is exact for iid features
        assert measured[1] < measured[0] / 6  # 16x the features: about 1/16 the MSE


def test_trig_features_lose_on_small_kernel_values_and_win_on_large_ones() -> None:
    """The trig MSE grows like SM^-2 as SM = exp(x.y) -> 0 (large negative logits); positive features shrink there."""
    far = by_label(study.kernel_mse_at_pair(16, 1.5, math.radians(170), draws=1000, seed=0, features=(16,)))
    assert far["trig iid"].measured[0] > 10 * far["positive iid"].measured[0]
    near = by_label(study.kernel_mse_at_pair(16, 1.5, math.radians(5), draws=1000, seed=0, features=(16,)))
    assert near["trig iid"].measured[0] < near["positive iid"].measured[0]
    assert K.mse_ratio(math.radians(170), 1.5) > 1 > K.mse_ratio(math.radians(5), 1.5)


def test_theory_curves_are_the_monte_carlo_closed_forms() -> None:
    theory = study.kernel_mse_theory(16, 1.0, 2.0, features=(4, 32))
    measured = study.kernel_mse_at_pair(16, 1.0, 2.0, draws=10, seed=0, features=(4, 32))
    for t, m in zip(theory, measured, strict=True):
        assert t.label == m.label and t.lemma2 == m.theory and t.bound == m.bound
        assert t.true_value == pytest.approx(m.true_value)
    positive_orthogonal = next(t for t in theory if t.label == "positive orthogonal")
    assert positive_orthogonal.bound[0] is not None and positive_orthogonal.bound[1] is None  # the bound needs m <= d


def test_ratio_map_is_red_at_large_angles_and_blue_at_small_ones() -> None:
    ratio = study.mse_ratio_map(angles=30, lengths=10)
    assert ratio.log10_ratio.shape == (10, 30)
    assert (ratio.log10_ratio[:, -1] > 0).all()  # near pi: positive features more accurate
    assert ratio.log10_ratio[-1, 0] < 0  # long vectors at a small angle: trig more accurate


def test_trig_normalisers_go_non_positive_and_more_often_at_low_temperature() -> None:
    inputs = data.gaussian(128, 16, seed=0)
    frac = study.trig_fraction(inputs.q, inputs.k, [16], orthogonal=True, seed=0, taus=(0.5, 5.0))
    assert frac.shape == (1, 2)
    assert frac[0, 0] > 0.1 and frac[0, 0] > frac[0, 1]


def test_attention_study_reports_every_variant_and_elu_and_gets_better_with_m() -> None:
    inputs = data.gaussian(64, 16, seed=0)
    seen: list[float] = []
    res = study.attention_study(
        inputs.q, inputs.k, inputs.v, 0.5, redraws=2, seed=0, features=(8, 256), progress=lambda f, _: seen.append(f)
    )
    assert [c.label for c in res.curves] == ["positive iid", "positive orthogonal", "trig iid", "trig orthogonal"]
    positive = res.curves[0]
    assert positive.tv_median[1] < positive.tv_median[0]  # more features, closer to softmax
    assert 0 < res.elu_tv < 1
    assert seen[0] == 0.0 and len(seen) == 8
    assert study.attention_seconds(256, 1, 4) > study.attention_seconds(64, 1, 1) > 0


def test_attention_study_stops_when_cancelled() -> None:
    inputs = data.gaussian(32, 8, seed=0)
    token = CancelToken()
    token.cancel("stop")
    with active(token), pytest.raises(Cancelled):
        study.attention_study(inputs.q, inputs.k, inputs.v, 1.0, redraws=1, seed=0, features=(8,))


def test_fitted_kernel_beats_elu_on_its_input_and_transfers() -> None:
    draws = [data.gaussian(64, 8, seed=s) for s in (0, 1)]
    fit_on, fresh = (study.QKV(torch.as_tensor(g.q), torch.as_tensor(g.k), torch.as_tensor(g.v)) for g in draws)
    res = study.compare_on_inputs(fit_on, fresh, 1.0, 8, ["ff"], steps=60, penalty=0.0, lr=0.05, seed=0)
    rows = {row["method"].split(" (")[0]: row for row in res.rows}
    assert rows["learned ff"]["tv"] < rows["ELU+1 linear"]["tv"]
    assert np.isfinite(rows["learned ff"]["tv_heldout"])
    assert rows["learned ff"]["tv_heldout"] < rows["ELU+1 linear"]["tv_heldout"]
    assert len(res.curves["ff"]) == 60 and res.curves["ff"][-1] < res.curves["ff"][0]
