"""core.vcc_study: what the VCC page computes, checked against the counts and formulas of shared/papers/vcc.md."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from core import data, vcc_study, vcc_tree
from core.approximators.vcc import cost_model

N, D, N_P, K = 64, 8, 8, 8  # n_c = 56 = 7 blocks of 8: no padding, so r = n_p + n_c/k + h(k - 1) holds exactly


@pytest.fixture(scope="module")
def qkv() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    x = data.clustered(N, D, clusters=4, spread=0.3, seed=3, heads=2, dtype=torch.float64)
    return x.q, x.k, x.v


def two_level(h: int, **extra: object) -> dict[str, object]:
    return {
        "mode": "two_level",
        "selector": "score",
        "block_size": K,
        "fine_blocks": h,
        "scale_correction": True,
        "vip": N_P,
        **extra,
    }


# ----------------------------------------------------------------------------- settings helpers


def test_parse_positions_keeps_valid_positions_and_names_the_rest() -> None:
    parsed = vcc_study.parse_positions("0, 5; x, 99, 5, -1,, ", 64)
    assert parsed.positions == [0, 5]
    assert parsed.ignored == ["x", "99", "-1"]
    assert vcc_study.parse_positions("", 10).positions == []


def test_block_sizes_never_exceed_the_compressed_tokens() -> None:
    assert vcc_study.block_sizes(10) == [1, 2, 4, 8]
    assert vcc_study.block_sizes(0) == [1]
    assert vcc_study.block_sizes(10_000)[-1] == 128


@pytest.mark.parametrize("maximum", [0, 1, 4, 7, 64])
def test_sweep_block_counts_cover_zero_to_the_maximum_with_unit_then_growing_steps(maximum: int) -> None:
    grid = vcc_study.sweep_block_counts(maximum)
    assert grid[0] == 0 and grid[-1] == maximum
    assert grid == sorted(set(grid))
    assert [h for h in grid if h <= 4] == list(range(min(maximum, 4) + 1))
    for before, after in zip(grid, grid[1:], strict=False):
        assert after <= max(before + 1, math.ceil(before * 1.5))
    assert vcc_study.sweep_runs(maximum) == 2 * len(vcc_tree.SELECTORS) * len(grid)


def test_relative_error_is_per_head_and_zero_for_equal_inputs() -> None:
    exact = torch.ones(2, 3, 4)
    approx = exact.clone()
    approx[1] *= 1.5
    err = vcc_study.relative_error(approx, exact)
    assert err.shape == (2,)
    assert err[0] == 0 and err[1] == pytest.approx(0.5)


# ----------------------------------------------------------------------------- the page's view


@pytest.mark.parametrize("h", [0, 2, 7])
def test_view_tree_sizes_add_up_and_the_update_rewrites_j_plus_internal(qkv, h: int) -> None:
    view = vcc_study.vcc_view(*qkv, 1.0, two_level(h), seed=0, head=1)
    leaves, internal = vcc_study.tree_counts(view.nodes)
    assert int(view.r[1]) == N_P + leaves == N_P + (N - N_P) // K + h * (K - 1)
    # Algorithm 2 rewrites exactly |J| + #internal entries of T(C) (vcc.md section 2.7).
    assert view.n_changed == leaves + internal == sum(e.changed for e in view.storage)
    assert view.n_entries == len(view.storage)
    for level in {e.level for e in view.storage}:
        assert sum(e.count for e in view.storage if e.level == level) == N - N_P  # each level partitions C
    assert sorted(view.positions_c + view.vip) == list(range(N))
    assert view.attention.shape == view.exact.shape == (N, N)
    assert view.update_gap < 1e-9  # tree update == explicit decompression


def test_tree_mode_with_padding_counts_pass_through_nodes_as_internal(qkv) -> None:
    # n_c = 56 pads to a 64-slot dyadic tree: nodes holding padding pass through (free) and are still rewritten.
    view = vcc_study.vcc_view(*qkv, 1.0, dict(two_level(2), mode="tree"), seed=0, head=0)
    leaves, internal = vcc_study.tree_counts(view.nodes)
    assert any(node.status == "pass" for node in view.nodes)
    assert int(view.r[0]) == N_P + leaves
    assert view.n_changed == leaves + internal == sum(e.changed for e in view.storage)


def test_view_at_full_budget_is_exact(qkv) -> None:
    view = vcc_study.vcc_view(*qkv, 1.0, two_level((N - N_P) // K), seed=0, head=0)
    assert np.all(view.vip_error < 1e-10) and np.all(view.all_error < 1e-10)
    np.testing.assert_allclose(view.attention, view.exact, atol=1e-10)


def test_view_summary_numbers_per_head_and_shared(qkv) -> None:
    view = vcc_study.vcc_view(*qkv, 1.0, two_level(2), seed=0, head=1)
    assert view.compressed_length(1) == int(view.r[1]) == N_P + (N - N_P) // K + 2 * (K - 1)
    assert view.memory_percent(2, N) == 100 * view.memory / (2 * N * N)
    np.testing.assert_array_equal(view.difference(), view.attention - view.exact)
    shared = vcc_study.vcc_view(*qkv, 1.0, two_level(2, share_heads=True), seed=0, head=1)
    assert shared.compressed_length(1) == (int(shared.r) if shared.r.ndim == 0 else int(shared.r[1]))


# ----------------------------------------------------------------------------- error vs budget


@pytest.fixture(scope="module")
def sweep(qkv) -> list[vcc_study.SweepPoint]:
    base = {k: v for k, v in two_level(0).items() if k not in ("selector", "scale_correction", "fine_blocks")}
    return vcc_study.error_sweep(*qkv, 1.0, base, seed=0, maximum=(N - N_P) // K)


def test_sweep_covers_every_selector_with_and_without_d(sweep) -> None:
    grid = vcc_study.sweep_block_counts((N - N_P) // K)
    assert len(sweep) == vcc_study.sweep_runs((N - N_P) // K)
    for selector in vcc_tree.SELECTORS:
        for with_d in (True, False):
            curve = [p for p in sweep if p.selector == selector and p.scale_correction == with_d]
            assert [p.h for p in curve] == grid
            # r = n_p + n_c/k + h(k - 1) (two-level scheme, vcc.md section 2.8)
            assert [p.r for p in curve] == [N_P + (N - N_P) // K + h * (K - 1) for h in grid]


def test_sweep_error_falls_to_zero_at_the_full_budget(sweep) -> None:
    for selector in vcc_tree.SELECTORS:
        for with_d in (True, False):
            curve = [p for p in sweep if p.selector == selector and p.scale_correction == with_d]
            assert curve[-1].vip_error < 1e-10 and curve[-1].all_error < 1e-10  # every block refined: exact
            assert curve[0].vip_error > 1e-3  # nothing refined: a visible error
            # Not monotone step by step (vcc.md 3.2, item 6), but the first half of the budget must help.
            assert curve[len(curve) // 2].vip_error < curve[0].vip_error


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mu_selection_beats_its_opposite_at_the_pages_defaults(seed: int) -> None:
    """Statistical, not guaranteed (vcc.md 3.2, item 7): at the page's temperature and clusters, refining the
    top-µ blocks beats refining the bottom-µ ones, on average over the budgets between none and all."""
    x = data.clustered(N, D, clusters=8, spread=0.3, seed=seed, heads=2, dtype=torch.float64)
    base = {"mode": "two_level", "block_size": K, "vip": N_P}
    points = vcc_study.error_sweep(x.q, x.k, x.v, 1 / 0.3, base, seed=0, maximum=(N - N_P) // K)

    def mean_error(selector: str) -> float:
        inner = [p.vip_error for p in points if p.selector == selector and p.scale_correction and 0 < p.h < 7]
        return float(np.mean(inner))

    assert mean_error("score") < mean_error("bottom")


def test_d_makes_uniform_attention_exact(qkv) -> None:
    base = {k: v for k, v in two_level(0).items() if k not in ("selector", "scale_correction", "fine_blocks")}
    points = vcc_study.error_sweep(*qkv, 1e-12, base, seed=0, maximum=2)
    assert all(p.all_error < 1e-9 for p in points if p.scale_correction)  # vcc.md 3.2, item 5
    assert all(p.all_error > 1e-3 for p in points if not p.scale_correction)


def test_sweep_reports_progress_and_stops_when_the_callback_raises(qkv) -> None:
    base = {k: v for k, v in two_level(0).items() if k not in ("selector", "scale_correction", "fine_blocks")}
    seen: list[float] = []

    def progress(fraction: float, label: str) -> None:
        assert label in vcc_tree.SELECTORS
        seen.append(fraction)
        if len(seen) == 3:
            raise RuntimeError("cancelled")

    with pytest.raises(RuntimeError, match="cancelled"):
        vcc_study.error_sweep(*qkv, 1.0, base, seed=0, maximum=2, progress=progress)
    total = vcc_study.sweep_runs(2)
    assert seen == [0.0, 1 / total, 2 / total]


# ----------------------------------------------------------------------------- cost (App. 6.4)


def test_two_level_cost_matches_the_papers_formulas() -> None:
    d, dv, n_p, k, h = 32, 16, 16, 16, 4
    lengths = [256, 1024, 4096]
    cost = vcc_study.cost_curve(lengths, d, dv, n_p, "two_level", k, h)
    for n, r, flops, exact_flops in zip(cost.n, cost.r, cost.flops, cost.exact_flops, strict=True):
        n_c = n - n_p
        assert r == n_p + n_c // k + h * (k - 1)
        assert exact_flops == 2 * n * n * (d + dv) + 3 * n * n
        # means at 2 levels, n_p scores per block, attention on r rows, broadcast back
        assert flops == n * (2 * d + dv) * 2 + 2 * n_p * d * (n_c // k) + 2 * r * r * (d + dv) + 3 * r * r + n * dv
    assert cost.flops[-1] < cost.exact_flops[-1] / 10


def test_tree_cost_r_is_n_p_plus_one_plus_the_splits() -> None:
    n_p, h = 8, 2
    lengths = [n_p + 2**m for m in (4, 6, 8)]
    cost = vcc_study.cost_curve(lengths, 8, 8, n_p, "tree", 16, h)
    for n, r in zip(cost.n, cost.r, strict=True):
        depth = int(math.log2(n - n_p))
        splits = 1 + h * (depth - 1)  # the root, then h nodes on every lower level that can split
        assert r == n_p + 1 + splits
        assert r == cost_model(int(n), 8, 8, n_p, "tree", 16, h)["r"]


def test_cost_curve_clips_vip_and_block_to_short_sequences() -> None:
    cost = vcc_study.cost_curve([4], 8, 8, n_p=10, mode="two_level", block_size=16, block_count=1)
    assert cost.r[0] <= 4
