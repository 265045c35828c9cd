"""Rank vs heads (Amsel, Yehudai & Bruna 2024): its claims, numbered as in /work/shared/papers/rank-vs-heads.md,
each declared on the function that measures it."""

from __future__ import annotations

import math

import numpy as np

from core import data, rank_heads
from core.claims.claim import FAILS, HOLD, HOLDS, Measurement, Paper, verdict_at_most

PAPER = Paper("rank-vs-heads", "Rank vs heads")
PAPER.skip(
    "rank-vs-heads-2, 4, 8", "Not implemented in this pass (biased head, rank-1 kernel identity, majority vote)."
)
PAPER.skip(
    "rank-vs-heads-9..14",
    "Trained rank x heads grids take minutes per configuration on this CPU (Rank vs heads page); 11 is GPU scale.",
)


@PAPER.claim(
    "rank-vs-heads-1",
    "A hardmax head with V = I, KQ^T = I (or -I) returns the nearest (farthest) point exactly.",
    "MSE <= 1e-12",
    setting=None,
    real=False,
    expected=HOLD,
)
def rh_hardmax_exact(x: data.Inputs | None, seed: int) -> Measurement:
    errors = [
        rank_heads.full_rank_construction(16, 16, math.inf, samples=20000, seed=seed, target=t)
        for t in ("nearest", "farthest")
    ]
    value = max(errors)
    return Measurement(value, verdict_at_most(value, 1e-12), "hardmax head V = I, KQ^T = +-I; d = 16, N = 16")


@PAPER.claim(
    "rank-vs-heads-3",
    "For N = 2 orthonormal targets the midpoint predictor has MSE exactly 0.5.",
    "|MSE - 0.5| <= 1e-9",
    setting=None,
    real=False,
    expected=HOLD,
)
def rh_midpoint(x: data.Inputs | None, seed: int) -> Measurement:
    value = rank_heads.full_rank_construction(16, 2, 0.0, samples=20000, seed=seed, distribution="orthonormal")
    return Measurement(value, verdict_at_most(abs(value - 0.5), 1e-9), "uniform head on N = 2 orthonormal targets")


@PAPER.claim(
    "rank-vs-heads-5",
    "The degree-1 floor is 0.161 / 0.172 / 0.177 / 0.179 at d = 8 / 16 / 32 / 64.",
    "max gap <= 6e-4",
    setting=None,
    real=False,
    expected=HOLD,
)
def rh_degree1_floor(x: data.Inputs | None, seed: int) -> Measurement:
    paper = {8: 0.161, 16: 0.172, 32: 0.177, 64: 0.179}
    gap = max(abs(rank_heads.degree1_floor(d) - v) for d, v in paper.items())
    return Measurement(gap, verdict_at_most(gap, 6e-4), "max |floor(d) - paper| at d = 8, 16, 32, 64")


@PAPER.claim(
    "rank-vs-heads-6",
    "Parameter bookkeeping: r d H = d^2 at H = d/r; budgets d^2.5 and d^3 mean H = 8d/r and 64d/r at d = 64.",
    "no mismatch",
    setting=None,
    real=False,
    expected=HOLD,
)
def rh_bookkeeping(x: data.Inputs | None, seed: int) -> Measurement:
    d, ranks = 64, (1, 2, 4, 8, 16, 32, 64)
    wrong = sum(rank_heads.parameter_count(d, r, d // r) != d * d for r in ranks)
    wrong += sum(rank_heads.heads_for_budget(d, r, 1.5) != 8 * d // r for r in ranks)
    wrong += sum(rank_heads.heads_for_budget(d, r, 2.0) != 64 * d // r for r in ranks)
    return Measurement(
        float(wrong), HOLDS if wrong == 0 else FAILS, "mismatches of r d H = d^2, H = 8d/r, 64d/r at d = 64"
    )


@PAPER.claim(
    "rank-vs-heads-7",
    "The softmax Fact 1 head (d = N = 16) has MSE ~ 0.18 / 0.042 / 0.011 / 0.0025 at "
    "c = 16 / 64 / 256 / 1024, decreasing in c.",
    "within 10% and decreasing",
    setting=None,
    real=False,
    expected={"clustered": FAILS},
    slow=True,
)
def rh_softmax_fact1(x: data.Inputs | None, seed: int) -> Measurement:
    paper = {16.0: 0.18, 64.0: 0.042, 256.0: 0.011, 1024.0: 0.0025}
    results = rank_heads.construction_sweep(16, 16, list(paper), samples=20000, seed=seed)
    errors = [r.error for r in results]
    gap = max(abs(e / v - 1) for e, v in zip(errors, paper.values(), strict=True))
    ok = gap <= 0.1 and all(a > b for a, b in zip(errors, errors[1:], strict=False))
    detail = "MSE at c = 16, 64, 256, 1024: " + ", ".join(f"{e:.4f}" for e in errors)
    return Measurement(gap, HOLDS if ok else FAILS, detail)


@PAPER.claim(
    "rank-vs-heads-15",
    "Theorem 2/4 head-bound shapes increase in d, decrease in r, increase as eps falls.",
    "all monotone",
    setting=None,
    real=False,
    expected=HOLD,
)
def rh_theory_shapes(x: data.Inputs | None, seed: int) -> Measurement:
    shape = rank_heads.theorem2_high_dimension_shape
    checks = [
        all(shape(d, 4, 0.1) < shape(d + 16, 4, 0.1) for d in (16, 32, 64)),
        all(shape(64, r, 0.1) > shape(64, 2 * r, 0.1) for r in (1, 2, 4, 8)),
        all(shape(64, 4, e) < shape(64, 4, e / 2) for e in (0.4, 0.2, 0.1)),
        all(rank_heads.theorem4_shape(d, 1) < rank_heads.theorem4_shape(d + 8, 1) for d in (16, 32, 64)),
    ]
    fraction = float(np.mean(checks))
    return Measurement(fraction, HOLDS if all(checks) else FAILS, "share of the 4 monotonicity checks passed")
