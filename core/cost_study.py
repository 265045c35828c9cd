"""Error against cost: each method's output error next to its measured time and peak memory at several budgets, on
one input and one device, and the Pareto front of accuracy and cost.

Every point is one method at one budget (a fraction of full attention's n^2 scores, turned into the method's knobs by
``core.budget.budget_params``). Its error is the relative output error against exact attention, averaged over the
heads (``core.metrics.relative_output_error``, as the Compare page shows it); its time the median of ``warm_runs``
synchronised calls after an untimed warm-up (``core.profiling.time_call``), with torch's thread count as the caller
set it; its memory the extra memory at the peak of one more call (``core.profiling.measure_peak``), beside the
method's analytic working set (``Cost.memory``). Errors and parameters are deterministic (seeded); times and peaks
are measurements of this machine at this moment, so the result records the machine, its load and when it ran.
"""

from __future__ import annotations

import datetime
import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from core import limits, metrics, profiling, registry
from core.approximation import AttentionInputs, approximate
from core.budget import budget_params
from core.cancel import CancelToken, ProgressFn, check
from core.errors import ParameterError

EXACT = "exact"
MAX_WARM_RUNS = 50
# The estimate's rates, pessimistic: on the 2-core reference CPU (one thread, n = 256 to 4096) the methods' model FLOPs
# ran at 1-50 GFLOP/s plus about 2 ms of fixed cost per call, exact attention (torch SDPA) at 55-105 GFLOP/s.
ESTIMATE_FLOPS_PER_SECOND = 4.0e9
EXACT_FLOPS_PER_SECOND = 2.0e10
CALL_OVERHEAD_S = 0.005


@dataclass
class CostPoint:
    """One method at one budget: its error, measured time and memory, and where they were measured."""

    method: str
    family: str
    budget: float  # fraction of full attention's n^2 scores (1.0 for exact attention)
    params: dict[str, Any]
    error: float = math.nan  # relative output error against exact attention, mean over the heads
    seconds: float = math.nan  # median wall time of the warm runs
    spread: float = math.nan  # (slowest - fastest) / median of the warm runs
    peak_bytes: float = math.nan  # extra memory at the peak of one call; nan where it cannot be measured
    model_bytes: float = math.nan  # the method's analytic working set: Cost.memory scalars x element size
    device: str = ""
    runs: int = 0  # warm runs behind ``seconds``
    status: str = "ok"  # ok | refused: <why>

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass
class CostStudy:
    """The points of one study and what they were measured on (``core.profiling.machine_facts``)."""

    points: list[CostPoint]
    machine: dict[str, Any]
    measured_at: str  # UTC, ISO 8601
    warm_runs: int
    memory_how: str  # how peak memory was measured on this device
    n: int = 0
    heads: int = 0

    def rows(self) -> list[dict[str, Any]]:
        """The plain table: one row per point, flagged where it is Pareto-optimal in time, in measured memory and in
        model memory (exact attention included: its error is 0)."""
        ok = [p for p in self.points if p.ok]
        on_time = dict(zip(map(id, ok), pareto_optimal([p.seconds for p in ok], [p.error for p in ok]), strict=True))
        on_memory = dict(
            zip(map(id, ok), pareto_optimal([p.peak_bytes for p in ok], [p.error for p in ok]), strict=True)
        )
        on_model = dict(
            zip(map(id, ok), pareto_optimal([p.model_bytes for p in ok], [p.error for p in ok]), strict=True)
        )
        return [
            {
                "method": p.method,
                "family": p.family,
                "budget": p.budget,
                "params": params_text(p.params),
                "error": p.error,
                "median_s": p.seconds,
                "time_spread": p.spread,
                "peak_mib": p.peak_bytes / 2**20,
                "model_mib": p.model_bytes / 2**20,
                "device": p.device,
                "runs": p.runs,
                "pareto_time": on_time.get(id(p), False),
                "pareto_memory": on_memory.get(id(p), False),
                "pareto_model_memory": on_model.get(id(p), False),
                "status": p.status,
            }
            for p in self.points
        ]


def params_text(params: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())


def budget_text(fraction: float) -> str:
    """1/8 for 0.125; other fractions as numbers."""
    inverse = 1 / fraction
    return f"1/{round(inverse)}" if abs(inverse - round(inverse)) < 1e-9 and inverse > 1 else f"{fraction:g}"


def pareto_optimal(costs: Sequence[float], errors: Sequence[float]) -> list[bool]:
    """For each (cost, error) point: True when no other point is at least as good in both and better in one.

    A point with a NaN (or infinite) cost or error is never optimal and dominates nothing; identical points are
    all optimal (neither is better)."""
    if len(costs) != len(errors):
        raise ValueError(f"costs and errors must have the same length, got {len(costs)} and {len(errors)}")
    usable = [math.isfinite(c) and math.isfinite(e) for c, e in zip(costs, errors, strict=True)]
    flags = []
    for i, (cost, error) in enumerate(zip(costs, errors, strict=True)):
        dominated = any(
            usable[j] and costs[j] <= cost and errors[j] <= error and (costs[j] < cost or errors[j] < error)
            for j in range(len(costs))
        )
        flags.append(usable[i] and not dominated)
    return flags


def check_settings(methods: Sequence[str], budgets: Sequence[float], warm_runs: int) -> None:
    """Refuse unknown methods, budgets outside (0, 1] and a warm-run count outside [1, MAX_WARM_RUNS]."""
    for method in methods:
        registry.get(method)
    for fraction in budgets:
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction <= 1:
            raise ParameterError("budgets", f"each budget must be a number in (0, 1], got {fraction!r}")
    if isinstance(warm_runs, bool) or not isinstance(warm_runs, int) or not 1 <= warm_runs <= MAX_WARM_RUNS:
        raise ParameterError("warm_runs", f"must be an integer in [1, {MAX_WARM_RUNS}], got {warm_runs!r}")


def planned_points(methods: Sequence[str], budgets: Sequence[float], with_exact: bool) -> list[tuple[str, float]]:
    """(method, budget) in the order they are measured: budgets outside, methods inside, so a change of the machine's
    load during the study touches every method alike; exact attention (no budget) first."""
    plan = [(EXACT, 1.0)] if with_exact else []
    return plan + [(m, float(b)) for b in sorted(set(budgets)) for m in dict.fromkeys(methods) if m != EXACT]


def estimate(
    methods: Sequence[str], budgets: Sequence[float], n: int, d: int, heads: int, warm_runs: int, with_exact: bool
) -> limits.Estimate:
    """Pessimistic bytes and seconds of ``cost_study`` (for the server's limits and the scheduler's queue)."""
    calls = warm_runs + 2  # the warm-up (whose output gives the error), the memory call, the timed runs
    seconds, peak = 0.0, 0.0
    for method, fraction in planned_points(methods, budgets, with_exact):
        try:
            params = budget_params(method, n, d, fraction)
            cost = profiling.model_cost(method, n, d, heads, params)
        except ParameterError:
            continue  # refused at once when measured
        flops = float(cost.flops) if cost is not None else 4.0 * heads * n * n * d
        rate = EXACT_FLOPS_PER_SECOND if method == EXACT else ESTIMATE_FLOPS_PER_SECOND
        seconds += calls * (flops / rate + CALL_OVERHEAD_S)
        if cost is not None:
            peak = max(peak, float(cost.memory) * limits.FLOAT_BYTES * limits.WORKING_SET_FACTOR)
    reference = 4.0 * heads * n * n * d / EXACT_FLOPS_PER_SECOND + CALL_OVERHEAD_S  # exact output for the errors
    return limits.Estimate(limits.BASE_BYTES + peak + limits.FLOAT_BYTES * 3 * heads * n * n, seconds + reference)


def cost_study(
    inputs: AttentionInputs,
    methods: Sequence[str],
    budgets: Sequence[float],
    *,
    warm_runs: int = 3,
    with_exact: bool = True,
    progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
) -> CostStudy:
    """Every method at every budget on ``inputs`` (on their device): error, time and memory, one point each.

    A method that refuses a budget (an oracle above its largest n, a working set over the memory limit) gets a
    point with status "refused: <why>" and no numbers. ``cancel`` (else the thread's ambient token) is checked
    before every call; ``progress(fraction, label)`` is told after every point.
    """
    check_settings(methods, budgets, warm_runs)
    device = inputs.device
    scale = inputs.scale.reshape(inputs.batch_shape)
    q, k, v = (t.reshape(*inputs.batch_shape, inputs.n, -1) for t in (inputs.q, inputs.k, inputs.v))

    def run(method: str, params: Mapping[str, Any]) -> Any:
        check(cancel)
        with torch.inference_mode():
            return approximate(method, q, k, v, scale=scale, seed=inputs.seed, **params)

    check(cancel)
    reference = run(EXACT, {}).output.float()
    plan = planned_points(methods, budgets, with_exact)
    points = []
    memory_how = "not measured"
    for index, (method, fraction) in enumerate(plan):
        spec = registry.get(method)
        point = CostPoint(method, spec.family, fraction, {}, device=device.type)
        try:
            params = budget_params(method, inputs.n, inputs.d, fraction) if method != EXACT else {}
            memory_how = _measure(point, functools.partial(run, method, params), reference, warm_runs)
        except (ParameterError, RuntimeError) as exc:  # a refused budget; out of memory on a GPU
            point = CostPoint(method, spec.family, fraction, {}, device=device.type, status=f"refused: {exc}")
        points.append(point)
        if progress is not None:
            where = "exact attention" if method == EXACT else f"{spec.label} at budget {budget_text(fraction)}"
            progress((index + 1) / len(plan), f"{where}: {'done' if point.ok else 'refused'}")
    return CostStudy(
        points=points,
        machine=profiling.machine_facts(device),
        measured_at=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        warm_runs=warm_runs,
        memory_how=memory_how,
        n=inputs.n,
        heads=inputs.batch,
    )


def _measure(point: CostPoint, call: Callable[[], Any], reference: torch.Tensor, warm_runs: int) -> str:
    """Fill ``point`` from ``call``: a warm-up whose output gives the error (the draws are seeded, so every run's
    output is the same), one call for the peak memory, then the timed warm runs. Returns how memory was measured."""
    first = call()
    point.params = dict(first.params)
    point.error = float(metrics.relative_output_error(first.output.float(), reference).mean())
    point.model_bytes = float(first.cost.memory) * first.output.element_size()
    del first
    device = reference.device
    _, peak = profiling.measure_peak(call, device)
    point.peak_bytes = math.nan if peak.bytes is None else float(peak.bytes)
    timing = profiling.time_call(call, device, warmup=0, repeats=warm_runs)
    point.seconds, point.spread, point.runs = timing.median, timing.spread, timing.repeats
    return peak.how
