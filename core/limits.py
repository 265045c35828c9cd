"""Hard server-side limits and the cost estimates checked against them before heavy work starts.

A hosted app serves strangers' links; one link must not hold the server for minutes or drive it out of
memory. Each page estimates its heavy computation (bytes and seconds) from the analytic cost models before
it starts, and refuses (or reduces) settings whose estimate is over a limit, naming the knob and the
largest value that fits.

Limits (environment, read at call time so a test or a host can change them):
  ATTN_EXPLORER_MEMORY_LIMIT  bytes one computation may use (default 4 GiB);
  ATTN_EXPLORER_JOB_SECONDS   seconds one computation may take (default 60).

The estimates are deliberately pessimistic: seconds assume a slow effective rate (shared CPU cores, mostly
non-GEMM work), and bytes count every dense n x n tensor a page keeps plus temporaries.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core import config
from core.errors import ParameterError

GIB = 1024**3
DEFAULT_MEMORY_LIMIT = config.default("memory_limit")
DEFAULT_JOB_SECONDS = config.default("job_seconds")
MEMORY_ENV = config.variable("memory_limit")
SECONDS_ENV = config.variable("job_seconds")
# Effective floating-point rate assumed for the time estimates: well under what two busy CPU cores reach on
# this engine's mixed GEMM/element-wise work, so estimates err towards refusing.
ASSUMED_FLOPS_PER_SECOND = 5.0e8
FLOAT_BYTES = 4
# Working-set multiplier over a method's analytic "scalars stored" (scores, their exp, temporaries).
WORKING_SET_FACTOR = 4
# A method's dense view on the Compare page: its n x n matrix, the error map and reduced copies.
DENSE_COPIES = 4
# Time per entry of a dense n x n view (the matrix, its error map, metrics, display), as "flops" at the assumed
# rate: 200 ns. The issue measured 39 s for 9 methods x 2 heads x 4096^2 entries on Compare (130 ns each);
# the bare engine takes about 30 ns (n = 2048).
DENSE_FLOPS_PER_ELEMENT = 100.0
# Fixed cost of one method call (validation, hashing setup, Python), measured in small sweeps.
CALL_SECONDS = 0.1
# A temperature sweep (Error vs entropy, the regime map) keeps no views: per temperature it forms exact attention
# and each method's matrix only for their error norms, batched over temperatures. Measured on the 2-core reference
# CPU (benchmarks/limits_calibration.py, n = 1024, 4 heads): exact 3.4 ns per entry; each method 4-12 ns per
# entry beyond that, its model flops running at 5-60 GFLOP/s. Charged here: 12 ns per entry for exact and for
# each method's matrix and errors, plus its model flops at 2 GFLOP/s, i.e. 3-15x the measured time (the Compare
# constant above, 200 ns per entry, made sweeps 22-115x too slow and refused ones that take a few seconds).
SWEEP_FLOPS_PER_ELEMENT = 6.0
SWEEP_MODEL_SPEEDUP = 4.0  # over ASSUMED_FLOPS_PER_SECOND: batched GEMMs, no views
# Above n = 1024 a sweep's n x n rows leave the CPU's caches: the measured time per entry grew 1.6x at n = 2048 and
# 2.4x at n = 4096 (lsh, performer, scatterbrain, 12 temperatures; 62 ns per entry there), so the default
# Error vs entropy link at n = 4096 ran into the 60 s limit while estimated at 48 s. Charged as (n / 1024)^0.65.
SWEEP_CACHE_N = 1024
SWEEP_CACHE_EXPONENT = 0.65
# Robust PCA is one LAPACK SVD of an n x n matrix per ALM iteration, far above the assumed rate: its model flops (the
# maximum iteration count, 10 n^3 each) ran at 2.0e10 flop/s at n = 256, 1.1e10 at 128 and 4.8e9 at 64 on the 2-core
# reference CPU with all 60 iterations (benchmarks/limits_calibration.py), i.e. in proportion to n below 256. Charged
# at 1.5e10 x min(1, n / 256), and one matrix at a time in a sweep (no batching over temperatures): at the Regime
# map's oracle defaults (n = 256, 8 x 5 cells) 2.3x the measured time, instead of 15x at the assumed rate. (A flat
# 1.5e10 charged n = 128 above its measured rate; CI's slower machines then ran past the estimate.)
ROBUST_PCA_FLOPS_PER_SECOND = 1.5e10
ROBUST_PCA_FULL_RATE_N = 256
# Fixed overhead of a page run (interpreter, torch, the cached inputs), in bytes.
BASE_BYTES = 64 * 2**20


def memory_limit_bytes() -> int:
    """Bytes one computation may use: env ATTN_EXPLORER_MEMORY_LIMIT, default 4 GiB (``core.config``)."""
    return int(config.read("memory_limit"))


def job_seconds() -> float:
    """Seconds one computation may take: env ATTN_EXPLORER_JOB_SECONDS, default 60 (``core.config``)."""
    return float(config.read("job_seconds"))


@dataclass(frozen=True)
class Estimate:
    """Pessimistic peak bytes and seconds of one computation."""

    bytes: float
    seconds: float

    def __add__(self, other: Estimate) -> Estimate:
        return Estimate(self.bytes + other.bytes, self.seconds + other.seconds)

    def fits(self) -> bool:
        return self.bytes <= memory_limit_bytes() and self.seconds <= job_seconds()

    def describe(self) -> str:
        return f"about {self.bytes / GIB:.2f} GiB and {self.seconds:.0f} s"


def from_flops(flops: float, nbytes: float) -> Estimate:
    return Estimate(float(nbytes), float(flops) / ASSUMED_FLOPS_PER_SECOND)


def largest_fitting(candidates: Iterable[Any], estimate: Callable[[Any], Estimate]) -> Any | None:
    """The largest candidate whose estimate fits both limits (None when none does).

    Estimates grow with the knob, so a binary search finds it in a few evaluations.
    """
    ordered = sorted(candidates)
    low, high = 0, len(ordered)  # ordered[:low] fit, ordered[high:] do not
    while low < high:
        middle = (low + high) // 2
        if estimate(ordered[middle]).fits():
            low = middle + 1
        else:
            high = middle
    return ordered[low - 1] if low > 0 else None


def check(knob: str, value: Any, candidates: Iterable[Any], estimate: Callable[[Any], Estimate]) -> Estimate:
    """Raise ParameterError naming ``knob`` and the largest candidate that fits when ``value`` does not fit.

    candidates: the knob's allowed values (only those <= value are offered). Returns the estimate when it fits.
    """
    need = estimate(value)
    if need.fits():
        return need
    best = largest_fitting([c for c in candidates if c <= value], estimate)
    limits = (
        f"the limits are {memory_limit_bytes() / GIB:.2f} GiB ({MEMORY_ENV}) and {job_seconds():g} s ({SECONDS_ENV})"
    )
    advice = (
        f"the largest {knob} that fits is {best}"
        if best is not None
        else f"no {knob} fits with the other settings; lower them first"
    )
    raise ParameterError(knob, f"{value} would need {need.describe()}; {limits}; {advice}.")


def check_knobs(knobs: Sequence[tuple[str, Any, Iterable[Any], Callable[[Any], Estimate]]]) -> Estimate:
    """``check`` over several knobs, in order: (knob, value, candidates, estimate of that knob's value with the
    others as set). A refusal names the first knob for which some smaller value fits; when none does, the last."""
    if not knobs:
        raise ValueError("check_knobs needs at least one knob")
    first = knobs[0]
    need = first[3](first[1])
    if need.fits():
        return need
    for knob, value, candidates, estimate in knobs:
        if largest_fitting([c for c in candidates if c <= value], estimate) is not None:
            return check(knob, value, candidates, estimate)
    knob, value, candidates, estimate = knobs[-1]
    return check(knob, value, candidates, estimate)


# ------------------------------------------------------------------ estimators


def method_estimate(method: str, n: int, d: int, heads: int, params: Mapping[str, Any], *, dense: bool) -> Estimate:
    """One attention method on (heads, n, d): its efficient path, plus (dense=True) its n x n view and errors."""
    from core import registry
    from core.profiling import model_cost

    spec = registry.get(method)
    params = _budget_or(method, n, d, params)  # knobs chosen at a larger n may be out of range here
    cost = model_cost(method, n, d, heads, params)
    flops = float(cost.flops) if cost is not None else 4.0 * heads * n * n * d
    nbytes = float(cost.memory) * FLOAT_BYTES * WORKING_SET_FACTOR if cost is not None else 0.0
    if method in ("learned_kernel", "hedgehog"):
        # Fitting: every step runs the feature map forward and backward and compares with the target.
        checked = spec.validate(dict(params), n, d)
        steps, features = int(checked.get("steps", 1)), int(checked.get("features", 1))
        flops += steps * heads * (8.0 * n * d * features + 4.0 * n * n)
        nbytes += 3.0 * heads * n * n * FLOAT_BYTES
    if dense:
        flops += heads * n * n * DENSE_FLOPS_PER_ELEMENT
        nbytes += DENSE_COPIES * heads * n * n * FLOAT_BYTES
    return from_flops(flops, nbytes) + Estimate(0.0, CALL_SECONDS)


def exact_estimate(n: int, d: int, heads: int) -> Estimate:
    return from_flops(heads * n * n * DENSE_FLOPS_PER_ELEMENT, DENSE_COPIES * heads * n * n * FLOAT_BYTES)


def compare_estimate(methods: Mapping[str, Mapping[str, Any]], n: int, d: int, heads: int) -> Estimate:
    """The Compare page: exact plus every chosen method with its dense view (all kept for the figures)."""
    total = exact_estimate(n, d, heads) + Estimate(BASE_BYTES, 0.0)
    for method, params in methods.items():
        total = total + method_estimate(method, n, d, heads, _budget_or(method, n, d, params), dense=True)
    return total


def robust_pca_flops_per_second(n: int) -> float:
    """The rate robust PCA's SVDs are charged at in a sweep: it falls in proportion to n below 256."""
    return ROBUST_PCA_FLOPS_PER_SECOND * min(1.0, n / ROBUST_PCA_FULL_RATE_N)


def rpca_estimate(n: int, heads: int, iterations: int) -> Estimate:
    """Robust PCA by inexact ALM: one full SVD of an n x n matrix per iteration, per head."""
    flops = heads * iterations * (25.0 * n**3 + 20.0 * n * n)  # LAPACK SVD: far below GEMM rate
    return from_flops(flops, BASE_BYTES + 12.0 * heads * n * n * FLOAT_BYTES)


def construction_estimate(d: int, n_points: int, samples: int = 20_000, curve_points: int = 14) -> Estimate:
    """Fact 1's construction (core.rank_heads.construction): float64 tensors of samples x N x d, repeated
    at every inverse temperature of the curve."""
    cube = float(samples) * n_points * d * 8
    # The Gaussian draw, its normalised copy, the target and the einsum temporaries live together
    # (measured: 3.7 cubes at d = 16, N = 64).
    nbytes = BASE_BYTES + 4.5 * cube + 6.0 * samples * n_points * 8
    # Seeded float64 draws and batched small einsums run far below the GEMM rate: about 200 ns per element
    # and c value measured on a busy 2-core CPU (d = 16, N = 64), i.e. ~100 "flops" at the assumed rate.
    flops = curve_points * (120.0 * samples * n_points * d + 20.0 * samples * n_points)
    return from_flops(flops, nbytes)


def sweep_estimate(
    methods: Mapping[str, Mapping[str, Any]], n: int, d: int, batch: int, points: int, rows: int = 1
) -> Estimate:
    """core.sweeps.error_vs_entropy over ``points`` temperatures (x ``rows`` inputs for the regime map).

    Per temperature: exact attention and each method's dense matrix and errors (the SWEEP_* constants); memory is
    bounded by the sweep's chunk of temperatures held at once (the GPU's larger chunk, so a CPU is overestimated).
    """
    from core.sweeps import CHUNK_ELEMENTS

    per_chunk = max(1, min(points, CHUNK_ELEMENTS // max(1, batch * n * n)))
    calls = math.ceil(points / per_chunk)  # temperatures in a chunk run as one batched call
    spill = max(1.0, n / SWEEP_CACHE_N) ** SWEEP_CACHE_EXPONENT
    dense_seconds = batch * n * n * SWEEP_FLOPS_PER_ELEMENT / ASSUMED_FLOPS_PER_SECOND * spill
    seconds = dense_seconds * points * rows  # exact attention
    peak = 0.0
    for method, params in methods.items():
        checked = _budget_or(method, n, d, params)
        model = method_estimate(method, n, d, batch, checked, dense=False).seconds - CALL_SECONDS
        if method == "rpca":
            model *= ASSUMED_FLOPS_PER_SECOND / robust_pca_flops_per_second(n) * SWEEP_MODEL_SPEEDUP
        per_point = model / SWEEP_MODEL_SPEEDUP + dense_seconds
        seconds += (per_point * points + CALL_SECONDS * calls) * rows
        peak = max(peak, method_estimate(method, n, d, batch, checked, dense=True).bytes * per_chunk)
    nbytes = BASE_BYTES + exact_estimate(n, d, batch).bytes * per_chunk + peak
    return Estimate(nbytes, seconds)


def regime_estimate(
    methods: Mapping[str, Mapping[str, Any]], n: int, d: int, betas: int, spreads: int, seeds: int = 1
) -> Estimate:
    """The regime map (core.regime.averaged_regime_map): one sweep over ``betas`` temperatures per spread and
    seed, run one after another, so time grows with ``spreads * seeds`` and memory does not."""
    return sweep_estimate(methods, n, d, 1, betas, rows=spreads * max(1, seeds))


def _budget_or(method: str, n: int, d: int, params: Mapping[str, Any]) -> dict[str, Any]:
    """The method's parameters as it will run them (budget values under the given overrides)."""
    from core import registry

    spec = registry.get(method)
    try:
        from core.budget import budget_params

        base = budget_params(method, n, d, 1 / 8)
    except ParameterError:
        base = {}
    merged = {**base, **dict(params)}
    try:
        return dict(spec.validate(merged, n, d))
    except ParameterError:
        return dict(spec.validate(base, n, d))


def sizes_up_to(value: int, step: int = 16, low: int = 16) -> Sequence[int]:
    """Candidate values of an n slider (multiples of ``step`` from ``low``)."""
    return list(range(low, max(low, value) + 1, step))


def scaled(estimate: Estimate, runs: int) -> Estimate:
    """``runs`` of the same computation one after another: time adds up, memory does not."""
    return Estimate(estimate.bytes, estimate.seconds * runs)


def check_compare(methods: Mapping[str, Mapping[str, Any]], n: int, d: int, heads: int) -> Estimate:
    """The Compare page's check: refuse naming the largest n that fits or, when no n fits with these knobs,
    the method whose own knobs cost the most (so the link's author knows what to drop or lower)."""
    try:
        return check("n", n, sizes_up_to(n), lambda size: compare_estimate(methods, size, d, heads))
    except ParameterError as exc:
        if "the largest n that fits" in str(exc) or not methods:
            raise
        costs = {m: method_estimate(m, n, d, heads, p, dense=True) for m, p in methods.items()}
        worst = max(costs, key=lambda m: costs[m].seconds / job_seconds() + costs[m].bytes / memory_limit_bytes())
        raise ParameterError(
            "methods",
            f"{worst} alone would need {costs[worst].describe()} with its knobs at n = {n}; {exc}",
        ) from exc
