"""The Rank vs heads study (Amsel, Yehudai & Bruna 2024) as plain functions: which cells a grid trains, the
reference levels its errors are read against, Fact 1's construction over temperatures, the theorem shapes.

Training itself is ``core.rank_heads.train_best_of``; ``train_cell`` wraps it with a (fraction, label) progress
callback and ``train_cells`` trains a list of cells, checking the cancel token between cells (and, inside
``train``, between steps).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from core import rank_heads as rh
from core.cancel import CancelToken, check

FACT1_SAMPLES = 20_000
FACT1_CS: tuple[float, ...] = tuple(float(c) for c in np.geomspace(1, 4096, 13))
FACT1_EXPONENTS = (1.0, 1.5, 2.0)  # equal-parameter lines r d H = d^(1 + exponent) on the grid's heatmap

Cell = tuple[int, int]  # (rank, heads)
ProgressFn = Callable[[float, str], None]


@dataclass(frozen=True)
class TrainSettings:
    """What every trained cell of one page visit shares (hashable: part of every cache key)."""

    target: str
    d: int
    n_points: int
    steps: int
    seeds: int
    seed: int
    device: str  # "cpu" or "cuda"

    @property
    def distribution(self) -> str:
        """Orthonormal targets when N <= d (the theorem's setting D_N), else i.i.d. uniform points."""
        return "orthonormal" if self.n_points <= self.d else "uniform"

    def seconds(self, cells: Iterable[Cell]) -> float:
        return rh.estimate_seconds(self.d, list(cells), self.steps, seeds=self.seeds, device=self.device)


def grid_cells(d: int, ranks: Iterable[int], heads: Iterable[int]) -> list[Cell]:
    """Every (rank, heads) cell plus the full-rank single head, the reference every curve is read against."""
    return sorted({(int(r), int(h)) for r in ranks for h in heads} | {(int(d), 1)})


def n_sweep_cells(d: int, n_values: Iterable[int]) -> list[tuple[int, int, int]]:
    """(rank, heads, N) runs comparing one full-rank head with d rank-1 heads (equal parameters r d H = d^2)."""
    return [(r, h, int(n)) for n in sorted(n_values) for r, h in ((d, 1), (1, d))]


def train_cell(
    settings: TrainSettings,
    rank: int,
    heads: int,
    *,
    n_points: int | None = None,
    distribution: str | None = None,
    progress: ProgressFn | None = None,
) -> rh.TrainResult:
    """One cell, best of ``settings.seeds`` runs; ``progress(fraction, label)`` after evaluations."""
    extra: dict[str, Any] = {} if distribution is None else {"distribution": distribution}
    report = None if progress is None else (lambda step, of: progress(step / of, f"step {step}/{of}"))
    return rh.train_best_of(
        settings.d,
        settings.n_points if n_points is None else n_points,
        rank,
        heads,
        settings.steps,
        seeds=settings.seeds,
        device=settings.device,
        target=settings.target,  # type: ignore[arg-type]
        first_seed=settings.seed,
        progress=report,
        **extra,
    )


def train_cells(
    settings: TrainSettings,
    cells: Sequence[Cell],
    *,
    progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
) -> dict[Cell, rh.TrainResult]:
    """Train every cell in order, checking ``cancel`` (or the ambient token) before each one."""
    out: dict[Cell, rh.TrainResult] = {}
    for index, (rank, heads) in enumerate(cells):
        check(cancel)
        if progress is not None:
            progress(index / max(len(cells), 1), f"r = {rank}, H = {heads}")
        out[(rank, heads)] = train_cell(settings, rank, heads)
    if progress is not None:
        progress(1.0, "done")
    return out


# ------------------------------------------------------------------------------------------------ reading the grid


@dataclass(frozen=True)
class Reference:
    """A level the trained errors are read against (drawn as a dashed horizontal line)."""

    kind: str  # full_rank | construction | midpoint | degree1_floor
    label: str
    value: float


def reference_levels(
    settings: TrainSettings, full: rh.TrainResult | None = None, *, samples: int = FACT1_SAMPLES
) -> list[Reference]:
    """The trained full-rank head and Fact 1's head at its learned c (when trained), the error of predicting the
    targets' mean (orthonormal targets) and the degree-1 floor (N = 2 orthonormal, unbiased target)."""
    d, n = settings.d, settings.n_points
    refs: list[Reference] = []
    if full is not None:
        refs.append(Reference("full_rank", f"full rank, 1 head: {full.error:.4f}", full.error))
        value = rh.full_rank_construction(
            d,
            n,
            full.temperature,
            samples=samples,
            distribution=settings.distribution,  # type: ignore[arg-type]
            target=settings.target,  # type: ignore[arg-type]
        )
        label = f"Fact 1 head at the learned c = {full.temperature:.1f}: {value:.4f}"
        refs.append(Reference("construction", label, value))
    if settings.distribution == "orthonormal":
        value = rh.midpoint_error(n)
        refs.append(Reference("midpoint", f"predict the mean of the targets: {value:.3g}", value))
    if n == 2 and settings.distribution == "orthonormal" and settings.target != "biased":
        value = rh.degree1_floor(d)
        refs.append(Reference("degree1_floor", f"degree-1 floor ½(1 − d·E|xᵀy|²) = {value:.3f}", value))
    return refs


def grid_rows(d: int, results: Mapping[Cell, rh.TrainResult]) -> list[dict[str, Any]]:
    """The numbers behind the grid's charts, one row per trained cell (sorted by rank, then heads)."""
    return [
        {
            "rank": r,
            "heads": h,
            "params r·d·H": rh.parameter_count(d, r, h),
            "params / d²": rh.parameter_count(d, r, h) / d**2,
            "trained params": res.parameters,
            "error": res.error,
            "best during training": res.best_error,
            "learned c": res.temperature,
            "seconds": res.seconds,
            "seed": res.seed,
            "angle(KQᵀ, I) °": float(np.median(res.kq_angle_deg)) if res.kq_angle_deg else math.nan,
            "‖KQᵀ‖/√d": float(np.median(res.kq_norm)) if res.kq_norm else math.nan,
        }
        for (r, h), res in sorted(results.items())
    ]


@dataclass(frozen=True)
class LowRankSummary:
    full_error: float
    low_min: float
    low_max: float

    @property
    def ratio(self) -> float:
        """How many times the full-rank error the best low-rank cell is."""
        return self.low_min / max(self.full_error, 1e-12)


def low_rank_summary(
    d: int, full: rh.TrainResult | None, shown: Mapping[Cell, rh.TrainResult]
) -> LowRankSummary | None:
    """Errors of the shown cells with rank <= d/4 against the full-rank single head (None without both)."""
    low = [res.error for (r, _), res in shown.items() if r <= d // 4]
    if full is None or not low:
        return None
    return LowRankSummary(full.error, min(low), max(low))


# ------------------------------------------------------------------------------------------------ Fact 1


@dataclass(frozen=True)
class FactOneCurve:
    """Fact 1's head (V = I, K Qᵀ = c I) over inverse temperatures c, and its hardmax limit (c = inf)."""

    c: np.ndarray
    error: np.ndarray
    entropy: np.ndarray  # mean attention entropy, nats
    hardmax: float


def fact_one_elements(d: int, n_points: int, samples: int = FACT1_SAMPLES) -> float:
    """Tensor elements touched by ``fact_one_curve`` (for the scheduler's time estimate)."""
    return float((len(FACT1_CS) + 1) * samples * n_points * (d + n_points))


def fact_one_curve(
    d: int,
    n_points: int,
    target: str,
    *,
    cs: Sequence[float] = FACT1_CS,
    samples: int = FACT1_SAMPLES,
    progress: ProgressFn | None = None,
) -> FactOneCurve:
    """The construction at every c (same samples), then hardmax; checks the cancel token between c values."""
    sweep = []
    for index, c in enumerate(cs):
        if progress is not None:
            progress(index / (len(cs) + 1), f"c = {c:.3g}")
        # construction_sweep's own loop, one c at a time so each step reports (the numbers are the same).
        sweep += rh.construction_sweep(d, n_points, [c], samples=samples, target=target)  # type: ignore[arg-type]
    hard = rh.full_rank_construction(d, n_points, math.inf, samples=samples, target=target)  # type: ignore[arg-type]
    return FactOneCurve(
        c=np.asarray(cs, dtype=float),
        error=np.array([r.error for r in sweep]),
        entropy=np.array([r.entropy for r in sweep]),
        hardmax=hard,
    )


# ------------------------------------------------------------------------------------------------ theorem shapes


@dataclass(frozen=True)
class TheoremShapes:
    """Heads needed by the lower bounds against the head rank, constants set to 1 (shapes only)."""

    ranks: list[int]
    high_accuracy: list[float]  # Theorem 2(i)
    high_dimension: list[float]  # Theorem 2(ii) at eps
    usual: list[float]  # H = d / r, what transformers use
    eps: float


def theorem_shapes(d: int, eps: float) -> TheoremShapes:
    ranks = [2**i for i in range(0, int(math.log2(d)) + 1) if 2**i < d] or [1]
    return TheoremShapes(
        ranks=ranks,
        high_accuracy=[rh.theorem2_high_accuracy_shape(d, r) for r in ranks],
        high_dimension=[rh.theorem2_high_dimension_shape(d, r, eps) for r in ranks],
        usual=[d / r for r in ranks],
        eps=eps,
    )


# ------------------------------------------------------------------------------------------------ tables


def n_sweep_rows(found: Mapping[tuple[int, int, int], rh.TrainResult]) -> list[dict[str, Any]]:
    """One row per trained N-sweep run (rank, heads, N), in the given order, labelled by its setting."""
    return [
        {"N": n, "rank": r, "heads": h, "error": res.error, "device": res.device, "setting": f"r = {r}, H = {h}"}
        for (r, h, n), res in found.items()
    ]


def paper_fig1_rows(values: Mapping[str, Mapping[int, float]] = rh.PAPER_FIG1_L1) -> list[dict[str, Any]]:
    """The paper's Fig. 1 errors (read from its images), one row per (parameter budget, rank)."""
    return [{"budget": b, "rank": r, "error": e} for b, by_rank in values.items() for r, e in by_rank.items()]


def paper_fig4_rows(values: Mapping[int, Mapping[int, float]] = rh.PAPER_FIG4) -> list[dict[str, Any]]:
    """The paper's Fig. 4 errors (read from its images), one row per (rank, N)."""
    return [{"rank": r, "N": n, "error (paper)": e} for r, by_n in values.items() for n, e in by_n.items()]
