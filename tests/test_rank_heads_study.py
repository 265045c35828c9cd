"""The Rank vs heads study (core.rank_heads_study) against the paper's claims (Amsel, Yehudai & Bruna 2024)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from core import rank_heads as rh
from core import rank_heads_study as study
from core.cancel import Cancelled, CancelToken

SMALL = study.TrainSettings(target="nearest", d=8, n_points=2, steps=300, seeds=1, seed=0, device="cpu")


def test_grid_always_contains_the_full_rank_single_head() -> None:
    assert study.grid_cells(8, [1, 2], [4]) == [(1, 4), (2, 4), (8, 1)]
    assert study.grid_cells(8, [8], [1]) == [(8, 1)]  # not twice
    assert study.n_sweep_cells(4, [16, 2]) == [(4, 1, 2), (1, 4, 2), (4, 1, 16), (1, 4, 16)]


def test_settings_choose_the_theorems_distribution() -> None:
    assert SMALL.distribution == "orthonormal"  # N <= d: the theorem's D_N
    assert study.TrainSettings("nearest", 8, 16, 10, 1, 0, "cpu").distribution == "uniform"


def test_fact1_hardmax_is_exact_and_softmax_error_falls_like_one_over_c() -> None:
    curve = study.fact_one_curve(16, 16, "nearest", samples=4000)
    assert curve.hardmax == 0.0  # Fact 1: the hardmax head returns the nearest point exactly
    assert np.all(np.diff(curve.error) < 0)  # a sharper head is always closer
    tail = curve.c[-4:] * curve.error[-4:]  # c x error is about constant near hardmax (the notes: ~2.6 at d = N = 16)
    assert tail.max() / tail.min() < 1.5
    assert 1.0 < tail[-1] < 5.0
    # ... and the error is about 0.2 x the attention entropy there.
    assert 0.1 < curve.error[-1] / curve.entropy[-1] < 0.4


def test_fact1_curve_reports_progress_and_matches_the_engine_sweep() -> None:
    seen: list[float] = []
    curve = study.fact_one_curve(8, 4, "nearest", cs=[1.0, 30.0], samples=1000, progress=lambda f, _: seen.append(f))
    sweep = rh.construction_sweep(8, 4, [1.0, 30.0], samples=1000)
    assert list(curve.error) == [r.error for r in sweep] and list(curve.entropy) == [r.entropy for r in sweep]
    assert seen == [0.0, 1 / 3]


def test_fact1_farthest_target_is_exact_with_minus_c_identity() -> None:
    assert study.fact_one_curve(8, 4, "farthest", cs=[10.0], samples=2000).hardmax == 0.0


def test_reference_levels_follow_the_setting() -> None:
    kinds = [r.kind for r in study.reference_levels(SMALL)]
    assert kinds == ["midpoint", "degree1_floor"]
    floor = next(r.value for r in study.reference_levels(SMALL) if r.kind == "degree1_floor")
    assert floor == pytest.approx(0.161, abs=2e-3)  # 0.161 at d = 8 (the notes)
    biased = study.TrainSettings("biased", 8, 2, 10, 1, 0, "cpu")
    assert [r.kind for r in study.reference_levels(biased)] == ["midpoint"]  # no degree-1 floor with a bias
    uniform = study.TrainSettings("nearest", 8, 16, 10, 1, 0, "cpu")
    assert study.reference_levels(uniform) == []


def test_full_rank_single_head_beats_many_low_rank_heads() -> None:
    """Equal parameters r d H = d^2: one head of rank d learns the target; d heads of rank 1 stall on a plateau near
    the degree-1 floor, far above it (Theorem 2; the paper's Fig. 1)."""
    results = study.train_cells(SMALL, [(8, 1), (1, 8)])
    full, low = results[(8, 1)], results[(1, 8)]
    floor = rh.degree1_floor(8)
    assert full.error < 0.5 * low.error
    assert low.error > 0.7 * floor  # rank-1 heads cannot go far below the degree-1 floor
    refs = study.reference_levels(SMALL, full)
    construction = next(r for r in refs if r.kind == "construction")
    assert construction.value < low.error  # Fact 1's head at the learned c also beats the low-rank heads
    summary = study.low_rank_summary(8, full, {(1, 8): low})
    assert summary is not None and summary.ratio > 2
    rows = study.grid_rows(8, results)
    assert [(row["rank"], row["heads"]) for row in rows] == [(1, 8), (8, 1)]
    assert rows[0]["params r·d·H"] == rows[1]["params r·d·H"] == 64
    assert math.isnan(rows[0]["angle(KQᵀ, I) °"]) and rows[1]["angle(KQᵀ, I) °"] < 90  # r = d: K Qᵀ aligns with +I


def test_train_cells_reports_progress_and_stops_when_cancelled() -> None:
    seen: list[tuple[float, str]] = []
    settings = study.TrainSettings("nearest", 4, 2, 5, 1, 0, "cpu")
    out = study.train_cells(settings, [(1, 1), (4, 1)], progress=lambda f, label: seen.append((f, label)))
    assert set(out) == {(1, 1), (4, 1)}
    assert seen[0] == (0.0, "r = 1, H = 1") and seen[-1] == (1.0, "done")
    token = CancelToken()
    token.cancel("stop")
    with pytest.raises(Cancelled):
        study.train_cells(settings, [(1, 1)], cancel=token)


def test_train_cell_matches_train_best_of_and_reports_fractions() -> None:
    fractions: list[float] = []
    settings = study.TrainSettings("nearest", 4, 2, 10, 1, 3, "cpu")
    res = study.train_cell(settings, 2, 1, progress=lambda f, _label: fractions.append(f))
    again = rh.train_best_of(4, 2, 2, 1, 10, seeds=1, device="cpu", target="nearest", first_seed=3)
    assert res.error == again.error  # seeded: the same numbers as the engine's own call
    assert fractions and fractions[-1] == 1.0 and all(0 < f <= 1 for f in fractions)


def test_theorem_shapes_need_more_heads_at_lower_rank() -> None:
    shapes = study.theorem_shapes(16, 0.1)
    assert shapes.ranks == [1, 2, 4, 8]
    assert all(a > b for a, b in zip(shapes.high_dimension, shapes.high_dimension[1:], strict=False))
    assert shapes.usual == [16.0, 8.0, 4.0, 2.0]
    assert study.theorem_shapes(1, 0.1).ranks == [1]


def test_n_sweep_rows_keep_the_runs_order_and_label_each_setting() -> None:
    found = {(8, 1, 4): SimpleNamespace(error=0.1, device="cpu"), (1, 8, 4): SimpleNamespace(error=0.5, device="cpu")}
    rows = study.n_sweep_rows(found)  # type: ignore[arg-type]
    assert [(r["rank"], r["heads"], r["N"]) for r in rows] == [(8, 1, 4), (1, 8, 4)]
    assert [r["setting"] for r in rows] == ["r = 8, H = 1", "r = 1, H = 8"]
    assert rows[1]["error"] == 0.5 and rows[0]["device"] == "cpu"


def test_paper_rows_cover_every_value_read_from_the_figures() -> None:
    fig1 = study.paper_fig1_rows()
    assert len(fig1) == sum(len(v) for v in rh.PAPER_FIG1_L1.values())
    assert all(rh.PAPER_FIG1_L1[r["budget"]][r["rank"]] == r["error"] for r in fig1)
    fig4 = study.paper_fig4_rows()
    assert len(fig4) == sum(len(v) for v in rh.PAPER_FIG4.values())
    assert all(rh.PAPER_FIG4[r["rank"]][r["N"]] == r["error (paper)"] for r in fig4)
