"""Performer / FAVOR+: Monte Carlo checks of the kernel estimate against Lemma 1-2 of Choromanski et al.

Draws are over seeds. With x = sqrt(beta) q, y = sqrt(beta) k and SM = exp(x.y), for iid frequencies:
    MSE_pos(m)  = (1/m) exp(|x+y|^2) SM^2 (1 - exp(-|x+y|^2))
    MSE_trig(M) = (1/M) exp(|x+y|^2) SM^-2 (1 - exp(-|x-y|^2))^2     (M features = M/2 sin/cos pairs)
"""

from __future__ import annotations

import math

import pytest
import torch

import core
from core.approximators.performer import draw_projection, kernel_estimate


def unit_vectors(count: int, d: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(count, d, generator=g, dtype=torch.float64, device="cpu")
    return (x / x.norm(dim=-1, keepdim=True)).to(torch.empty(0).device)  # torch's default device (--torch-device)


def rotate_towards(q: torch.Tensor, cosines: torch.Tensor, seed: int) -> torch.Tensor:
    """Unit keys with prescribed cosine to each unit query."""
    g = torch.Generator().manual_seed(seed)
    noise = torch.randn(q.shape, generator=g, dtype=torch.float64, device="cpu").to(q.device)
    orth = noise - (noise * q).sum(-1, keepdim=True) * q
    orth = orth / orth.norm(dim=-1, keepdim=True)
    return cosines[:, None] * q + torch.sqrt(1 - cosines[:, None] ** 2) * orth


def theory_mse(x: torch.Tensor, y: torch.Tensor, m: int, kernel: str) -> torch.Tensor:
    """Lemma 2 MSE for every pair (rows of x against rows of y), iid frequencies."""
    dot = x @ y.T
    sq_x = (x * x).sum(-1)[:, None]
    sq_y = (y * y).sum(-1)[None, :]
    plus = sq_x + sq_y + 2 * dot
    minus = sq_x + sq_y - 2 * dot
    sm = torch.exp(dot)
    if kernel == "positive":
        return torch.exp(plus) * sm**2 * (1 - torch.exp(-plus)) / m
    return torch.exp(plus) * sm**-2 * (1 - torch.exp(-minus)) ** 2 / m


def draws(
    q: torch.Tensor,
    k: torch.Tensor,
    beta: float,
    m: int,
    kernel: str,
    orthogonal: bool,
    count: int,
    first_seed: int = 0,
) -> torch.Tensor:
    """(count, n, n) kernel estimates, one per seed."""
    return torch.stack(
        [kernel_estimate(q, k, beta, m, kernel, orthogonal, seed) for seed in range(first_seed, first_seed + count)]
    )


def test_kernel_estimate_is_the_methods_unnormalized_part() -> None:
    x = core.data.sphere(12, 8, seed=1, dtype=torch.float64)
    for kernel, orthogonal, seed in (("positive", True, 0), ("positive", False, 3), ("trig", True, 5)):
        result = core.approximate(
            "performer", x.q, x.k, x.v, scale=1.5, seed=seed, features=10, kernel=kernel, orthogonal=orthogonal
        )
        estimate = kernel_estimate(x.q, x.k, 1.5, 10, kernel, orthogonal, seed)
        torch.testing.assert_close(result.parts["unnormalized"], estimate, rtol=1e-12, atol=0)
        # the dense view is that estimate row-normalised, and the output applies it to V
        torch.testing.assert_close(result.attention(), estimate / estimate.sum(-1, keepdim=True), rtol=1e-9, atol=1e-12)
        torch.testing.assert_close(result.output, result.attention() @ x.v, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize(
    ("kernel", "orthogonal"),
    [("positive", False), ("positive", True), ("trig", False)],
    ids=["pos-iid", "pos-orth", "trig"],
)
def test_unbiased_within_a_tolerance_shrinking_with_draws(kernel: str, orthogonal: bool) -> None:
    d, m, beta = 8, 8, 1.0
    q = unit_vectors(6, d, seed=10)
    k = unit_vectors(6, d, seed=11)
    truth = torch.exp(beta * q @ k.T)
    # the orthogonal estimator's MSE is below the iid one (checked below), so the iid bound is valid for it
    sigma = theory_mse(q * math.sqrt(beta), k * math.sqrt(beta), m, kernel).sqrt()
    samples = draws(q, k, beta, m, kernel, orthogonal, 256)
    errors_by_count = []
    for count in (16, 64, 256):
        mean = samples[:count].mean(0)
        tolerance = 5 * sigma / math.sqrt(count)
        assert bool(((mean - truth).abs() <= tolerance).all()), (count, float(((mean - truth).abs() / tolerance).max()))
        errors_by_count.append(float((mean - truth).abs().mean()))
    # with 16x the draws the mean error falls well below the first one (1/sqrt(count) would be 4x)
    assert errors_by_count[-1] < errors_by_count[0] / 2, errors_by_count


def test_mse_halves_when_features_double_and_matches_lemma_2() -> None:
    # small norms (|x|^2 = 0.25) keep the lognormal tails light enough for 150 draws (~10% noise)
    d, beta = 8, 0.25
    q = unit_vectors(16, d, seed=20)
    k = unit_vectors(16, d, seed=21)
    truth = torch.exp(beta * q @ k.T)
    mse = {}
    for m in (8, 16, 32):
        samples = draws(q, k, beta, m, "positive", False, 150, first_seed=1000 * m)
        mse[m] = float(((samples - truth) ** 2).mean())
        theory = float(theory_mse(q * math.sqrt(beta), k * math.sqrt(beta), m, "positive").mean())
        assert mse[m] == pytest.approx(theory, rel=0.25), (m, mse[m], theory)
    for m in (8, 16):
        assert 2 * 0.75 <= mse[m] / mse[2 * m] <= 2 * 1.25, mse


def test_orthogonal_features_have_lower_mse_than_iid() -> None:
    d, m, beta = 16, 16, 0.5
    q = unit_vectors(16, d, seed=30)
    k = unit_vectors(16, d, seed=31)
    truth = torch.exp(beta * q @ k.T)
    iid = float(((draws(q, k, beta, m, "positive", False, 200) - truth) ** 2).mean())
    orth = float(((draws(q, k, beta, m, "positive", True, 200) - truth) ** 2).mean())
    # ORF theorem: MSE_orth <= MSE_iid - 2(m-1)/(m(d+2)) (SM - exp(-(|x|^2+|y|^2)/2))^2, ~15% here
    assert orth < 0.95 * iid, (orth, iid)


def test_positive_features_beat_trig_on_small_entries_and_lose_on_large_ones() -> None:
    d, m, beta = 16, 16, 1.0
    q = unit_vectors(8, d, seed=40)
    small_k = rotate_towards(q, torch.full((8,), -0.8, dtype=torch.float64), seed=41)  # exp(q.k) ~ 0.45
    large_k = rotate_towards(q, torch.full((8,), 0.9, dtype=torch.float64), seed=42)  # exp(q.k) ~ 2.5
    keys = torch.cat([small_k, large_k])
    queries = torch.cat([q, q])  # q and k need the same length; the pairs of interest are (i, i) and (i, 8 + i)
    truth = torch.exp(beta * queries @ keys.T)
    small = torch.zeros(16, 16, dtype=torch.bool)
    small[torch.arange(8), torch.arange(8)] = True
    large = torch.zeros(16, 16, dtype=torch.bool)
    large[torch.arange(8), 8 + torch.arange(8)] = True

    def relative_mse(kernel: str) -> tuple[float, float]:
        samples = draws(queries, keys, beta, m, kernel, False, 100)
        rel = ((samples - truth) / truth) ** 2
        return float(rel.mean(0)[small].mean()), float(rel.mean(0)[large].mean())

    pos_small, pos_large = relative_mse("positive")
    trig_small, trig_large = relative_mse("trig")
    assert pos_small < trig_small / 5, (pos_small, trig_small)  # Lemma 2 ratio ~20x here
    assert trig_large < pos_large, (trig_large, pos_large)  # and the reverse on large entries


def test_trig_estimates_can_go_negative_positive_never() -> None:
    x = core.data.gaussian(64, 16, seed=2, dtype=torch.float64)
    trig = core.approximate("performer", x.q, x.k, x.v, scale=2.0, features=8, kernel="trig").parts["unnormalized"]
    pos = core.approximate("performer", x.q, x.k, x.v, scale=2.0, features=8, kernel="positive").parts["unnormalized"]
    assert float(trig.min()) < 0
    assert float(pos.min()) > 0


def test_orthogonal_projection_rows_are_orthogonal_within_blocks_with_chi_norms() -> None:
    d, m = 8, 20
    w = draw_projection(m, d, True, torch.Generator().manual_seed(0))
    assert w.shape == (m, d)
    for start in range(0, m, d):
        block = w[start : start + d]
        directions = block / block.norm(dim=-1, keepdim=True)
        gram = directions @ directions.T
        torch.testing.assert_close(gram, torch.eye(block.shape[0], dtype=torch.float64), atol=1e-10, rtol=0)
    # the norms are chi(d) distributed: E|w|^2 = d (not fixed at sqrt(d), which would bias the estimate)
    many = draw_projection(4000, d, True, torch.Generator().manual_seed(1))
    squared = (many**2).sum(-1)
    assert float(squared.mean()) == pytest.approx(d, rel=0.05)
    assert float(squared.std()) > 1.0  # chi-squared(8) has std 4; fixed norms would give 0
    iid = draw_projection(4000, d, False, torch.Generator().manual_seed(1))
    assert float(iid.mean()) == pytest.approx(0, abs=0.03) and float(iid.var()) == pytest.approx(1, rel=0.05)


@pytest.mark.parametrize("beta", [0.1, 1.0, 10.0, 100.0, 1000.0])
def test_normalised_attention_is_stochastic_and_stable_at_low_temperature(beta: float) -> None:
    x = core.data.clustered(64, 16, clusters=4, spread=0.3, seed=3)
    result = core.approximate("performer", x.q, x.k, x.v, scale=beta, features=32)
    attention = result.attention()
    assert bool(torch.isfinite(result.output).all()) and bool(torch.isfinite(attention).all())
    assert float(attention.min()) >= 0
    torch.testing.assert_close(attention.sum(-1), torch.ones(1, 64), rtol=0, atol=1e-5)


def test_cost_is_linear_in_n_and_features() -> None:
    costs = {}
    for n in (512, 1024, 2048):
        x = core.data.gaussian(n, 32, seed=0)
        costs[n] = core.approximate("performer", x.q, x.k, x.v, features=64).cost
    assert costs[1024].memory / costs[512].memory == pytest.approx(2, rel=0.05)
    assert costs[2048].memory / costs[1024].memory == pytest.approx(2, rel=0.05)
    assert costs[2048].flops / costs[1024].flops == pytest.approx(2, rel=0.05)
    assert costs[2048].memory < 2048 * 2048 / 8
    # Twice the features at the same n: twice the memory and the flops.
    wide = core.approximate("performer", x.q, x.k, x.v, features=128).cost
    assert wide.memory / costs[2048].memory == pytest.approx(2, rel=0.05)
    assert wide.flops / costs[2048].flops == pytest.approx(2, rel=0.05)
