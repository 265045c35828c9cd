"""The Sparse + low rank page's numbers in ``core.sparse_lowrank``: logits, errors, the budget rank, Fig. 4's table."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from core import budget_params, sparse_lowrank


def test_head_logits_are_the_float64_logits_measure_correction_uses() -> None:
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((2, 16, 8)).astype(np.float32)
    got = sparse_lowrank.head_logits(q, k, 0.5)
    want = 0.5 * (torch.from_numpy(q).double() @ torch.from_numpy(k).double().T)
    assert got.dtype == np.float64 and got.shape == (16, 16)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-12, atol=1e-12)


def test_relative_error_is_the_relative_frobenius_norm() -> None:
    exact = np.array([[3.0, 0.0], [0.0, 4.0]])
    assert sparse_lowrank.relative_error(exact, exact) == 0.0
    assert sparse_lowrank.relative_error(exact + np.array([[0.0, 1.0], [0.0, 0.0]]), exact) == pytest.approx(0.2)


def test_budget_rank_is_the_svd_oracles_budgeted_rank() -> None:
    assert sparse_lowrank.budget_rank(256, 64, 1 / 8) == int(budget_params("svd", 256, 64, 1 / 8)["rank"])


def test_budget_rank_without_an_svd_oracle_is_half_the_budgets_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sparse_lowrank.registry, "methods", lambda: {})
    assert sparse_lowrank.budget_rank(256, 64, 1 / 8) == 16
    assert sparse_lowrank.budget_rank(4, 64, 1 / 8) == 1


def test_singular_values_are_float64_and_descending() -> None:
    matrix = np.diag([1.0, 3.0, 2.0]).astype(np.float32)
    got = sparse_lowrank.singular_values(matrix)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, [3.0, 2.0, 1.0])


def test_fig4_table_has_one_row_per_bin_and_one_mse_and_stderr_column_per_method() -> None:
    res = sparse_lowrank.fig4_measure(8, 8, 1, 4, 1, 32, False, 0)
    curves = sparse_lowrank.fig4_curves(res, 8, 8, bins=5)
    table = curves.table()
    methods = ("performer", "lsh", "scatterbrain")
    assert list(table) == ["qk_bin_centre", "collision_rate", *(f"mse_{m}" for m in methods),
                           *(f"stderr_{m}" for m in methods)]  # fmt: skip
    assert all(len(column) == 5 for column in table.values())
    np.testing.assert_array_equal(table["mse_lsh"], curves.measured["lsh"])
