"""core.metrics: entropies, errors and KL on matrices whose values are known in closed form."""

from __future__ import annotations

import math

import pytest
import torch

from core import metrics


def random_stochastic(shape: tuple[int, ...], seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.softmax(torch.randn(*shape, generator=g, dtype=torch.float64), dim=-1)


@pytest.mark.parametrize("n", [1, 2, 7, 64])
def test_entropy_of_uniform_rows_is_log_n(n: int) -> None:
    uniform = torch.full((n, n), 1.0 / n, dtype=torch.float64)
    torch.testing.assert_close(metrics.row_entropy(uniform), torch.full((n,), math.log(n), dtype=torch.float64))
    assert float(metrics.mean_row_entropy(uniform)) == pytest.approx(math.log(n), abs=1e-12)


def test_entropy_of_one_hot_rows_is_zero() -> None:
    one_hot = torch.eye(9, dtype=torch.float64)[torch.randperm(9, generator=torch.Generator().manual_seed(0))]
    assert float(metrics.row_entropy(one_hot).abs().max()) == 0.0
    assert float(metrics.mean_row_entropy(one_hot)) == 0.0


def test_entropy_matches_formula_and_keeps_leading_dims() -> None:
    p = random_stochastic((2, 3, 5, 6), seed=1)
    expected = -(p * p.log()).sum(-1)
    torch.testing.assert_close(metrics.row_entropy(p), expected)
    assert metrics.mean_row_entropy(p).shape == (2, 3)
    torch.testing.assert_close(metrics.mean_row_entropy(p), expected.mean(-1))
    # between 0 and ln n
    assert float(metrics.row_entropy(p).min()) > 0
    assert float(metrics.row_entropy(p).max()) < math.log(6)


def test_entropy_handles_zeros_without_nan() -> None:
    p = torch.tensor([[0.5, 0.5, 0.0, 0.0]], dtype=torch.float64)
    assert float(metrics.row_entropy(p)[0]) == pytest.approx(math.log(2))


def test_kl_of_identical_is_zero_and_positive_otherwise() -> None:
    p = random_stochastic((4, 10, 10), seed=2)
    q = random_stochastic((4, 10, 10), seed=3)
    assert float(metrics.mean_row_kl(p, p).abs().max()) < 1e-12
    kl = metrics.mean_row_kl(p, q)
    assert kl.shape == (4,)
    expected = (p * (p.log() - q.log())).sum(-1).mean(-1)
    torch.testing.assert_close(kl, expected)
    assert float(kl.min()) > 0


def test_kl_with_dropped_entries_is_large_but_finite() -> None:
    p = torch.full((1, 4), 0.25, dtype=torch.float64)
    q = torch.tensor([[0.5, 0.5, 0.0, 0.0]], dtype=torch.float64)
    kl = float(metrics.mean_row_kl(p, q))
    assert math.isfinite(kl)
    assert kl > 5  # log(0.25 / 1e-12) contributions dominate


def test_relative_frobenius_error() -> None:
    exact = random_stochastic((3, 8, 8), seed=4)
    assert float(metrics.relative_frobenius_error(exact, exact).max()) == 0.0
    torch.testing.assert_close(metrics.relative_frobenius_error(torch.zeros_like(exact), exact), torch.ones(3).double())
    torch.testing.assert_close(metrics.relative_frobenius_error(1.5 * exact, exact), torch.full((3,), 0.5).double())
    torch.testing.assert_close(metrics.relative_output_error(2 * exact, exact), torch.ones(3).double())


def test_max_abs_and_entry_errors() -> None:
    exact = torch.zeros(2, 3, 3, dtype=torch.float64)
    approx = exact.clone()
    approx[1, 2, 0] = -0.7
    approx[0, 0, 1] = 0.2
    torch.testing.assert_close(metrics.max_abs_error(approx, exact), torch.tensor([0.2, 0.7], dtype=torch.float64))
    torch.testing.assert_close(metrics.entry_errors(approx, exact), approx - exact)


def test_summary_keys_and_values() -> None:
    exact = random_stochastic((2, 6, 6), seed=5)
    v = torch.randn(2, 6, 3, dtype=torch.float64)
    out = metrics.summary(exact, exact, exact @ v, exact @ v)
    assert set(out) >= {"attention_error", "output_error", "max_abs_error", "row_kl", "entropy"}
    assert out["attention_error"] == 0.0 and out["output_error"] == 0.0 and out["max_abs_error"] == 0.0
    assert abs(out["row_kl"]) < 1e-12
    assert out["entropy"] == pytest.approx(float(metrics.mean_row_entropy(exact).mean()))
    assert all(isinstance(value, float) for value in out.values())


def test_entropy_clips_negative_entries_of_signed_approximations() -> None:
    """A truncated SVD can put small negative numbers in a row; they count as 0, as documented, not as NaN/-inf."""
    p = torch.tensor([[0.6, 0.5, -0.1], [0.5, 0.5, 0.0]], dtype=torch.float64)
    expected = torch.tensor([-(0.6 * math.log(0.6) + 0.5 * math.log(0.5)), math.log(2)], dtype=torch.float64)
    torch.testing.assert_close(metrics.row_entropy(p), expected)
