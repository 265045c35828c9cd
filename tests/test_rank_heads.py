"""core.rank_heads: Fact 1's construction, reference lines, parameter counts, input limits, and the trained
rank separation of "On the Benefits of Rank in Attention Layers" (notes §5 claims 1, 3, 5, 6, 7, 9, 10)."""

from __future__ import annotations

import math

import pytest
import torch

from core import rank_heads as rh
from core.errors import ParameterError

# ---------------------------------------------------------------------------------------------- Fact 1


@pytest.mark.parametrize(
    ("d", "n_points", "distribution"), [(16, 2, "orthonormal"), (16, 16, "uniform"), (5, 64, "uniform")]
)
def test_hardmax_full_rank_head_is_exact(d: int, n_points: int, distribution: str) -> None:
    # Claim 1: V = I, K Q^T = I with hardmax returns the nearest point exactly, for any d and N.
    error = rh.full_rank_construction(d, n_points, math.inf, samples=4000, distribution=distribution)  # type: ignore[arg-type]
    assert error == 0.0


def test_hardmax_farthest_and_biased_constructions_are_exact() -> None:
    # K Q^T = -I gives the farthest point; adding the bias to the scores gives the biased target (Fact 3).
    assert rh.full_rank_construction(8, 6, math.inf, samples=3000, target="farthest") == 0.0
    assert rh.full_rank_construction(8, 6, math.inf, samples=3000, target="biased") == 0.0


def test_softmax_construction_error_falls_like_one_over_c() -> None:
    # Claim 7 (d = 16, N = 16): 0.18 / 0.042 / 0.011 / 0.0025 at c = 16 / 64 / 256 / 1024, c * MSE -> ~2.6.
    cs = [1.0, 4.0, 16.0, 64.0, 256.0, 1024.0]
    results = rh.construction_sweep(16, 16, cs, samples=20_000, seed=3)
    errors = [r.error for r in results]
    assert all(a > b for a, b in zip(errors, errors[1:], strict=False)), errors
    for c, expected, err in zip(cs[2:], [0.177, 0.042, 0.0106, 0.0025], errors[2:], strict=True):
        assert err == pytest.approx(expected, rel=0.12), (c, err)
    products = [c * e for c, e in zip(cs, errors, strict=True)]
    assert products[-1] == pytest.approx(products[-2], rel=0.15)  # ~ 1/c at large c
    assert 2.0 < products[-1] < 3.2
    # Low-entropy regime: error ~ 0.2 x entropy (nats).
    assert results[-1].error / results[-1].entropy == pytest.approx(0.2, rel=0.35)
    assert results[-1].entropy < results[0].entropy


def test_construction_is_seeded() -> None:
    a = rh.full_rank_construction(8, 4, 10.0, samples=500, seed=7)
    b = rh.full_rank_construction(8, 4, 10.0, samples=500, seed=7)
    c = rh.full_rank_construction(8, 4, 10.0, samples=500, seed=8)
    assert a == b and a != c


# ---------------------------------------------------------------------------------------------- reference lines


def test_midpoint_predictor_has_error_one_half_on_orthonormal_pairs() -> None:
    # Claim 3: for N = 2 orthonormal targets, predicting (x1 + x2) / 2 gives exactly 0.5; zero gives 1.
    gen = torch.Generator().manual_seed(0)
    x, y = rh.sample_points(5000, 16, 2, "orthonormal", gen)
    truth = rh.target_points(x, y, "nearest")
    midpoint = x.mean(1)
    assert float(((midpoint - truth) ** 2).sum(-1).mean()) == pytest.approx(0.5, abs=1e-12)
    assert float((truth**2).sum(-1).mean()) == pytest.approx(1.0, abs=1e-12)
    assert rh.midpoint_error(2) == 0.5
    assert rh.midpoint_error(4) == 0.75


def test_orthonormal_samples_are_orthonormal() -> None:
    x, y = rh.sample_points(64, 12, 5, "orthonormal", torch.Generator().manual_seed(1))
    gram = x @ x.transpose(1, 2)
    assert torch.allclose(gram, torch.eye(5, dtype=x.dtype).expand_as(gram), atol=1e-12)
    assert torch.allclose(y.norm(dim=-1), torch.ones(64, dtype=y.dtype))


@pytest.mark.parametrize(("d", "floor"), [(8, 0.161), (16, 0.172), (32, 0.177), (64, 0.179)])
def test_degree1_floor_values(d: int, floor: float) -> None:
    # Claim 5.
    assert rh.degree1_floor(d) == pytest.approx(floor, abs=6e-4)


def test_degree1_floor_limit_and_mean_abs_inner_product() -> None:
    assert rh.degree1_floor(100_000) == pytest.approx(0.5 * (1 - 2 / math.pi), abs=1e-5)
    # E|x^T y| against Monte Carlo at d = 10.
    gen = torch.Generator().manual_seed(2)
    a = torch.randn(200_000, 10, generator=gen, dtype=torch.float64)
    b = torch.randn(200_000, 10, generator=gen, dtype=torch.float64)
    mc = float(((a / a.norm(dim=1, keepdim=True)) * (b / b.norm(dim=1, keepdim=True))).sum(1).abs().mean())
    assert rh.mean_abs_inner_product(10) == pytest.approx(mc, rel=5e-3)
    assert rh.mean_abs_inner_product(2) == pytest.approx(2 / math.pi, rel=1e-12)


def test_parameter_count_matches_the_papers_bookkeeping() -> None:
    # Claim 6: r d H = d^2 when H = d / r; d^2.5 and d^3 are H = 8 d / r and 64 d / r at d = 64.
    for r in (1, 2, 4, 8, 16, 32, 64):
        assert rh.parameter_count(64, r, 64 // r) == 64**2
        assert rh.parameter_count(64, r, 8 * 64 // r) == 64**2.5
        assert rh.parameter_count(64, r, 64 * 64 // r) == 64**3
        assert rh.heads_for_budget(64, r, 1.5) == 8 * 64 // r
    assert rh.parameter_count(16, 3, 5) == 16 * 3 * 5
    assert rh.trained_parameter_count(16, 4, 8) == 8 * (2 * 16 * 4 + 16 * 16) + 1
    assert rh.trained_parameter_count(16, 4, 8, "biased", 3) == 8 * (2 * 16 * 4 + 16 * 16) + 1 + 8 * 3


def test_theorem_shapes_are_monotone() -> None:
    # Claim 15: increase in d, decrease in r, increase as eps falls.
    assert rh.theorem2_high_accuracy_shape(32, 2) > rh.theorem2_high_accuracy_shape(16, 2)
    assert rh.theorem2_high_accuracy_shape(32, 2) > rh.theorem2_high_accuracy_shape(32, 4)
    assert rh.theorem2_high_dimension_shape(64, 1, 0.1) > rh.theorem2_high_dimension_shape(64, 1, 0.2)
    assert rh.theorem2_high_dimension_shape(64, 1, 0.2) > rh.theorem2_high_dimension_shape(64, 4, 0.2)
    assert rh.theorem4_shape(64, 32) > rh.theorem4_shape(64, 48)


# ---------------------------------------------------------------------------------------------- input limits


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"d": 1}, "d"),
        ({"d": rh.MAX_D + 1}, "d"),
        ({"n_points": 1}, "n_points"),
        ({"n_points": rh.MAX_POINTS + 1}, "n_points"),
        ({"rank": 0}, "rank"),
        ({"rank": 17}, "rank"),
        ({"heads": rh.MAX_HEADS + 1}, "heads"),
        ({"steps": rh.MAX_STEPS + 1}, "steps"),
        ({"steps": 0}, "steps"),
        ({"target": "median"}, "target"),
        ({"n_points": 32, "distribution": "orthonormal"}, "n_points"),
    ],
)
def test_train_refuses_bad_input(kwargs: dict, name: str) -> None:
    args = {"d": 16, "n_points": 2, "rank": 4, "heads": 2, "steps": 5} | kwargs
    with pytest.raises(ParameterError) as info:
        rh.train(**args)
    assert info.value.parameter == name
    assert str(info.value).startswith(name)


def test_grid_limits_are_named() -> None:
    with pytest.raises(ParameterError, match="limit is 4"):
        rh.check_grid(16, 2, [1, 2, 4], [1, 2], 10, max_cells=4)
    with pytest.raises(ParameterError, match="multiply-adds"):
        rh.check_grid(64, 2, [1], [1024], rh.MAX_STEPS)
    cells = rh.check_grid(16, 2, [1, 16], [1, 4], 10)
    assert cells == [(1, 1), (1, 4), (16, 1), (16, 4)]


def test_train_is_seeded_and_reports_a_curve() -> None:
    a = rh.train(8, 2, 2, 2, 20, seed=1, batch=64, eval_every=5, test_samples=512)
    b = rh.train(8, 2, 2, 2, 20, seed=1, batch=64, eval_every=5, test_samples=512)
    c = rh.train(8, 2, 2, 2, 20, seed=2, batch=64, eval_every=5, test_samples=512)
    assert a.curve == b.curve and a.error == b.error
    assert a.curve != c.curve
    assert a.curve_steps == [5, 10, 15, 20] and len(a.train_loss) == 20
    assert a.error == a.curve[-1]
    assert a.device.startswith("cpu")


def test_progress_and_grid() -> None:
    seen: list[tuple[int, int]] = []
    grid = rh.train_grid(
        8, 2, [1, 8], [1, 2], 4, batch=32, test_samples=256, progress=lambda i, n, cell: seen.append((i, n))
    )
    assert set(grid) == {(1, 1), (1, 2), (8, 1), (8, 2)}
    assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)]


# ---------------------------------------------------------------------------------------------- trained separation

SEPARATION_STEPS = 1000  # batch 512: about 4 s of CPU for the full-rank head, ~15 s for r = 4, H = 64


@pytest.mark.slow
def test_rank_separation_at_d16() -> None:
    # Claims 9-10 (d = 16, N = 2 orthonormal): one full-rank head learns the target (< 0.02) while low rank with
    # up to 16 d / r heads stays on the degree-1 plateau (> 0.15) on the same step and batch budget.
    full = rh.train(16, 2, 16, 1, SEPARATION_STEPS, seed=0)
    assert full.error < 0.02, full.error
    assert full.temperature > 5  # it learned a sharp (near-hardmax) head, K Q^T ~ c I
    assert full.kq_angle_deg[0] < 30
    low = {cell: rh.train(16, 2, *cell, SEPARATION_STEPS, seed=0) for cell in [(4, 64), (1, 16), (2, 8)]}
    floor = rh.degree1_floor(16)
    for (rank, heads), result in low.items():
        assert result.error > 0.15, (rank, heads, result.error)
        assert result.error > 0.9 * floor
        assert result.error > 10 * full.error
        # And it did learn something: below the midpoint baseline.
        assert result.error < rh.midpoint_error(2)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_training_runs_on_cuda() -> None:
    result = rh.train(16, 2, 16, 1, 300, device="cuda")
    assert result.device.startswith("cuda")
    assert result.error < 0.1
