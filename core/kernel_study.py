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
from core.approximation import approximate

FEATURE_GRID: tuple[int, ...] = (4, 8, 16, 32, 64, 128, 256)  # pair-level Monte Carlo
ATTENTION_FEATURES: tuple[int, ...] = (8, 16, 32, 64, 128, 256, 512, 1024)
TAU_SWEEP: tuple[float, ...] = (0.1, 0.15, 0.2, 0.3, 0.5, 0.7, 1.0, 1.5, 2.0, 3.0, 5.0, 7.0, 10.0)
PENALTIES: tuple[float, ...] = (0.0, 0.01, 0.1, 1.0)
TRIG_REDRAWS = 3
SECONDS_PER_FIT_STEP = 0.02  # one Adam step of the trainable kernel at the page's sizes

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


def kernel_mse_seconds(d: int, draws: int, features: Sequence[int] = FEATURE_GRID) -> float:
    """Rough CPU time of ``kernel_mse_at_pair`` (about 7 s at d = 16 and 1000 draws on the 2-core CI machine)."""
    return len(K.KERNEL_VARIANTS) * draws * sum(features) * d / 5e6


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


def attention_seconds(n: int, heads: int, redraws: int, features: Sequence[int] = ATTENTION_FEATURES) -> float:
    """Rough CPU time of ``attention_study``: the dense n x n attention of every variant costs n^2 m multiply-adds
    (about 10 s at n = 256, 4 redraws on the 2-core CI machine)."""
    return len(K.KERNEL_VARIANTS) * redraws * heads * n**2 * sum(features) / 2e8


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


def comparison_seconds(variants: int, steps: int) -> float:
    return (variants + 1) * steps * SECONDS_PER_FIT_STEP


def penalty_seconds(steps: int, penalties: Sequence[float] = PENALTIES) -> float:
    return len(penalties) * steps * SECONDS_PER_FIT_STEP
