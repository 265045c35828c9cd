"""The oracles the claims compare with, computed here from their definitions (so the claims do not depend on how the
``topk`` method is defined): the best k-sparse approximation of each row (its k largest entries, not renormalised),
the rank-k truncated SVD, their crossover in beta, and the best sparse + low-rank split at a total budget."""

from __future__ import annotations

import functools
import math

import numpy as np
import torch

from core import metrics
from core.approximators.oracles import project_to_budget
from core.claims.claim import Setting
from core.claims.inputs import clustered_input, exact_attention


def sparse_oracle(p: torch.Tensor, k: int) -> torch.Tensor:
    """Best k-sparse approximation of each row: its k largest entries, NOT renormalised (the paper's oracle)."""
    index = p.topk(min(k, p.shape[-1]), dim=-1).indices
    return torch.zeros_like(p).scatter_(-1, index, p.gather(-1, index))


def oracle_errors(p: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Relative Frobenius errors of the top-k sparse and the rank-k (truncated SVD) oracles, per matrix."""
    norm = torch.linalg.matrix_norm(p).clamp_min(1e-300)
    sparse = metrics.relative_frobenius_error(sparse_oracle(p, k), p)
    s = torch.linalg.svdvals(p)
    low_rank = torch.sqrt((s[..., k:] ** 2).sum(-1)) / norm
    return sparse, low_rank


def crossings(diff: np.ndarray) -> int:
    signs = np.sign(diff[diff != 0])
    return int((signs[1:] != signs[:-1]).sum())


@functools.lru_cache(maxsize=32)
def oracle_crossover(setting: Setting, k: int, seed: int, low: float = 1.0, high: float = 8.0) -> float:
    """beta at which the top-k and rank-k oracle errors cross (bisection on sparse - low-rank), nan if they don't."""
    x = clustered_input(setting, seed)

    def gap(beta: float) -> float:
        sparse, low_rank = oracle_errors(exact_attention(x, beta), k)
        return float(sparse.mean() - low_rank.mean())

    g_low, g_high = gap(low), gap(high)
    if g_low * g_high > 0:
        return math.nan
    for _ in range(7):  # bracket / 128, then linear interpolation
        mid = 0.5 * (low + high)
        g_mid = gap(mid)
        if g_mid * g_low > 0:
            low, g_low = mid, g_mid
        else:
            high, g_high = mid, g_mid
    return low + (high - low) * g_low / (g_low - g_high)


def sparse_plus_low_rank(p: torch.Tensor, k: int) -> torch.Tensor:
    """Best of pure sparse, pure low rank and alternating projections with k_s + r = k (the notes' S+L oracle)."""
    sparse, low_rank = oracle_errors(p, k)
    best = torch.minimum(sparse, low_rank)
    zero = torch.zeros_like(p)
    for k_s in sorted({max(1, k // 4), max(1, k // 2), max(1, 3 * k // 4)}):
        if k_s >= k:
            continue
        s, lr = project_to_budget(p, zero, zero, k_s, k - k_s)  # batched over heads
        best = torch.minimum(best, metrics.relative_frobenius_error(s + lr, p))
    return best
