"""The regime map averaged over seeds: mean errors, standard errors, the winner and where it is within noise.

Seed ``seed + i`` (i < seeds) draws both the clustered input and the methods' randomness, so seed 0 of an
averaged map is exactly ``core.sweeps.regime_map`` at ``seed``; one seed reproduces the single-seed map.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from core.cancel import CancelToken
from core.errors import ParameterError
from core.sweeps import ESTIMATORS, Progress, regime_map

MAX_SEEDS = 10
NOISE_SE = 2.0  # a winner is "within noise" when its lead is at most this many standard errors


@dataclass
class SeedStatistics:
    """Per-cell statistics of several methods' errors over seeds."""

    roles: list[str]
    mean: dict[str, np.ndarray]  # role -> (S, T) mean error over seeds
    stderr: dict[str, np.ndarray]  # role -> (S, T) standard error of that mean (nan with one seed)
    winner: np.ndarray  # (S, T) index into roles of the lowest mean error
    lead: np.ndarray  # (S, T) mean gap between the second-best and the best role
    lead_stderr: np.ndarray  # (S, T) standard error of that gap over seeds (paired; nan with one seed)
    within_noise: np.ndarray  # (S, T) bool: lead <= NOISE_SE * lead_stderr (one seed: only exact ties)
    seeds: int


def seed_statistics(errors: Mapping[str, np.ndarray], noise_se: float = NOISE_SE) -> SeedStatistics:
    """Mean, standard error, winner and within-noise mask from errors of shape (seeds, S, T) per role.

    The lead of the winner is measured per seed (second-best minus best, both chosen on the mean), because
    every method sees the same input at a given seed; its standard error across seeds decides the mask.
    """
    roles = list(errors)
    if len(roles) < 2:
        raise ParameterError("errors", "needs at least two methods to compare")
    stack = np.stack([np.asarray(errors[r], dtype=float) for r in roles])  # (R, K, S, T)
    if stack.ndim != 4 or stack.shape[1] < 1:
        raise ParameterError("errors", "each role needs an array of shape (seeds, S, T) with seeds >= 1")
    seeds = stack.shape[1]
    mean = stack.mean(axis=1)  # (R, S, T)
    order = np.argsort(mean, axis=0, kind="stable")
    best, second = order[0], order[1]
    per_seed_best = np.take_along_axis(stack, best[None, None], axis=0)[0]  # (K, S, T)
    per_seed_second = np.take_along_axis(stack, second[None, None], axis=0)[0]
    gaps = per_seed_second - per_seed_best
    lead = gaps.mean(axis=0)
    if seeds > 1:
        stderr = stack.std(axis=1, ddof=1) / math.sqrt(seeds)
        lead_stderr = gaps.std(axis=0, ddof=1) / math.sqrt(seeds)
        within = lead <= noise_se * lead_stderr
    else:
        stderr = np.full_like(mean, np.nan)
        lead_stderr = np.full_like(lead, np.nan)
        within = lead <= 0
    return SeedStatistics(
        roles=roles,
        mean={r: mean[i] for i, r in enumerate(roles)},
        stderr={r: stderr[i] for i, r in enumerate(roles)},
        winner=best,
        lead=lead,
        lead_stderr=lead_stderr,
        within_noise=np.asarray(within, dtype=bool),
        seeds=seeds,
    )


def grid(low: float, high: float, count: int, log: bool) -> np.ndarray:
    """``count`` values from ``low`` to ``high`` (geometric when ``log``); one value when the range is empty."""
    if high <= low:
        return np.array([low])
    return np.geomspace(low, high, count) if log else np.linspace(low, high, count)


def work_estimate(n: int, cells: int, seeds: int, methods: Mapping[str, str]) -> int:
    """Relative cost of a map for the scheduler: n^2 per cell, seed and method (plus exact); RPCA counts 20 times."""
    return cells * seeds * n**2 * (len(methods) + 1) * (20 if "rpca" in methods.values() else 1)


def theorem_boundaries(n: int, d: int) -> tuple[float, float]:
    """Theorem 1's temperature scales for this n and d, up to constants: beta ~ ln n / ln d and beta ~ ln n."""
    ln_n = math.log(n)
    return ln_n / math.log(max(d, 2)), ln_n


@dataclass
class AveragedRegimeMap:
    """The regime map over a (beta, sigma) grid, errors averaged over seeds."""

    betas: np.ndarray  # (T,)
    spreads: np.ndarray  # (S,)
    methods: dict[str, str]  # role -> method
    stats: SeedStatistics
    entropy: np.ndarray  # (S, T), mean over seeds

    @property
    def roles(self) -> list[str]:
        return list(self.methods)

    @property
    def errors(self) -> dict[str, np.ndarray]:
        return self.stats.mean

    @property
    def winner(self) -> np.ndarray:
        return self.stats.winner

    @property
    def gain(self) -> np.ndarray:
        """Relative error cut of sparse + low rank over the better single method, on the mean errors."""
        best_single = np.minimum(self.errors["sparse"], self.errors["low_rank"])
        return (best_single - self.errors["sparse_low_rank"]) / np.maximum(best_single, 1e-30)

    def win_counts(self) -> dict[str, int]:
        """Cells won by each role (every role listed, zero when it wins nowhere)."""
        return {role: int((self.winner == k).sum()) for k, role in enumerate(self.roles)}

    def clear_win_counts(self) -> dict[str, int]:
        """Cells each role wins by more than the seeds' noise (``SeedStatistics.within_noise``): a headline number
        never rests on a cell another draw could flip."""
        clear = ~self.stats.within_noise
        return {role: int(((self.winner == k) & clear).sum()) for k, role in enumerate(self.roles)}

    def best_clear_gain(self) -> float | None:
        """The largest gain of sparse + low rank over the cells whose winner is outside the noise (None: none is)."""
        clear = ~self.stats.within_noise
        return float(np.max(self.gain[clear])) if clear.any() else None

    def rows(self) -> list[dict[str, Any]]:
        """One row per cell (for tables and CSV)."""
        out = []
        for i, sigma in enumerate(self.spreads):
            for j, beta in enumerate(self.betas):
                row: dict[str, Any] = {
                    "beta": float(beta),
                    "sigma": float(sigma),
                    "entropy": float(self.entropy[i, j]),
                    "winner": self.roles[int(self.winner[i, j])],
                    "within_noise": bool(self.stats.within_noise[i, j]),
                    "gain": float(self.gain[i, j]),
                }
                row.update({f"error_{r}": float(self.errors[r][i, j]) for r in self.roles})
                row.update({f"stderr_{r}": float(self.stats.stderr[r][i, j]) for r in self.roles})
                out.append(row)
        return out


def averaged_regime_map(
    *,
    n: int,
    d: int,
    clusters: int,
    betas: Sequence[float],
    spreads: Sequence[float],
    seeds: int = 3,
    methods: Mapping[str, str] | None = None,
    fraction: float = 1 / 8,
    seed: int = 0,
    method_params: Mapping[str, Mapping[str, Any]] | None = None,
    device: torch.device | str = "cpu",
    progress: Progress | None = None,
    cancel: CancelToken | None = None,
    causal: bool = False,
) -> AveragedRegimeMap:
    """``core.sweeps.regime_map`` at seeds ``seed, seed + 1, ...``; errors averaged, the winner's lead tested."""
    if isinstance(seeds, bool) or not isinstance(seeds, int) or not 1 <= seeds <= MAX_SEEDS:
        raise ParameterError("seeds", f"must be an integer in [1, {MAX_SEEDS}], got {seeds!r}")
    maps = []
    for index in range(seeds):

        def inner(fraction_done: float, label: str, index: int = index) -> None:
            if progress is not None:
                progress((index + fraction_done) / seeds, f"seed {index + 1} of {seeds}, {label}")

        maps.append(
            regime_map(
                n=n,
                d=d,
                clusters=clusters,
                betas=betas,
                spreads=spreads,
                methods=methods,
                fraction=fraction,
                seed=seed + index,
                method_params=method_params,
                device=device,
                progress=inner,
                cancel=cancel,
                causal=causal,
            )
        )
    roles = dict(methods or ESTIMATORS)
    stats = seed_statistics({r: np.stack([m.errors[r] for m in maps]) for r in roles})
    entropy = np.mean([m.entropy for m in maps], axis=0)
    return AveragedRegimeMap(maps[0].betas, maps[0].spreads, roles, stats, entropy)
