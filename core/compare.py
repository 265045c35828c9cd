"""Equal-budget comparisons of several methods on one input: errors, the winner, and honest timings.

Pure PyTorch/NumPy. The numbers are the ones the Compare page shows: relative Frobenius error of each head's
attention matrix against exact attention at the same inverse temperature, averaged over heads.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from core import device as core_device
from core import metrics, registry
from core.approximation import approximate
from core.budget import budget_params
from core.errors import ParameterError

# Family of each method that wins a regime (registry families).
SPARSE_FAMILIES = ("sparse",)
LOW_RANK_FAMILIES = ("low-rank",)
SPARSE_LOW_RANK_FAMILIES = ("sparse+low-rank",)


def method_params(method: str, n: int, d: int, fraction: float, overrides: Mapping[str, Any] | None = None) -> dict:
    """The budget's parameters for ``method``, with explicit ``overrides`` on top (validated by the registry)."""
    params = budget_params(method, n, d, fraction)
    params.update(overrides or {})
    return registry.get(method).validate(params, n, d)


def attention_errors(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    methods: Sequence[str],
    *,
    scale: float,
    fraction: float,
    seed: int = 0,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, float]:
    """Mean (over heads) relative Frobenius attention error of each method at equal memory budget."""
    n, d = int(q.shape[-2]), int(q.shape[-1])
    exact = approximate("exact", q, k, v, scale=scale).attention().float()
    out: dict[str, float] = {}
    for method in methods:
        params = method_params(method, n, d, fraction, (overrides or {}).get(method))
        approx = approximate(method, q, k, v, scale=scale, seed=seed, **params).attention().float()
        out[method] = float(metrics.relative_frobenius_error(approx, exact).mean())
    return out


def winner(errors: Mapping[str, float]) -> str:
    """The method with the lowest error (the first in order on a tie); ParameterError when there is none."""
    finite = {m: e for m, e in errors.items() if e == e}
    if not finite:
        raise ParameterError("errors", "no method has a finite error")
    return min(finite, key=lambda m: finite[m])


def winner_family(errors: Mapping[str, float]) -> str:
    """The registry family of the winning method: sparse, low-rank, sparse+low-rank, ..."""
    return registry.get(winner(errors)).family


# ------------------------------------------------------------------ timing


@dataclass(frozen=True)
class WarmTiming:
    """Several warm runs of one call: the median, the spread (half the interquartile range), how many runs."""

    median_s: float
    spread_s: float
    runs: int
    cold_s: float  # the first call, which pays for allocation, kernel selection and caches

    def describe(self, unit: str = "ms") -> str:
        """E.g. "12 ms ± 3 (median of 5)"; one run says plainly that it is a single measurement."""
        factor = 1000.0 if unit == "ms" else 1.0
        if self.runs <= 1:
            return f"{_fmt(self.median_s * factor)} {unit} (one cold measurement)"
        return f"{_fmt(self.median_s * factor)} {unit} ± {_fmt(self.spread_s * factor)} (median of {self.runs})"


def _fmt(x: float) -> str:
    return f"{x:.2g}" if x < 10 else f"{x:,.0f}"


def warm_timing(
    fn: Callable[[], Any], device: torch.device | str = "cpu", *, runs: int = 5, budget_s: float = 2.0
) -> WarmTiming:
    """Time ``fn``: one cold call, then up to ``runs`` warm calls (fewer when they would exceed ``budget_s``).

    The spread is half the interquartile range of the warm calls (0 for fewer than 2). Synchronises CUDA.
    """
    if not isinstance(runs, int) or isinstance(runs, bool) or runs < 1:
        raise ParameterError("runs", f"must be an integer >= 1, got {runs!r}")
    dev = torch.device(device) if isinstance(device, str) else device

    def once() -> float:
        core_device.synchronize(dev)
        start = time.perf_counter()
        fn()
        core_device.synchronize(dev)
        return time.perf_counter() - start

    cold = once()
    warm: list[float] = []
    spent = cold
    while len(warm) < runs and (not warm or spent + statistics.median(warm) <= budget_s):
        warm.append(once())
        spent += warm[-1]
    if len(warm) >= 2:
        quartiles = statistics.quantiles(warm, n=4, method="inclusive")
        spread = (quartiles[2] - quartiles[0]) / 2
    else:
        spread = 0.0
    return WarmTiming(statistics.median(warm), spread, len(warm), cold)


def method_timing(
    method: str,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    scale: float,
    seed: int,
    params: Mapping[str, Any],
    runs: int = 5,
    budget_s: float = 2.0,
) -> WarmTiming:
    """Warm timing of one method's forward pass (its output; the dense attention matrix is not built)."""
    return warm_timing(
        lambda: approximate(method, q, k, v, scale=scale, seed=seed, **dict(params)).output,
        q.device,
        runs=runs,
        budget_s=budget_s,
    )


def first_crossing(x: Sequence[float], diff: Sequence[float]) -> float | None:
    """Where ``diff`` (first error minus second, over ``x``) first changes sign, by linear interpolation along
    increasing ``x``; None when it never does. A zero at a point is a crossing there."""
    values = np.asarray(x, dtype=np.float64)
    order = np.argsort(values)
    xs, ys = values[order], np.asarray(diff, dtype=np.float64)[order]
    for j in range(len(xs) - 1):
        if ys[j] == 0:
            return float(xs[j])
        if ys[j] * ys[j + 1] < 0:
            return float(xs[j] + (xs[j + 1] - xs[j]) * (-ys[j]) / (ys[j + 1] - ys[j]))
    return None


def first_of_family(methods: Sequence[str], family: str) -> str | None:
    """The first of ``methods`` whose registry family is ``family``."""
    for name in methods:
        if registry.get(name).family == family:
            return name
    return None


def full_export_check(method: str, n: int, d: int, params: Mapping[str, Any], *, with_exact: bool) -> None:
    """Refuse (ParameterError naming n and the largest n that fits) a full-resolution n x n export of one head
    that would exceed the server limits (core.limits): the method's dense view, plus exact for an error map."""
    from core import limits

    def estimate(size: int) -> limits.Estimate:
        need = limits.method_estimate(method, size, d, 1, params, dense=True)
        return need + limits.exact_estimate(size, d, 1) if with_exact else need

    limits.check("n", n, limits.sizes_up_to(n), estimate)
