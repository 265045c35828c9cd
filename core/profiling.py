"""Timing and peak-memory measurement shared by the benchmark suite and the Scaling page (pure torch).

Timing: median of repeats after a warm-up, synchronising the device around each call so GPU times are
honest. Peak memory:
- CUDA: ``torch.cuda.max_memory_allocated`` after ``reset_peak_memory_stats``, minus what was allocated
  before the call (tensor memory held by torch's caching allocator);
- CPU (Linux): the process's resident-set high-water mark. Free heap pages are first returned to the OS
  (glibc ``malloc_trim``), the kernel's peak counter is reset (``/proc/self/clear_refs`` = 5), the call runs,
  and the peak is VmHWM minus the RSS just before the call. This counts every byte the call touched,
  including library scratch space, not only tensors. Where it is unavailable the result is None.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import math
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from core.cancel import CancelToken, check
from core.device import synchronize


@dataclass
class Timing:
    """Seconds of the timed repeats (warm-up excluded): wall clock, and this process's CPU time.

    With one thread and a busy machine, CPU time is the robust measure: it leaves out the time the process
    waited for a core. With several threads it adds their times up (and OpenMP's spin-waits).
    """

    times: list[float] = field(default_factory=list)
    cpu_times: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.times) if self.times else math.nan

    @property
    def cpu_median(self) -> float:
        return statistics.median(self.cpu_times) if self.cpu_times else math.nan

    @property
    def repeats(self) -> int:
        return len(self.times)

    @property
    def spread(self) -> float:
        """(max - min) / median: how noisy the repeats were."""
        if len(self.times) < 2:
            return 0.0
        return (max(self.times) - min(self.times)) / self.median


def timed(fn: Callable[[], Any], device: torch.device | str = "cpu") -> tuple[Any, float, float]:
    """One synchronised call: (result, wall seconds, process CPU seconds)."""
    dev = torch.device(device)
    synchronize(dev)
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    synchronize(dev)
    return result, time.perf_counter() - wall, time.process_time() - cpu


def time_call(
    fn: Callable[[], Any],
    device: torch.device | str = "cpu",
    *,
    warmup: int = 1,
    repeats: int = 5,
    budget_s: float | None = None,
    min_repeats: int = 1,
) -> Timing:
    """Run ``fn`` ``warmup`` times untimed, then time up to ``repeats`` calls.

    budget_s: stop adding repeats once this much time was spent on timed calls (at least min_repeats run),
    so slow sizes get fewer repeats and the whole run stays bounded.
    """
    dev = torch.device(device)
    for _ in range(warmup):
        fn()
        synchronize(dev)
    timing = Timing()
    spent = 0.0
    for i in range(max(repeats, 1)):
        _, wall, cpu = timed(fn, dev)
        timing.times.append(wall)
        timing.cpu_times.append(cpu)
        spent += wall
        if budget_s is not None and i + 1 >= min_repeats and spent + wall > budget_s:
            break
    return timing


# ------------------------------------------------------------------ memory


def _read_status() -> dict[str, int]:
    """VmRSS and VmHWM of this process in bytes (Linux), or {} elsewhere."""
    try:
        with open("/proc/self/status") as fh:
            lines = fh.readlines()
    except OSError:
        return {}
    out = {}
    for line in lines:
        if line.startswith(("VmRSS:", "VmHWM:")):
            key, value = line.split(":", 1)
            out[key] = int(value.split()[0]) * 1024
    return out


def current_rss() -> int | None:
    """Resident set size of this process in bytes, or None where /proc is missing."""
    return _read_status().get("VmRSS")


def _libc() -> Any:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        return ctypes.CDLL(name)
    except OSError:
        return None


_LIBC = _libc()


def can_release_free_memory() -> bool:
    """True where ``release_free_memory`` does something (glibc's ``malloc_trim`` is there)."""
    return getattr(_LIBC, "malloc_trim", None) is not None


def release_free_memory() -> None:
    """Give free heap pages back to the OS, so a later peak counts fresh pages (glibc only)."""
    if can_release_free_memory():
        _LIBC.malloc_trim(0)


M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter number (malloc.h)
MMAP_THRESHOLD_MAX = 32 * 2**20  # glibc's largest threshold on 64-bit systems (HEAP_MAX_SIZE / 2)


def set_mmap_threshold(nbytes: int) -> bool:
    """Give every allocation of at least ``nbytes`` its own memory mapping, returned to the OS when it is freed
    (glibc's ``mallopt(M_MMAP_THRESHOLD)``; this also stops glibc from raising the threshold by itself). False
    where there is no glibc or it refused the value (allowed: 0 to ``MMAP_THRESHOLD_MAX``)."""
    mallopt = getattr(_LIBC, "mallopt", None)
    if mallopt is None or not 0 <= nbytes <= MMAP_THRESHOLD_MAX:
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, int(nbytes)))


def reset_rss_peak() -> bool:
    """Reset the kernel's resident-set high-water mark to the current RSS; False where unsupported."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        return False
    return "VmHWM" in _read_status()


def cpu_peak_supported() -> bool:
    return reset_rss_peak()


@dataclass
class MemoryPeak:
    """Extra bytes at the peak of a call over what was held just before it; None if not measurable."""

    bytes: int | None
    how: str


def measure_peak(fn: Callable[[], Any], device: torch.device | str = "cpu") -> tuple[Any, MemoryPeak]:
    """Run ``fn`` once and return (its result, the extra memory at its peak)."""
    dev = torch.device(device)
    if dev.type == "cuda":
        synchronize(dev)
        torch.cuda.reset_peak_memory_stats(dev)
        before = torch.cuda.memory_allocated(dev)
        result = fn()
        synchronize(dev)
        return result, MemoryPeak(int(torch.cuda.max_memory_allocated(dev) - before), "cuda max_memory_allocated")
    if dev.type != "cpu":
        return fn(), MemoryPeak(None, f"not measured on {dev.type}")
    release_free_memory()
    if not reset_rss_peak():
        return fn(), MemoryPeak(None, "RSS peak reset unsupported on this OS")
    before = current_rss() or 0
    result = fn()
    peak = _read_status().get("VmHWM")
    if peak is None:
        return result, MemoryPeak(None, "no VmHWM")
    return result, MemoryPeak(max(0, peak - before), "RSS high-water mark (clear_refs) minus RSS before")


# ------------------------------------------------------------------ machine and fits


def gemm_rate(
    device: torch.device | str = "cpu",
    size: int = 2048,
    dtype: torch.dtype = torch.float32,
    repeats: int = 5,
    clock: str = "wall",
) -> float:
    """Achieved FLOP/s of a square size x size matmul: the machine's practical peak for this dtype.

    clock "cpu" divides by process CPU time instead of wall time (see Timing).
    """
    dev = torch.device(device)
    g = torch.Generator().manual_seed(0)
    a = torch.randn(size, size, generator=g).to(device=dev, dtype=dtype)
    b = torch.randn(size, size, generator=g).to(device=dev, dtype=dtype)
    timing = time_call(lambda: a @ b, dev, warmup=2, repeats=repeats)
    return 2.0 * size**3 / min(timing.cpu_times if clock == "cpu" else timing.times)


@functools.cache
def gemm_gflops(device_type: str, size: int = 1024, repeats: int = 3) -> float:
    """This process's GEMM rate (GFLOP/s) on a device type, measured once per process: a hardware rate belongs to
    the machine that measured it, so it is remembered here, never in a cache shared between machines."""
    return gemm_rate(device_type, size=size, repeats=repeats) / 1e9


def loglog_slope(ns: Sequence[float], values: Sequence[float]) -> float:
    """Least-squares slope of log(value) against log(n); nan with fewer than two usable points."""
    pts = [(math.log(n), math.log(v)) for n, v in zip(ns, values, strict=True) if v and v > 0 and math.isfinite(v)]
    if len(pts) < 2:
        return math.nan
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    if sxx == 0:
        return math.nan
    return sum((x - mx) * (y - my) for x, y in pts) / sxx


def crossover(ns: Sequence[float], times: Sequence[float], reference: Sequence[float]) -> float | None:
    """The n from which ``times`` stays below ``reference`` (log-interpolated between grid points).

    Returns ns[0] if faster everywhere, None if not faster at the largest n.
    """
    pairs = [
        (n, t, r)
        for n, t, r in zip(ns, times, reference, strict=True)
        if t and r and math.isfinite(t) and math.isfinite(r)
    ]
    if not pairs:
        return None
    pairs.sort()
    ratios = [(n, math.log(t / r)) for n, t, r in pairs]
    if ratios[-1][1] >= 0:
        return None
    # last grid point where the method was not faster; the crossing lies after it
    last_slower = max((i for i, (_, lr) in enumerate(ratios) if lr >= 0), default=None)
    if last_slower is None:
        return float(ratios[0][0])
    (n0, r0), (n1, r1) = ratios[last_slower], ratios[last_slower + 1]
    frac = r0 / (r0 - r1)
    return float(math.exp(math.log(n0) + frac * (math.log(n1) - math.log(n0))))


def machine_facts(device: torch.device | str = "cpu") -> dict[str, Any]:
    """What the numbers were measured on."""
    import platform

    dev = torch.device(device)
    facts: dict[str, Any] = {
        "device": dev.type,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "processor": _cpu_model(),
    }
    if dev.type == "cuda":
        facts["device_name"] = torch.cuda.get_device_name(dev)
        facts["cuda"] = torch.version.cuda
    else:
        facts["device_name"] = facts["processor"]
    # OpenMP's default spin-waiting makes 2 threads on a busy 2-core machine many times slower
    facts["omp_wait_policy"] = os.environ.get("OMP_WAIT_POLICY", "default")
    try:
        facts["load_average"] = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        pass
    return facts


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or "unknown"


# ------------------------------------------------------------------ live scaling runs (the Scaling page)


def model_cost(method: str, n: int, d: int, heads: int, params: dict[str, Any]) -> Any:
    """The method's analytic Cost at size n without allocating inputs (zero-stride placeholders). A pure function
    of its arguments, so answers are memoised: every page run checks its limits with it, once per method."""
    try:
        key = (method, int(n), int(d), int(heads), tuple(sorted(params.items())))
        hash(key)
    except TypeError:  # an unhashable knob value: compute without the memo
        return _model_cost(method, n, d, heads, params)
    return _model_cost_memo(key)


@functools.lru_cache(maxsize=4096)
def _model_cost_memo(key: tuple[Any, ...]) -> Any:
    method, n, d, heads, items = key
    return _model_cost(method, n, d, heads, dict(items))


def _model_cost(method: str, n: int, d: int, heads: int, params: dict[str, Any]) -> Any:
    from core import registry
    from core.approximation import AttentionInputs

    spec = registry.get(method)
    if spec.cost is None:
        return None
    placeholder = torch.zeros(1, 1, 1).expand(heads, n, d)
    inputs = AttentionInputs(
        q=placeholder, k=placeholder, v=placeholder, scale=torch.ones(heads, 1, 1), seed=0, batch_shape=(heads,)
    )
    return spec.cost(inputs, spec.validate(params, n, d))


@dataclass
class ScalingPoint:
    method: str
    n: int
    params: dict[str, Any]
    seconds: float = math.nan  # median wall time
    repeats: int = 0
    peak_bytes: float = math.nan  # measured extra memory at the peak of one call
    model_flops: float = math.nan
    model_bytes: float = math.nan  # analytic scalars stored x element size
    status: str = "ok"  # ok | stopped: <why>


def _predict_seconds(previous: ScalingPoint | None, flops: float) -> float:
    """Next time from the last measured one, scaled by the analytic FLOP ratio."""
    if previous is None or not math.isfinite(previous.seconds) or not previous.model_flops > 0:
        return 0.0
    ratio = flops / previous.model_flops if math.isfinite(flops) and flops > 0 else 4.0
    return previous.seconds * max(ratio, 1.0)


def scaling_run(
    methods: Sequence[str],
    sizes: Sequence[int],
    *,
    d: int = 64,
    heads: int = 1,
    row_budget: int = 128,
    scale: float = 1.0,
    seed: int = 0,
    device: torch.device | str = "cpu",
    point_limit_s: float = 5.0,
    total_limit_s: float = 30.0,
    memory_limit_bytes: float = 2**30,
    repeats: int = 3,
    progress: Callable[[float, str], None] | None = None,
    cancel: CancelToken | None = None,
) -> list[ScalingPoint]:
    """Time and memory of each method over increasing n, stopping before the limits.

    Budget: ``row_budget`` stored scores per query (fraction = row_budget / n). Before each point the
    analytic working set and a time predicted from the previous point (scaled by the FLOP model) are checked
    against the limits; a method stops at the first n that would exceed one, with the reason recorded.
    "exact" runs core's exact method (torch SDPA).
    """
    from core import data as data_module
    from core import registry
    from core.approximation import WORKING_SET_FACTOR, approximate
    from core.budget import budget_params
    from core.errors import ParameterError

    dev = torch.device(device)
    sizes = sorted(set(int(n) for n in sizes))
    points: list[ScalingPoint] = []
    started = time.perf_counter()
    total = max(1, len(methods) * len(sizes))
    done = 0
    previous: dict[str, ScalingPoint | None] = {m: None for m in methods}
    stopped: set[str] = set()
    # Sizes outside, methods inside: a total time limit then cuts the largest n for every method alike.
    for n in sizes:
        x: Any = None
        for method in methods:
            check(cancel)
            done += 1
            point = ScalingPoint(method, n, {})
            max_n = registry.get(method).max_n
            try:
                if max_n is not None and n > max_n:
                    raise ParameterError("n", f"{method} accepts n <= {max_n}")
                point.params = budget_params(method, n, d, min(1.0, row_budget / n))
                cost = model_cost(method, n, d, heads, point.params)
            except ParameterError as exc:
                point.status = f"stopped: {exc}"
                cost = None
            if cost is not None:
                point.model_flops = float(cost.flops)
                point.model_bytes = float(cost.memory) * 4
            if method in stopped:
                point.status = "stopped: an earlier size hit a limit"
            elif point.status == "ok":
                working_set = point.model_bytes * WORKING_SET_FACTOR if math.isfinite(point.model_bytes) else 0.0
                predicted = _predict_seconds(previous[method], point.model_flops)
                elapsed = time.perf_counter() - started
                if working_set > memory_limit_bytes:
                    point.status = (
                        f"stopped: needs about {working_set / 2**20:.0f} MiB, over the "
                        f"{memory_limit_bytes / 2**20:.0f} MiB limit"
                    )
                elif predicted > point_limit_s:
                    point.status = f"stopped: would take about {predicted:.1f} s, over the {point_limit_s:g} s limit"
                elif elapsed + predicted > total_limit_s:
                    point.status = f"stopped: the {total_limit_s:g} s total time limit"
            if point.status == "ok":
                if x is None:
                    x = data_module.clustered(n, d, max(1, n // 64), 0.3, seed, heads=heads).to(dev)

                def call(method: str = method, x: Any = x, params: dict[str, Any] = point.params) -> torch.Tensor:
                    with torch.inference_mode():
                        return approximate(method, x.q, x.k, x.v, scale=scale, seed=seed, **params).output

                try:
                    call()  # warm-up
                    _, peak = measure_peak(call, dev)
                    budget = max(0.0, min(point_limit_s, total_limit_s - (time.perf_counter() - started)))
                    timing = time_call(call, dev, warmup=0, repeats=repeats, budget_s=budget)
                    point.seconds, point.repeats = timing.median, timing.repeats
                    point.peak_bytes = math.nan if peak.bytes is None else float(peak.bytes)
                    previous[method] = point
                except (ParameterError, RuntimeError) as exc:  # e.g. out of memory on a GPU
                    point.status = f"stopped: {exc}"
            if point.status != "ok":
                stopped.add(method)
            points.append(point)
            if progress is not None:
                progress(done / total, f"n = {n}, {method}: {point.status if point.status != 'ok' else 'done'}")
    return points
