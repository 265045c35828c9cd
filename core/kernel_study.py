"""The Kernels page's study as plain functions (Performer random features and the trainable feature map).

The measurements themselves are in ``core.kernels``; this module fixes the page's grids (feature counts,
temperatures, penalties), combines results the page shows side by side, and returns dataclasses and arrays.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from core import kernels as K
from core import limits
from core.approximation import approximate

FEATURE_GRID: tuple[int, ...] = (4, 8, 16, 32, 64, 128, 256)  # pair-level Monte Carlo
ATTENTION_FEATURES: tuple[int, ...] = (8, 16, 32, 64, 128, 256, 512, 1024)
TAU_SWEEP: tuple[float, ...] = (0.1, 0.15, 0.2, 0.3, 0.5, 0.7, 1.0, 1.5, 2.0, 3.0, 5.0, 7.0, 10.0)
PENALTIES: tuple[float, ...] = (0.0, 0.01, 0.1, 1.0)
TRIG_REDRAWS = 3
# One Adam step of the trainable kernel at the page's sizes (n = 256, d = 16, m = 16), calibrated on the quiet 2-core
# machine (benchmarks/limits_calibration.py: 3 variants x 100 and x 400 steps took 0.4 and 1.6 s; a busy one, 3.9 s).
SECONDS_PER_FIT_STEP = 0.0011

ProgressFn = Callable[[float, str], None]


@dataclass(frozen=True)
class QKV:
    """Queries, keys and values of one input (any batch shape, last two dims n x d)."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor


# ------------------------------------------------------------------------------------------------ pair level


def kernel_mse_at_pair(
    d: int,
    length: float,
    angle: float,
    draws: int,
    seed: int,
    features: Sequence[int] = FEATURE_GRID,
    progress: ProgressFn | None = None,
) -> list[K.KernelMSECurve]:
    """Measured MSE of the raw estimate of exp(x·y) for every variant, at a pair of length ``length`` and angle
    ``angle`` (radians), with Lemma 2 and the ORF bound."""
    x, y = K.pair_at(d, length, angle)
    return K.kernel_mse_curves(x, y, list(features), draws=draws, seed=seed, progress=progress)


# Projection entries ``kernel_mse_at_pair`` draws per second (one thread: seeded draws, QR for orthogonal blocks),
# calibrated on the quiet 2-core machine (benchmarks/limits_calibration.py: 1000 and 5000 draws took 2.4 and 11.6 s;
# about three times longer while other work shared the cores).
MC_ENTRIES_PER_SECOND = 1.3e7


def kernel_mse_seconds(d: int, draws: int, features: Sequence[int] = FEATURE_GRID) -> float:
    """CPU time of ``kernel_mse_at_pair`` (benchmarks/limits_calibration.py)."""
    return len(K.KERNEL_VARIANTS) * draws * sum(features) * d / MC_ENTRIES_PER_SECOND


@dataclass(frozen=True)
class TheoryCurve:
    """Closed-form MSE of one variant against m: Lemma 2 (iid) and, for positive orthogonal, the ORF bound."""

    label: str
    features: list[int]
    lemma2: list[float]
    bound: list[float | None]
    true_value: float


def kernel_mse_theory(d: int, length: float, angle: float, features: Sequence[int] = FEATURE_GRID) -> list[TheoryCurve]:
    """The closed forms of ``kernel_mse_at_pair`` without any draws (instant: the chart before the Monte Carlo)."""
    x, y = K.pair_at(d, length, angle)
    true_value = math.exp(float((x * y).sum()))
    out = []
    for kernel, orthogonal in K.KERNEL_VARIANTS:
        lemma2 = [float(K.lemma2_mse(x, y, m, kernel)) for m in features]
        use_bound = orthogonal and kernel == "positive"
        bound = [float(K.orthogonal_mse_bound(x, y, m)) if use_bound and m <= d else None for m in features]
        out.append(TheoryCurve(K.variant_label(kernel, orthogonal), list(features), lemma2, bound, true_value))
    return out


@dataclass(frozen=True)
class RatioMap:
    """log10(MSE_trig / MSE_positive) over (length, angle): the Performer paper's Fig. 2 in closed form."""

    angles: np.ndarray  # radians
    lengths: np.ndarray
    log10_ratio: np.ndarray  # (lengths, angles); > 0 where positive features are more accurate


def mse_ratio_map(angles: int = 90, lengths: int = 40) -> RatioMap:
    phis = np.linspace(0.02, math.pi - 0.02, angles)
    ls = np.linspace(0.1, 2.0, lengths)
    z = np.array([[math.log10(max(K.mse_ratio(p, lv), 1e-300)) for p in phis] for lv in ls])
    return RatioMap(phis, ls, z)


# ------------------------------------------------------------------------------------------------ attention level

# Calibrated on the quiet 2-core reference CPU (benchmarks/limits_calibration.py, n = 1024, 4 heads): the entry bins
# (the dense Performer matrix, its float64 relative error, the per-bin medians) per attention entry, redraw and
# variant, and the trig normalisers per (temperature x head x row x d x m x redraw). A server shared with other work
# took 10-25x longer for both.
ENTRY_NS_PER_ENTRY = 11.5
ENTRY_NS_PER_ENTRY_FEATURE = 0.058
TRIG_NS_PER_UNIT = 0.85
CALL_SECONDS = 0.05


def entry_estimate(n: int, heads: int, features: int, redraws: int) -> limits.Estimate:
    """``core.kernels.entry_error_by_size`` on (heads, n, d): time and the float64 copies it holds at once."""
    entries = float(heads) * n * n
    per_draw = entries * (ENTRY_NS_PER_ENTRY + ENTRY_NS_PER_ENTRY_FEATURE * features) * 1e-9
    seconds = len(K.KERNEL_VARIANTS) * redraws * (per_draw + CALL_SECONDS)
    # The stacked relative errors of every redraw, their list, the exact matrix, sizes and bin indices.
    return limits.Estimate(limits.BASE_BYTES + (2.0 * redraws + 6.0) * entries * 8, seconds)


def trig_estimate(
    n: int, heads: int, d: int, features: Sequence[int], taus: int = len(TAU_SWEEP), redraws: int = TRIG_REDRAWS
) -> limits.Estimate:
    """``trig_fraction``: every temperature at once, per feature count and redraw (float64 features of q and k)."""
    rows = float(taus) * heads * n
    seconds = sum(rows * d * m * redraws * TRIG_NS_PER_UNIT * 1e-9 + redraws * CALL_SECONDS for m in features)
    nbytes = limits.BASE_BYTES + rows * (4.0 * d + 4.0 * max(features, default=1)) * 8
    return limits.Estimate(nbytes, seconds)


def trig_fraction(
    q: torch.Tensor,
    k: torch.Tensor,
    features: Sequence[int],
    *,
    orthogonal: bool,
    seed: int,
    taus: Sequence[float] = TAU_SWEEP,
    redraws: int = TRIG_REDRAWS,
) -> np.ndarray:
    """Share of rows with a trig normaliser <= 0, (len(features), len(taus)), at beta = 1 / tau."""
    frac = K.trig_nonpositive_fraction(
        q, k, [1 / t for t in taus], list(features), orthogonal=orthogonal, redraws=redraws, seed=seed
    )
    return frac.numpy()


@dataclass(frozen=True)
class AttentionStudy:
    """Performer attention error against the feature count per variant, and ELU+1 linear attention (m = d)."""

    features: list[int]
    curves: list[K.AttentionErrorCurve]
    elu_tv: float


def attention_study(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    beta: float,
    redraws: int,
    seed: int,
    features: Sequence[int] = ATTENTION_FEATURES,
    progress: ProgressFn | None = None,
) -> AttentionStudy:
    curves = K.attention_error_vs_features(q, k, v, beta, list(features), redraws=redraws, seed=seed, progress=progress)
    elu = approximate("linear_elu", q, k, v, scale=beta)
    exact = approximate("exact", q, k, v, scale=beta)
    return AttentionStudy(list(features), curves, K.mean_row_tv(elu.attention(), exact.attention()))


# ``attention_study`` per variant, redraw and feature count: the dense n x n matrix phi(q) phi(k)^T is a GEMM plus a
# few passes over its n^2 entries (TV, normalising), after a fixed cost per draw (features, Python) that dominates at
# the page's sizes (benchmarks/limits_calibration.py: 0.5 s at n = 256 and 0.6 s at n = 512, 4 redraws).
ATTENTION_MACS_PER_SECOND = 9e10
ATTENTION_SECONDS_PER_ENTRY = 1.1e-9
ATTENTION_SECONDS_PER_DRAW = 0.03  # drawing the features and Python, per variant, redraw and feature count set


def attention_seconds(n: int, heads: int, redraws: int, features: Sequence[int] = ATTENTION_FEATURES) -> float:
    """CPU time of ``attention_study`` (benchmarks/limits_calibration.py)."""
    per_draw = heads * n**2 * (sum(features) / ATTENTION_MACS_PER_SECOND + len(features) * ATTENTION_SECONDS_PER_ENTRY)
    return len(K.KERNEL_VARIANTS) * redraws * (per_draw + ATTENTION_SECONDS_PER_DRAW)


def attention_estimate(n: int, heads: int, redraws: int) -> limits.Estimate:
    """``attention_study``: ``attention_seconds`` and the dense float32/float64 matrices it holds at once."""
    return limits.Estimate(limits.BASE_BYTES + 8.0 * heads * n * n * 8, attention_seconds(n, heads, redraws))


def kernel_mse_estimate(d: int, draws: int) -> limits.Estimate:
    """``kernel_mse_at_pair``: ``kernel_mse_seconds``; memory is one chunk of stacked projections."""
    return limits.Estimate(limits.BASE_BYTES + 6.0 * K.MC_CHUNK_ROWS * d * 8, kernel_mse_seconds(d, draws))


# ------------------------------------------------------------------------------------------------ trainable kernel


def compare_on_inputs(
    fit_on: QKV,
    fresh: QKV | None,
    beta: float,
    features: int,
    variants: Sequence[str],
    steps: int,
    penalty: float,
    lr: float,
    seed: int,
) -> K.KernelComparison:
    """Fit each variant on ``fit_on`` and score it there and, unchanged, on ``fresh`` (ELU+1 and Performer too)."""
    return K.compare_kernels(
        fit_on, fresh, beta, features, variants=tuple(variants), steps=steps, ortho_penalty=penalty, lr=lr, seed=seed
    )


def fit_scale(n: int = 256, heads: int = 1, features: int = 16) -> float:
    """A fit step's cost relative to the page's defaults: each step forms the n x n attention of every head."""
    return max(1.0, heads * n * n * max(features, 16) / (256 * 256 * 16))


def comparison_seconds(variants: int, steps: int, n: int = 256, heads: int = 1, features: int = 16) -> float:
    return (variants + 1) * steps * SECONDS_PER_FIT_STEP * fit_scale(n, heads, features)


def penalty_seconds(
    steps: int, penalties: Sequence[float] = PENALTIES, n: int = 256, heads: int = 1, features: int = 16
) -> float:
    return len(penalties) * steps * SECONDS_PER_FIT_STEP * fit_scale(n, heads, features)
