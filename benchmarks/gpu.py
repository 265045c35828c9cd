"""The GPU check: one command that proves the CUDA path and measures it, on a bare GPU host.

    scripts/gpu-check.sh OUT              # on the GPU host, from the repository root (installs carried wheels)
    scripts/gpu-check.sh OUT --dry-run    # the same steps on the CPU at small sizes (CI runs this)
    scripts/gpu-check.sh OUT --budget 480 # plan the steps to fit 480 s (a lent machine's time), scaling first
    python -m benchmarks.gpu OUT [--dry-run] [--budget S] [--steps facts,scaling,tests,compare,pages,memory,precision]

Steps in this order, each in its own process with its own time limit (a call in flight past the limit is stopped:
the step's process group gets SIGTERM, then SIGKILL), so the whole check ends within about 7 minutes on an H100:
- facts: GPU, driver, torch, CUDA, cuDNN, Python, the SDPA kernels torch offers;
- scaling: every method at n = 1K, 4K, 16K, 64K (8 heads, d = 64) in bfloat16, then float32, next to flash SDPA,
  FlexAttention's sliding window and flash-linear-attention where they import: warm median time from CUDA events,
  peak GPU memory against the method's cost model, error against exact; the oracles last, at the smallest n;
- tests: tests/test_cuda.py, then the engine tests with CUDA as torch's default device (pytest --torch-device);
- compare: the Compare page's default view computed at n = 4096 through the app's compute path;
- pages: every page's default view through Streamlit's AppTest with ?device=cuda;
- memory, precision: the memory-vs-model and half-precision tables (benchmarks.memory_model, benchmarks.precision).

Writes gpu_check_<gpu>.md and .json (for example gpu_check_h100.md) and pytest_<gpu>.log to OUT, rewritten after
every step and every scaling point, each step saying what it reached, or why it did not run; a dry run writes
gpu_check_cpu_dry_run.* with every table marked as a CPU dry run. Nothing here needs a network.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.metadata
import json
import math
import multiprocessing
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from benchmarks import harness
from core.device import synchronize

ROOT = Path(__file__).resolve().parent.parent
_IMPORTED = time.perf_counter()
STEPS = ("facts", "scaling", "tests", "compare", "cluster", "pages", "memory", "precision")  # the order they run
ENGINE_TESTS = (
    "tests/test_exact.py",
    "tests/test_lsh.py",
    "tests/test_performer.py",
    "tests/test_scatterbrain.py",
    "tests/test_oracles.py",
    "tests/test_vcc.py",
    "tests/test_precision.py",
    "tests/test_determinism.py",
    "tests/test_batch_independence.py",
    "tests/test_sparse_lowrank.py",
)
DRY_RUN_ENGINE_TESTS = ("tests/test_exact.py",)
# What a tests step's part says when too little of the step's limit was left to start it.
TESTS_CUT = "not run: the step's time limit"
# The packages whose versions the facts step reports: module name -> distribution name.
VERSIONED_PACKAGES = {
    "numpy": "numpy",
    "streamlit": "streamlit",
    "plotly": "plotly",
    "pydantic_settings": "pydantic-settings",
    "diskcache": "diskcache",
    "transformers": "transformers",
}
# Seconds per call on a CPU even at n = 128 (FlexAttention unfused: eager on the CPU in the dry run).
DRY_RUN_FIRST_ONLY = ("rpca", "svd", "learned_kernel", "hedgehog", "flex local")
# Not efficient paths (n x n oracles, a kernel trained per call): timed at the smallest size, after the others.
REFERENCE_ONLY = ("topk", "topk_renormalized", "svd", "rpca", "learned_kernel", "hedgehog")
HEADS, D = 8, 64
BETA = 1 / 0.3  # tau 0.3, as benchmarks.suite
ROW_BUDGET = 256  # stored scores per query: fixed parameters as n grows, as benchmarks.suite
TRAINED_MAX_N = 1024  # learned_kernel and hedgehog train per call: their time is training, not attention
TRAINED = ("learned_kernel", "hedgehog")
DTYPES = ("bfloat16", "float32")  # the order they run: bf16 is the precision a GPU is fast in
FLEX = "flex local"  # FlexAttention's sliding window of ROW_BUDGET keys (torch.nn.attention.flex_attention)
FLA = "fla linear"  # flash-linear-attention's chunked linear attention on Performer's features (fla)
COMPARE_N = 4096


@dataclass(frozen=True)
class Plan:
    """Sizes and time limits of one check: a GPU host's, or the CPU dry run's."""

    dry_run: bool
    device: torch.device
    sizes: tuple[int, ...]
    dtypes: tuple[str, ...]
    heads: int
    limits_s: dict[str, float] = field(default_factory=dict)  # the most each step may take
    point_limit_s: float = 5.0  # a method stops growing n when its next point is predicted above this
    expected_s: dict[str, float] = field(default_factory=dict)  # what a step took (a budget shares time by it)
    least_s: dict[str, float] = field(default_factory=dict)  # below this a step is not started
    repeat_budget_s: float = 0.3  # warm repeats of one scaling point while they fit in this

    @classmethod
    def make(cls, dry_run: bool) -> Plan:
        if dry_run:  # measured on the 2-core CI machine (2026-11-28), each step about twice its time
            limits = {"facts": 20, "scaling": 40, "tests": 40, "compare": 25, "cluster": 45, "pages": 90}
            limits.update(memory=40, precision=20)
            # scaling: 45. It takes 14 s alone on an idle machine; in CI it runs beside a worker of browser tests and
            # was stopped at 19-23 s in four runs of 2026-11-30, one to six rows before its end. It is the step the
            # check exists for, so pages (AppTest of every page, 31 s alone) gives up the time and may meet its limit.
            expected = {"facts": 3, "scaling": 45, "tests": 8, "compare": 4, "cluster": 12, "pages": 20}
            expected.update(memory=8, precision=3)
            least = {"facts": 2, "scaling": 5, "tests": 8, "compare": 3, "cluster": 10, "pages": 10}
            least.update(memory=4, precision=2)
            return cls(True, torch.device("cpu"), (128, 256), DTYPES, 2, limits, 1.0, expected, least, 0.05)
        if not torch.cuda.is_available():
            raise SystemExit("no CUDA device here: run with --dry-run for the CPU rehearsal")
        limits = {"facts": 30, "scaling": 240, "tests": 150, "compare": 30, "cluster": 60, "pages": 120}
        limits.update(memory=40, precision=60)
        # run 2 on an H100 (gpu_check_h100.md): tests 47 s, compare 2, pages 22, memory 1, precision 48 (cut at 30)
        expected = {"facts": 15, "scaling": 240, "tests": 50, "compare": 10, "cluster": 30, "pages": 30}
        expected.update(memory=10, precision=50)
        least = {"facts": 5, "scaling": 30, "tests": 30, "compare": 5, "cluster": 20, "pages": 15}
        least.update(memory=5, precision=10)
        sizes = (1024, 4096, 16384, 65536)
        return cls(False, torch.device("cuda"), sizes, DTYPES, HEADS, limits, 2.0, expected, least)


# ------------------------------------------------------------------ timing and memory on either device


def warm_median(
    call: Callable[[], Any], device: torch.device, *, budget_s: float = 0.5, max_repeats: int = 25, warm: bool = True
) -> tuple[float, int]:
    """Median seconds of warm calls (one untimed warm-up first unless the caller has just run one): CUDA events on
    a GPU, the wall clock otherwise. Repeats while they fit in ``budget_s``, at least 3 (at most ``max_repeats``)."""
    if warm:
        call()
        synchronize(device)
    times: list[float] = []
    started = time.perf_counter()
    least = min(3, max_repeats)
    while len(times) < max_repeats and (len(times) < least or time.perf_counter() - started < budget_s):
        if device.type == "cuda":
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            call()
            end.record()
            end.synchronize()
            times.append(begin.elapsed_time(end) / 1000)
        else:
            begin_s = time.perf_counter()
            call()
            times.append(time.perf_counter() - begin_s)
    return statistics.median(times), len(times)


def peak_bytes(call: Callable[[], Any], device: torch.device) -> float:
    """Memory one call adds at its peak: CUDA's allocator high-water mark, or the CPU resident-set rise."""
    from core import profiling

    _, peak = profiling.measure_peak(call, device)
    return math.nan if peak.bytes is None else float(peak.bytes)


def sdpa_reference(
    device: torch.device, dtype: torch.dtype
) -> tuple[str, Callable[..., contextlib.AbstractContextManager]]:
    """The exact reference: flash SDPA where the device and dtype have it, else torch's own choice of kernel."""
    if device.type == "cuda" and dtype in (torch.float16, torch.bfloat16):
        with contextlib.suppress(ImportError, AttributeError):
            from torch.nn.attention import SDPBackend, sdpa_kernel

            return "sdpa (flash)", lambda: sdpa_kernel(SDPBackend.FLASH_ATTENTION)
    if device.type == "cuda":  # float32: the memory-efficient kernel (torch's own choice can be the n x n one)
        with contextlib.suppress(ImportError, AttributeError):
            from torch.nn.attention import SDPBackend, sdpa_kernel

            return "sdpa (mem-efficient)", lambda: sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION)
    return "sdpa (cpu)", contextlib.nullcontext


# ------------------------------------------------------------------ steps


def facts(plan: Plan) -> dict[str, Any]:
    info: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "host": platform.node(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "dry_run": plan.dry_run,
        "device": str(plan.device),
    }
    if plan.device.type == "cuda":
        props = torch.cuda.get_device_properties(plan.device)
        info.update(
            gpu=props.name,
            gpu_memory_gib=round(props.total_memory / 2**30, 1),
            multiprocessors=props.multi_processor_count,
            capability=f"{props.major}.{props.minor}",
            flash_sdp=torch.backends.cuda.flash_sdp_enabled(),
            mem_efficient_sdp=torch.backends.cuda.mem_efficient_sdp_enabled(),
        )
        if shutil.which("nvidia-smi"):
            query = "--query-gpu=name,driver_version,memory.total,clocks.max.sm"
            smi = subprocess.run(
                ["nvidia-smi", query, "--format=csv,noheader"], capture_output=True, text=True, timeout=20
            )
            info["nvidia_smi"] = smi.stdout.strip() or smi.stderr.strip()
    else:
        info["gpu"] = "none (CPU dry run)"
    # Read from the installed metadata, not by importing: importing streamlit and transformers took the step past
    # its limit of 3 s on a slow, loaded CI machine (2026-11-30).
    for module, distribution in VERSIONED_PACKAGES.items():
        try:
            info[module] = importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError as exc:  # a missing package is a fact to report, not a crash
            info[module] = f"missing ({type(exc).__name__})"
    return info


def run_tests(plan: Plan, out: Path, tag: str) -> dict[str, Any]:
    """tests/test_cuda.py on its own, then the engine tests with torch's default device set to the check's."""
    log = out / f"pytest_{tag}.log"
    runs = [("cuda_tests", ["tests/test_cuda.py"], [])]
    engine = DRY_RUN_ENGINE_TESTS if plan.dry_run else ENGINE_TESTS
    runs.append(("engine_on_device", list(engine), ["--torch-device", plan.device.type]))
    results: dict[str, Any] = {}
    limit = plan.limits_s["tests"]
    started = time.perf_counter()
    with open(log, "w") as handle:
        for name, files, extra in runs:
            left = limit - (time.perf_counter() - started)
            if left < 10:
                results[name] = {"status": TESTS_CUT}
                continue
            command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfE", *extra, *files]
            handle.write(f"$ {' '.join(command)}\n")
            handle.flush()
            begin = time.perf_counter()
            try:
                done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=left)
                text, code = done.stdout + done.stderr, done.returncode
            except subprocess.TimeoutExpired as exc:
                text = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
                code = "timeout"
            handle.write(text + "\n")
            summary = _pytest_summary(text)
            results[name] = {
                "files": files,
                "returncode": code,
                "seconds": round(time.perf_counter() - begin, 1),
                **summary,
            }
            print(f"  {name}: {summary.get('line', '?')} ({results[name]['seconds']} s)", flush=True)
    results["log"] = log.name
    return results


def _pytest_summary(text: str) -> dict[str, Any]:
    lines = [line for line in text.strip().splitlines() if re.search(r"\d+ (passed|failed|skipped|error)", line)]
    line = lines[-1].strip("= ") if lines else "no summary (see the log)"
    counts = {word: int(num) for num, word in re.findall(r"(\d+) (passed|failed|skipped|errors?|xfailed)", line)}
    failed = [m.group(1) for m in re.finditer(r"^(?:FAILED|ERROR) (\S+)", text, re.MULTILINE)]
    return {"line": line, "counts": counts, "failed": failed[:50]}


@dataclass
class ScalingRow:
    method: str
    n: int
    dtype: str
    params: dict[str, Any]
    status: str = "ok"
    seconds: float = math.nan
    repeats: int = 0
    peak_bytes: float = math.nan
    model_bytes: float = math.nan
    error: float = math.nan  # relative output error against exact (float32 SDPA on the same values), head mean
    half_native: bool = False
    note: str = ""  # what the row's figure means beyond its status (a capped parameter, a compile time)

    @property
    def memory_ratio(self) -> float:
        return self.peak_bytes / self.model_bytes if self.model_bytes > 0 else math.nan


def scaling_methods() -> list[str]:
    from core import registry

    return list(registry.methods())


def exact_output(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, beta: float, max_scores: int = 2**28
) -> torch.Tensor:
    """softmax(beta q k^T) v in float32, a block of queries at a time (at most ``max_scores`` at once): the error
    reference at any n, where torch's float32 SDPA may fall back to its n x n math kernel."""
    q, k, v = q.float(), k.float(), v.float()
    rows = max(1, max_scores // (q.shape[0] * k.shape[-2]))
    with torch.inference_mode():
        blocks = [
            torch.softmax(beta * (q[:, start : start + rows] @ k.transpose(-1, -2)), dim=-1) @ v
            for start in range(0, q.shape[-2], rows)
        ]
    return torch.cat(blocks, dim=-2)


def scaling(plan: Plan, rows: list[ScalingRow], progress: Callable[[str | None], None] | None = None) -> None:
    """Every method against the SDPA reference at each size and dtype, within the step's time limit; ``rows``
    fills as it goes (``progress(in_flight)`` after each row and before each call), so a step stopped from outside
    keeps what was measured and names the call it stopped in. bfloat16 first over every size, then float32; the
    efficient methods and the peers first, the oracles and the trainable kernel (n x n work, training) last at the
    smallest size, so they cannot starve the others."""
    deadline = time.perf_counter() + plan.limits_s["scaling"]
    last: dict[tuple[str, str], ScalingRow] = {}
    report = progress or (lambda in_flight: None)
    for dtype_name, n, methods, with_sdpa in scaling_points(plan):
        _scaling_point(plan, rows, last, n, dtype_name, methods, deadline, with_sdpa=with_sdpa, progress=report)
        report(None)


def scaling_points(plan: Plan) -> list[tuple[str, int, list[str], bool]]:
    """(dtype, n, methods, with the SDPA row) in the order the scaling step measures them."""
    efficient = [m for m in scaling_methods() if m not in REFERENCE_ONLY] + [FLEX, FLA]
    slow = [m for m in scaling_methods() if m in REFERENCE_ONLY]
    points = [(dtype, n, efficient, True) for dtype in plan.dtypes for n in plan.sizes]
    return points + [(dtype, plan.sizes[0], slow, False) for dtype in plan.dtypes]


def planned_rows(plan: Plan) -> list[tuple[str, int, str]]:
    """Every (method, n, dtype) row the scaling step would write, SDPA's included, in its order."""
    found = []
    for dtype, n, methods, with_sdpa in scaling_points(plan):
        label = sdpa_reference(plan.device, getattr(torch, dtype))[0]
        found += [(m, n, dtype) for m in ([label] if with_sdpa else []) + methods]
    return found


def fit_training(params: dict[str, Any], n: int, heads: int) -> dict[str, Any]:
    """learned_kernel's features capped so its training fits core's limit: at 8 heads and n = 1024, the budget's
    128 features give 8 * 256 * 1024 * 128 = 2^28 scalars per step, over MAX_TRAIN_WORK = 2^27; 64 fit."""
    from core.approximators.learned_kernel import MAX_TRAIN_WORK, TRAIN_ROWS

    most = MAX_TRAIN_WORK // (heads * min(n, TRAIN_ROWS) * n)
    return {**params, "features": max(1, min(int(params["features"]), most))}


class PeerUnavailable(Exception):
    """A peer's row that cannot run here: the message says why."""


def peer_call(name: str, plan: Plan, x: Any, n: int, dtype: torch.dtype, row: ScalingRow) -> Callable[[], torch.Tensor]:
    """The timed call of a peer row (FlexAttention, flash-linear-attention) on (heads, n, d) inputs; its one-off
    cost (compiling, drawing features) is paid here, before the timing."""
    device = plan.device
    q, k, v = x.q[None], x.k[None], x.v[None]  # (1, heads, n, d)
    if name == FLEX:
        try:
            from torch.nn.attention.flex_attention import create_block_mask, flex_attention
        except ImportError as exc:
            raise PeerUnavailable(f"FlexAttention does not import: {exc}") from exc
        half = ROW_BUDGET // 2

        def window(b: Any, h: Any, q_idx: torch.Tensor, kv_idx: torch.Tensor) -> torch.Tensor:
            return (q_idx - kv_idx >= -half) & (q_idx - kv_idx < half)  # ROW_BUDGET keys per query

        # compiled on a GPU: without it the mask is built as n x n booleans (4 GiB at n = 65,536)
        mask = create_block_mask(window, None, None, n, n, device=str(device), _compile=device.type == "cuda")
        # Compiled on a GPU (its fused kernel); eager on the CPU dry run, which only rehearses the row.
        attend = flex_attention if device.type == "cpu" else _compiled_flex(flex_attention)
        row.params = {"window": ROW_BUDGET, "compiled": device.type != "cpu"}
        started = time.perf_counter()
        with torch.no_grad():
            attend(q, k, v, block_mask=mask, scale=BETA)
        synchronize(device)
        row.note = f"compiled in {time.perf_counter() - started:.1f} s" if device.type != "cpu" else "eager on the CPU"

        def flex_call() -> torch.Tensor:
            with torch.no_grad():
                return attend(q, k, v, block_mask=mask, scale=BETA)[0]

        return flex_call
    if name == FLA:
        try:
            from fla.ops.linear_attn import chunk_linear_attn
        except Exception as exc:  # not installed, or built for another torch: the row says which
            raise PeerUnavailable(f"flash-linear-attention (fla) does not import: {type(exc).__name__}: {exc}") from exc
        if device.type != "cuda":
            raise PeerUnavailable("flash-linear-attention's Triton kernels need a CUDA device")
        import core

        features = int(core.budget_params("performer", n, D, min(1.0, ROW_BUDGET / n))["features"])
        row.params = {"features": features, "causal": True}
        row.note = "causal (fla's linear attention is)"
        generator = torch.Generator().manual_seed(0)
        w = torch.randn(D, features, generator=generator).to(device, dtype)
        root = math.sqrt(BETA)

        def positive_features(t: torch.Tensor) -> torch.Tensor:  # Performer's exp(w.x - |x|^2 / 2) / sqrt(m)
            t = t * root
            logits = t @ w - (t * t).sum(-1, keepdim=True) / 2
            return torch.exp(logits - logits.amax(-1, keepdim=True)) / math.sqrt(features)

        def fla_call() -> torch.Tensor:
            with torch.no_grad():
                phi_q, phi_k = (positive_features(t).transpose(1, 2) for t in (q, k))  # [B, T, H, K]
                out, _ = chunk_linear_attn(phi_q, phi_k, v.transpose(1, 2), scale=1.0, normalize=True)
                return out.transpose(1, 2)[0]

        return fla_call
    raise ValueError(f"unknown peer {name!r}")


_FLEX_COMPILED: dict[str, Callable[..., Any]] = {}


def _compiled_flex(flex_attention: Callable[..., Any]) -> Callable[..., Any]:
    if "flex" not in _FLEX_COMPILED:
        _FLEX_COMPILED["flex"] = torch.compile(flex_attention)  # the second n recompiles with dynamic shapes, once
    return _FLEX_COMPILED["flex"]


def _scaling_point(
    plan: Plan,
    rows: list[ScalingRow],
    last: dict[tuple[str, str], ScalingRow],
    n: int,
    dtype_name: str,
    methods: list[str],
    deadline: float,
    *,
    with_sdpa: bool,
    progress: Callable[[str | None], None] = lambda in_flight: None,
) -> None:
    import core
    from core import profiling, registry
    from core.approximation import WORKING_SET_FACTOR

    device = plan.device
    free = torch.cuda.mem_get_info(device)[0] if device.type == "cuda" else 8 * 2**30
    dtype = getattr(torch, dtype_name)
    x = core.data.clustered(n, D, max(1, n // 64), 0.3, 0, heads=plan.heads).to(device, dtype)
    label, backend = sdpa_reference(device, dtype)
    try:
        exact32 = exact_output(x.q, x.k, x.v, BETA)
    except Exception as exc:  # no reference: the rows of this size say why
        rows.append(ScalingRow("exact reference", n, dtype_name, {}, status=f"failed: {exc}"[:200]))
        return

    def sdpa_call() -> torch.Tensor:
        with torch.inference_mode(), backend():
            # (1, heads, n, d): the fused kernels take 4-D inputs only (3-D goes to the n x n math kernel)
            q, k, v = x.q[None], x.k[None], x.v[None]
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=BETA)[0]

    def measure(row: ScalingRow, call: Callable[[], torch.Tensor]) -> None:
        row.status = "measuring"
        progress(f"{row.method} at n = {n}, {dtype_name}")
        _measure(row, call, exact32, device, deadline, plan.point_limit_s, plan.repeat_budget_s)

    if with_sdpa:
        ref = ScalingRow(label, n, dtype_name, {})
        rows.append(ref)
        measure(ref, sdpa_call)
    for method in methods:
        previous = last.get((method, dtype_name))
        peer = method in (FLEX, FLA)
        spec = None if peer else registry.get(method)
        row = ScalingRow(method, n, dtype_name, {}, half_native=peer or bool(getattr(spec, "half_native", False)))
        rows.append(row)
        if not peer:
            try:
                row.params = core.budget_params(method, n, D, min(1.0, ROW_BUDGET / n))
                if method == "learned_kernel":
                    budgeted = row.params["features"]
                    row.params = fit_training(row.params, n, plan.heads)
                    if row.params["features"] < budgeted:
                        row.note = f"features {row.params['features']} (not {budgeted}): training's 2^27 limit"
                cost = profiling.model_cost(method, n, D, plan.heads, row.params)
            except Exception as exc:
                row.status = f"not run: {exc}"
                continue
            size = torch.empty(0, dtype=dtype).element_size() if row.half_native else 4
            row.model_bytes = float(cost.memory) * size if cost is not None else math.nan
        if spec is not None and spec.max_n is not None and n > spec.max_n:
            row.status = f"not run: n > {spec.max_n} (builds n x n)"
        elif method in TRAINED and n > TRAINED_MAX_N:
            row.status = f"not run: trains per call, only up to n = {TRAINED_MAX_N}"
        elif plan.dry_run and method in DRY_RUN_FIRST_ONLY and dtype_name != "float32":
            row.status = "not run: the dry run times it once, in float32"
        elif previous is not None and not previous.status.startswith("ok"):
            row.status = "not run: a smaller n stopped"
        elif previous is not None and previous.seconds * n / previous.n * 1.5 > plan.point_limit_s:
            row.status = f"not run: predicted over {plan.point_limit_s:g} s per call"
        elif row.model_bytes * WORKING_SET_FACTOR > 0.6 * free:
            row.status = "not run: the model's working set exceeds the free memory"
        elif time.perf_counter() > deadline:
            row.status = "not run: the step's time limit"
        if row.status != "ok":
            continue
        if peer:
            try:
                row.status = "measuring"
                progress(f"{method} at n = {n}, {dtype_name} (setting up)")
                call = peer_call(method, plan, x, n, dtype, row)
            except PeerUnavailable as exc:
                row.status = f"not run: {exc}"[:300]
                continue
            except Exception as exc:  # a peer that fails here is a finding, as a method's failure is
                row.status = f"failed: {type(exc).__name__}: {str(exc)[:200]}"
                last[(method, dtype_name)] = row
                continue
        else:

            def call(method: str = method, params: dict[str, Any] = row.params) -> torch.Tensor:
                with torch.inference_mode():
                    return core.approximate(method, x.q, x.k, x.v, scale=BETA, seed=0, **params).output

        measure(row, call)
        last[(method, dtype_name)] = row
    if device.type == "cuda":
        torch.cuda.empty_cache()


def _measure(
    row: ScalingRow,
    call: Callable[[], torch.Tensor],
    exact: torch.Tensor,
    device: torch.device,
    deadline: float,
    slow_s: float = 2.0,
    repeat_budget_s: float = 0.3,
) -> None:
    from core import metrics

    if time.perf_counter() > deadline:
        row.status = "not run: the step's time limit"
        return
    try:
        started = time.perf_counter()
        output = call()
        synchronize(device)
        first_s = time.perf_counter() - started
        row.error = float(metrics.relative_output_error(output.float(), exact).mean())
        del output
        if first_s > slow_s:  # a slow call (rpca on a GPU took 53 s at n = 1024): that one call is the measurement
            row.seconds, row.repeats = first_s, 1
            row.status = "ok (one cold call)"
            return
        row.peak_bytes = peak_bytes(call, device)
        if first_s > 0.5:  # one more call, timed, is the measurement
            row.seconds, row.repeats = warm_median(call, device, budget_s=0.0, max_repeats=1, warm=False)
        else:
            row.seconds, row.repeats = warm_median(call, device, budget_s=repeat_budget_s)
        row.status = "ok"
    except Exception as exc:  # a method that fails on the device is a finding: record it and go on
        row.status = f"failed: {type(exc).__name__}: {str(exc)[:200]}"
        if device.type == "cuda":
            torch.cuda.empty_cache()


def compare_runs(plan: Plan) -> tuple[Any, float, list[Any]]:
    """(input spec, beta, one ``MethodRun`` view per default method) of the Compare page's default view at n = 4096
    (the dry run: 256) on the check's device."""
    from service import fields, views  # the page defaults without the ui package (its __init__ loads Streamlit)

    n = 256 if plan.dry_run else COMPARE_N
    defaults = dict(fields.DEFAULTS)
    spec = views.InputSpec(
        source=defaults["input"],
        n=n,
        d=defaults["d"],
        heads=defaults["heads"],
        clusters=defaults["clusters"],
        spread=defaults["spread"],
        seed=defaults["seed"],
    )
    beta = 1 / defaults["tau"]
    device_name = plan.device.type
    import core

    runs = [
        views.MethodRun.of(
            spec, beta, device_name, m, core.budget_params(m, n, spec.d, defaults["budget"]), defaults["seed"]
        )
        for m in fields.COMPARE_METHODS
    ]
    return spec, beta, runs


def compare_view(plan: Plan) -> dict[str, Any]:
    """The Compare page's default view through service.compute: exact, then each default method with its errors, as the
    page computes them (no cache). Warm: the second pass is timed."""
    from service import compute, fields, views

    spec, beta, runs = compare_runs(plan)
    device_name = plan.device.type
    passes = []
    for _ in range(2):
        synchronize(plan.device)
        started = time.perf_counter()
        engine_s: dict[str, float] = {}
        compute.exact_now(views.ExactAttention(spec, beta, device_name))
        for run in runs:
            result = compute.run_method_now(run)
            if result.error_message:
                raise RuntimeError(f"{run.method}: {result.error_message}")
            engine_s[run.method] = result.seconds
        synchronize(plan.device)
        passes.append({"total_s": time.perf_counter() - started, "engine_s": engine_s})
    return {
        "n": spec.n,
        "heads": spec.heads,
        "methods": list(fields.COMPARE_METHODS),
        "cold_total_s": passes[0]["total_s"],
        "warm_total_s": passes[1]["total_s"],
        "warm_engine_s": passes[1]["engine_s"],
        "warm_engine_total_s": sum(passes[1]["engine_s"].values()),
    }


def cluster_jobs(plan: Plan) -> dict[str, Any]:
    """A GPU worker computing for a web replica (issue 32): a Dask scheduler and one worker advertising ``GPU=1`` on
    loopback (deploy/loopback.py), this process in the replica's place. Compare's default methods go as jobs through
    service.scheduler and service.dask_client (``device=cuda`` jobs need the GPU resource); each result must match the
    same view computed here. Times: submit to result (transfer included), and the engine's own on the worker."""
    import tempfile

    import numpy as np

    from deploy.loopback import start_scheduler, start_worker, wait_for_workers
    from deploy.processes import stop
    from service import compute, dask_client
    from service.scheduler import Scheduler

    _, _, runs = compare_runs(plan)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="gpu-check-cluster-") as folder:
        run_dir, env = Path(folder), dict(os.environ)
        scheduler, address = start_scheduler(run_dir, env)
        worker = start_worker(run_dir, env, address, "gpu-1", gpu=True, torch_threads=max(1, os.cpu_count() or 1))
        runner = dask_client.ClusterRunner(address)
        sched = Scheduler(1, is_active=lambda session: None, cluster=lambda: runner)
        try:
            wait_for_workers(address, 1, [worker], 60)
            for run in runs:
                started = time.perf_counter()
                job = sched.submit(run.cache_name, run.cache_key(), run.compute, "gpu-check", 30.0, task=run)
                if not job.done_event.wait(120) or job.state != "done":
                    raise RuntimeError(f"{run.method}: {job.state}: {job.error or job.label}")
                remote_s = time.perf_counter() - started
                here = compute.run_method_now(run)
                difference = max(
                    float(np.max(np.abs(np.asarray(job.result.metrics[k]) - np.asarray(v))))
                    for k, v in here.metrics.items()
                )
                rows.append(
                    {
                        "method": run.method,
                        "device": job.result.device,
                        "resources": dask_client.resources_for(run),
                        "submit_to_result_s": remote_s,
                        "worker_engine_s": job.result.seconds,
                        "here_engine_s": here.seconds,
                        "max_metric_difference": difference,
                    }
                )
        finally:
            sched.shutdown()
            runner.close()
            stop(worker.process)
            stop(scheduler.process)
    return {"n": runs[0].inputs.n, "rows": rows}


def pages(plan: Plan, progress: Callable[[list[dict[str, Any]]], None] | None = None) -> list[dict[str, Any]]:
    """Every page's default view through AppTest with ?device=cuda: no exception, the device really used;
    ``progress(rows)`` after each page."""
    from streamlit.testing.v1 import AppTest

    from ui import page_registry

    rows = []
    deadline = time.perf_counter() + plan.limits_s["pages"]
    for page in page_registry.ALL_PAGES:
        row: dict[str, Any] = {"page": page.file}
        rows.append(row)
        if time.perf_counter() > deadline:
            row["status"] = "not run: the step's time limit"
            continue
        params = {"device": plan.device.type}
        if plan.dry_run:
            params.update(page_registry.SMOKE_PARAMS.get(page.file, {}))
        if plan.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(plan.device)
        started = time.perf_counter()
        try:
            at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=max(30.0, deadline - time.perf_counter()))
            if page.file != "app.py":
                at.switch_page(page.file)
            for key, value in params.items():
                at.query_params[key] = value
            at.run()
            row["seconds"] = round(time.perf_counter() - started, 2)
            row["exceptions"] = [str(e.value)[:300] for e in at.exception]
            notices = " ".join(str(w.value) for w in at.warning)
            row["device_refused"] = "not available on this machine" in notices
            row["charts"] = len(at.get("plotly_chart"))
            if plan.device.type == "cuda":
                row["gpu_peak_mib"] = round(torch.cuda.max_memory_allocated(plan.device) / 2**20, 1)
            row["status"] = "ok" if not row["exceptions"] and not row["device_refused"] else "failed"
        except Exception as exc:
            row["seconds"] = round(time.perf_counter() - started, 2)
            row["status"] = f"failed: {type(exc).__name__}: {str(exc)[:300]}"
        print(f"  {page.file}: {row['status']} ({row['seconds']} s)", flush=True)
        if progress is not None:
            progress(rows)
    return rows


def optional_table(module: str, plan: Plan, out: Path) -> dict[str, Any]:
    """Another benchmark's table on this device (benchmarks.memory_model, benchmarks.precision), in-process."""
    try:
        bench = importlib.import_module(module)
    except ImportError as exc:
        return {"status": f"not run: {exc}"}
    argv = ["--device", plan.device.type, "--out", str(out)]
    if plan.dry_run:
        argv.append("--quick")
        if module == "benchmarks.memory_model":
            argv += ["--sizes", "256"]  # a rehearsal: every method once, at the smallest size that means anything
    result = bench.main(argv)
    return {"status": "ok", "result": result if isinstance(result, dict | list) else None}


# ------------------------------------------------------------------ tables


def gpu_tag(info: dict[str, Any]) -> str:
    """'h100' from 'NVIDIA H100 80GB HBM3'; 'cpu_dry_run' for the rehearsal."""
    if info.get("dry_run"):
        return "cpu_dry_run"
    name = str(info.get("gpu", "gpu")).lower()
    match = re.search(r"\b([a-z]{1,3}\d{1,4}[a-z]?)\b", name.replace("nvidia", ""))
    return match.group(1) if match else re.sub(r"[^a-z0-9]+", "_", name).strip("_") or "gpu"


def _fmt(value: float, spec: str, scale: float = 1.0) -> str:
    return "–" if value is None or not math.isfinite(value) else format(value * scale, spec)


def scaling_markdown(rows: list[ScalingRow]) -> str:
    lines = [
        "| dtype | n | method | status | time (ms) | × SDPA | peak (MiB) | model (MiB) | peak/model | error |",
        "| --- | ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    reference = {(r.dtype, r.n): r.seconds for r in rows if r.method.startswith("sdpa")}
    for r in rows:
        ratio = r.seconds / reference.get((r.dtype, r.n), math.nan)
        status = (r.status if r.status.startswith("ok") else r.status[:90]) + (f"; {r.note}" if r.note else "")
        name = r.method + (" (half-native)" if r.half_native and r.dtype != "float32" else "")
        lines.append(
            f"| {r.dtype} | {r.n} | {name} | {status} | {_fmt(r.seconds, '.3f', 1e3)} | {_fmt(ratio, '.2f')} | "
            f"{_fmt(r.peak_bytes, '.1f', 2**-20)} | {_fmt(r.model_bytes, '.1f', 2**-20)} | "
            f"{_fmt(r.memory_ratio, '.2f')} | {_fmt(r.error, '.2e')} |"
        )
    return "\n".join(lines)


def slopes(rows: list[ScalingRow]) -> dict[str, dict[str, float]]:
    """Log-log slope of time against n over the measured sizes from 4K up (1 is linear)."""
    from core.profiling import loglog_slope

    found: dict[str, dict[str, float]] = {}
    for dtype in sorted({r.dtype for r in rows}):
        for method in dict.fromkeys(r.method for r in rows):
            points = [
                (r.n, r.seconds) for r in rows if r.method == method and r.dtype == dtype and r.status.startswith("ok")
            ]
            points = [p for p in points if p[0] >= 4096] if len([p for p in points if p[0] >= 4096]) >= 2 else points
            if len(points) >= 2:
                found.setdefault(dtype, {})[method] = round(loglog_slope(*zip(*points, strict=True)), 3)
    return found


def markdown(report: dict[str, Any]) -> str:
    info = report["facts"]
    dry = info.get("dry_run")
    title = "GPU check: CPU dry run (small sizes; no GPU number here)" if dry else f"GPU check: {info.get('gpu')}"
    lines = [f"# {title}", ""]
    lines.append(
        f"torch {info.get('torch')}, CUDA {info.get('cuda')}, Python {info.get('python')}, "
        f"{info.get('nvidia_smi', info.get('gpu'))}; commit {report.get('commit')}; {report.get('date')}."
    )
    budget = report.get("budget_s")
    lines += ["", "## Steps", ""]
    if budget is not None:
        took = f"; the check took {report['seconds']:.0f} s" if "seconds" in report else " (still running)"
        start = f" (the first {report['start_s']:g} s: imports)" if "start_s" in report else ""
        lines += [f"Budget {budget:g} s, planned as each step's limit below{took}{start}.", ""]
    lines += ["| step | status | seconds | limit (s) |", "| --- | --- | ---: | ---: |"]
    for step, done in report["steps"].items():
        limit = done.get("limit_s")
        lines.append(f"| {step} | {done['status'][:160]} | {done['seconds']:.1f} | {'–' if limit is None else limit} |")
    tests = report.get("tests")
    if isinstance(tests, dict):
        lines += ["", "## Tests", ""]
        for name, result in tests.items():
            if isinstance(result, dict):
                lines.append(f"- {name}: {result.get('line', result.get('status'))}")
                lines += [f"  - failed: `{test}`" for test in result.get("failed", [])[:20]]
    rows = report.get("scaling_rows")
    if rows:
        marker = " (CPU dry run)" if dry else ""
        lines += ["", f"## Scaling{marker}: {report['scaling_settings']}", "", scaling_markdown(rows)]
        lines += ["", "Time slope (log-log, n >= 4K where measured): " + json.dumps(report.get("slopes", {}))]
    compare = report.get("compare")
    if isinstance(compare, dict) and "warm_total_s" in compare:
        engine = ", ".join(f"{m} {s * 1e3:.1f} ms" for m, s in compare["warm_engine_s"].items())
        lines += [
            "",
            f"## Compare's default view at n = {compare['n']}, {compare['heads']} heads",
            "",
            f"Warm: {compare['warm_total_s'] * 1e3:.1f} ms in all (exact, the methods, their dense matrices and "
            f"errors, copies to the host); engine calls alone {compare['warm_engine_total_s'] * 1e3:.1f} ms "
            f"({engine}). Cold: {compare['cold_total_s'] * 1e3:.1f} ms.",
        ]
    jobs_on_worker = report.get("cluster")
    if isinstance(jobs_on_worker, dict) and jobs_on_worker.get("rows"):
        lines += [
            "",
            f"## Compare's jobs on a GPU worker (Dask, loopback), n = {jobs_on_worker['n']}",
            "",
            "| method | device | resources | submit to result (ms) | engine on the worker (ms) | engine here (ms) "
            "| max metric difference |",
            "| --- | --- | --- | ---: | ---: | ---: | ---: |",
        ]
        lines += [
            f"| {r['method']} | {r['device']} | {r['resources']} | {r['submit_to_result_s'] * 1e3:.1f} | "
            f"{r['worker_engine_s'] * 1e3:.1f} | {r['here_engine_s'] * 1e3:.1f} | {r['max_metric_difference']:.2e} |"
            for r in jobs_on_worker["rows"]
        ]
    page_rows = report.get("pages")
    if page_rows:
        lines += ["", "## Pages through AppTest", "", "| page | status | seconds | charts | GPU peak (MiB) |"]
        lines.append("| --- | --- | ---: | ---: | ---: |")
        for row in page_rows:
            lines.append(
                f"| {row['page']} | {str(row.get('status'))[:100]} | {row.get('seconds', '–')} | "
                f"{row.get('charts', '–')} | {row.get('gpu_peak_mib', '–')} |"
            )
            lines += [f"| | exception: {e[:150]} | | | |" for e in row.get("exceptions", [])]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ running the steps within their limits


STARTUP_S = 15.0  # a budget keeps this back: the check's start (its imports) and the last tables
END_S = 8.0  # kept back after the last step: the last tables, the process's exit (the fork server's too)
STOP_GRACE_S = 3.0  # a step past its limit gets SIGTERM this long before it, to stop what it started


def plan_limits(plan: Plan, steps: tuple[str, ...], budget_s: float | None) -> dict[str, float | str]:
    """Each step's time limit in seconds, or why it does not run. Without a budget, the plan's limits. With one,
    each step gets the least it needs (while those fit in the budget less STARTUP_S; the last steps in order are
    dropped first), then the rest of the time is shared by each step's expected time, capped at its limit."""
    chosen = [s for s in STEPS if s in steps]
    if budget_s is None:
        return {s: plan.limits_s[s] for s in chosen}
    available = budget_s - STARTUP_S
    dropped: dict[str, float | str] = {}
    while chosen and sum(plan.least_s[s] for s in chosen) > available:
        last = chosen.pop()
        left = available - sum(plan.least_s[s] for s in chosen)
        dropped[last] = (
            f"not run: --budget {budget_s:g} s leaves it {max(left, 0):.0f} s, under the {plan.least_s[last]:g} s "
            "it needs"
        )
    share = {s: min(plan.least_s[s], plan.limits_s[s]) for s in chosen}
    spare = available - sum(share.values())
    while spare > 1e-9:  # shared by expected time; what a step's cap leaves goes round again to the others
        open_steps = [s for s in chosen if share[s] < plan.limits_s[s] - 1e-9]
        if not open_steps:
            break
        total = sum(plan.expected_s[s] for s in open_steps)
        given = 0.0
        for s in open_steps:
            extra = min(spare * plan.expected_s[s] / total, plan.limits_s[s] - share[s])
            share[s] += extra
            given += extra
        spare -= given
    return {s: (share[s] if s in share else dropped[s]) for s in STEPS if s in steps}


def step_limit(share: float, later: float, left: float, cap: float) -> float:
    """A step's limit when it starts: its planned ``share``, with ``later`` seconds planned for the steps after it and
    ``left`` seconds of the budget left. What earlier steps (or the start) left unused goes to this step, up to its
    ``cap``; time they overran is taken from this step and the later ones in proportion to their shares, not from
    this step alone (a slow start once left the first step, facts, nothing)."""
    if left >= share + later:
        return min(cap, left - later)
    return min(cap, share * max(left, 0.0) / (share + later))


class StepStopped(BaseException):
    """Raised in a step's process by SIGTERM: its time limit came (``finally`` blocks stop what it started). Not an
    Exception, so the code that records a method's failure and goes on lets it through."""


def _on_sigterm(signum: int, frame: Any) -> None:
    raise StepStopped("the step's time limit")


def _save(path: Path, state: dict[str, Any]) -> None:
    part = path.with_suffix(".part")
    part.write_text(json.dumps(harness.finite(state), default=str))
    os.replace(part, path)


def step_child(name: str, plan: Plan, out: str, state_file: str) -> None:
    """One step in its own process (and process group, so stopping it reaches what it started): it saves its
    partial result and the call in flight to ``state_file`` as it goes, then its result or failure."""
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)
    signal.signal(signal.SIGTERM, _on_sigterm)
    path, folder = Path(state_file), Path(out)
    state: dict[str, Any] = {"result": None, "in_flight": None, "done": False}
    try:
        if name == "facts":
            state["result"] = facts(plan)
        elif name == "tests":
            state["result"] = run_tests(plan, folder, gpu_tag({"dry_run": plan.dry_run, **facts_of(folder)}))
            if any(part.get("status") == TESTS_CUT for part in state["result"].values() if isinstance(part, dict)):
                raise StepStopped(TESTS_CUT)  # a part left out for time: the step says so, not "ok"
        elif name == "scaling":
            rows: list[ScalingRow] = []

            def progress(in_flight: str | None) -> None:
                state.update(result=[vars(r) for r in rows], in_flight=in_flight)
                _save(path, state)

            scaling(plan, rows, progress)
            state["result"] = [vars(r) for r in rows]
        elif name == "compare":
            state["result"] = compare_view(plan)
        elif name == "cluster":
            state["result"] = cluster_jobs(plan)
        elif name == "pages":

            def page_progress(rows: list[dict[str, Any]]) -> None:
                state["result"] = rows
                _save(path, state)

            state["result"] = pages(plan, page_progress)
        elif name in ("memory", "precision"):
            state["result"] = optional_table(f"benchmarks.{'memory_model' if name == 'memory' else name}", plan, folder)
        else:
            raise ValueError(f"unknown step {name!r}")
        state.update(done=True, in_flight=None)
    except StepStopped:
        state["stopped"] = True
    except Exception as exc:
        state.update(error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc()[-4000:])
        print(state["traceback"], flush=True)
    _save(path, state)


def facts_of(out: Path) -> dict[str, Any]:
    """The facts step's result, saved beside the tables (a later step's process names its files by the GPU)."""
    path = out / ".gpu-check" / "facts.json"
    with contextlib.suppress(OSError, ValueError):
        return json.loads(path.read_text()).get("result") or {}
    return {}


def _signal(process: multiprocessing.process.BaseProcess, sig: int) -> None:
    """``sig`` to the step's process group (what it started too), or to the process if it has no group yet."""
    if process.pid is None or not process.is_alive():
        return
    try:
        os.killpg(process.pid, sig)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, sig)


def _descendants(pid: int | None) -> list[Any]:
    """The processes a step started, its own sessions' too (the cluster's Dask processes), by psutil; [] without."""
    try:
        import psutil

        return list(psutil.Process(pid).children(recursive=True)) if pid else []
    except Exception:  # psutil missing, or the process already gone
        return []


def _end_leftovers(started: list[Any]) -> None:
    """Stop what a stopped step started and left running (SIGKILL can land in its clean-up). The step is at its limit
    already and had its SIGTERM's grace, so they get half a second in all, not 3 s each (a cluster step's Dask
    processes once took its stop 2.8 s past the limit)."""
    alive = [p for p in started if p.is_running()]
    if not alive:
        return
    import psutil  # there: ``_descendants`` found them with it

    for proc in alive:
        with contextlib.suppress(Exception):
            proc.terminate()
    _, alive = psutil.wait_procs(alive, timeout=0.5)
    for proc in alive:
        with contextlib.suppress(Exception):
            proc.kill()
    psutil.wait_procs(alive, timeout=1.0)


def preloaded_modules(steps: Collection[str]) -> list[str]:
    """What the fork server imports before any step starts. Streamlit only with the pages step (AppTest drives the
    pages): the engine's steps read the page defaults from ``service.fields``, so they run on a host without it."""
    engine = (
        ["service.compute", "service.views", "service.fields"] if {"compare", "cluster", "pages"} & set(steps) else []
    )
    front = ["ui.page_registry"] if "pages" in steps else []  # loads the ui package, and Streamlit with it
    # FlexAttention's row (scaling) imports torch._dynamo: 3-9 s on the 2-core machine, paid once, before the clocks
    flex = ["torch._dynamo"] if "scaling" in steps else []
    return ["benchmarks.gpu", "core", *flex, *engine, *front]


def run_step(
    name: str, plan: Plan, out: Path, limit_s: float, on_progress: Callable[[dict[str, Any]], None]
) -> tuple[dict[str, Any], str, float]:
    """Run one step in a fresh process from the fork server, at most ``limit_s`` seconds (a call in flight
    included). Returns (its saved state, its status, seconds)."""
    folder = out / ".gpu-check"
    folder.mkdir(exist_ok=True)
    state_file = folder / f"{name}.json"
    state_file.unlink(missing_ok=True)
    context = multiprocessing.get_context("forkserver")
    step_plan = Plan(**{**vars(plan), "limits_s": {**plan.limits_s, name: limit_s}})
    started = time.perf_counter()
    process = context.Process(target=step_child, args=(name, step_plan, str(out), str(state_file)), name=name)
    with harness.parents_main_hidden():
        process.start()
    seen = 0.0
    stopped = False
    left_behind: list[Any] = []
    grace_s = min(STOP_GRACE_S, limit_s / 4)  # SIGTERM this long before the limit, SIGKILL at it
    while process.is_alive():
        ran = time.perf_counter() - started
        process.join(max(0.05, min(1.0, limit_s - grace_s - ran if not stopped else limit_s - ran)))
        with contextlib.suppress(OSError, ValueError):
            changed = state_file.stat().st_mtime
            if changed != seen:
                seen = changed
                on_progress(json.loads(state_file.read_text()))
        ran = time.perf_counter() - started
        if process.is_alive() and not stopped and ran >= limit_s - grace_s:
            stopped = True
            left_behind = _descendants(process.pid)
            _signal(process, signal.SIGTERM)
        elif process.is_alive() and stopped and ran >= limit_s:
            left_behind += [p for p in _descendants(process.pid) if p not in left_behind]
            _signal(process, signal.SIGKILL)
            process.join(5.0)
    if stopped:
        _end_leftovers(left_behind)
    seconds = time.perf_counter() - started
    state: dict[str, Any] = {}
    with contextlib.suppress(OSError, ValueError):
        state = json.loads(state_file.read_text())
    if state.get("done"):
        status = "ok"
    elif state.get("error"):
        status = f"failed: {state['error']}"
    elif stopped or state.get("stopped"):
        flight = f", stopped in {state['in_flight']}" if state.get("in_flight") else ""
        status = f"stopped at its limit of {limit_s:.0f} s{flight}"
    else:
        status = f"failed: its process ended with code {process.exitcode} and no result"
    return state, status, seconds


def _fill_unreached(report: dict[str, Any], plan: Plan, limit_s: float) -> None:
    """After a stopped scaling step: the row in flight, and a row for each point it never reached, saying why."""
    rows: list[ScalingRow] = report.setdefault("scaling_rows", [])
    for row in rows:
        if row.status == "measuring":
            row.status = f"not run: stopped in flight at the step's limit of {limit_s:.0f} s"
    have = {(r.method, r.n, r.dtype) for r in rows}
    rows += [
        ScalingRow(m, n, dtype, {}, status=f"not run: the step's limit of {limit_s:.0f} s came first")
        for m, n, dtype in planned_rows(plan)
        if (m, n, dtype) not in have
    ]


def _take(report: dict[str, Any], name: str, result: Any) -> None:
    """A step's (partial) result into the report."""
    if name == "scaling":
        fields = set(ScalingRow.__dataclass_fields__)
        rows = [ScalingRow(**{k: v for k, v in r.items() if k in fields}) for r in result or []]
        for row in rows:  # JSON wrote NaN as null
            for key in ("seconds", "peak_bytes", "model_bytes", "error"):
                if getattr(row, key) is None:
                    setattr(row, key, math.nan)
        report["scaling_rows"] = rows
        report["slopes"] = slopes(rows)
    elif result is not None:
        report[name] = result


def _process_age_s() -> float:
    """Seconds since this process started (psutil where it is installed; else since this module was imported)."""
    try:
        import psutil

        return time.time() - psutil.Process().create_time()
    except ImportError:
        return time.perf_counter() - _IMPORTED


def run(
    out: Path,
    dry_run: bool,
    steps: tuple[str, ...] = STEPS,
    limits: dict[str, float] | None = None,
    budget_s: float | None = None,
) -> dict[str, Any]:
    # The budget counts from this process's start: its own imports are part of the check's time.
    begun = time.perf_counter() - _process_age_s()
    plan = Plan.make(dry_run)
    for name, seconds in (limits or {}).items():  # a step given its own limit is expected to use it
        plan.limits_s[name] = plan.expected_s[name] = seconds
    out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {
        "steps": {},
        "commit": harness.commit(ROOT) or "unknown",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "budget_s": budget_s,
        "facts": {"dry_run": dry_run, "device": str(plan.device)},
    }
    planned = plan_limits(plan, steps, budget_s)
    report["planned_limits_s"] = {k: (round(v, 1) if isinstance(v, float) else v) for k, v in planned.items()}
    print(f"==> plan (budget {budget_s} s): {json.dumps(report['planned_limits_s'])}", flush=True)
    # Steps run in processes forked from a server that imported the engine once and never touched CUDA.
    multiprocessing.set_forkserver_preload(preloaded_modules(steps))
    warm = multiprocessing.get_context("forkserver").Process(target=time.sleep, args=(0,))
    with harness.parents_main_hidden():
        warm.start()  # the server's imports, before any step's clock starts
    warm.join()
    report["start_s"] = round(time.perf_counter() - begun, 1)
    print(f"==> started in {report['start_s']} s (the fork server's imports included)", flush=True)
    tag = gpu_tag(report["facts"])
    if "scaling" in steps:
        report["scaling_settings"] = (
            f"{plan.heads} heads, d = {D}, clustered input (n / 64 clusters, spread 0.3), tau 0.3, "
            f"{ROW_BUDGET} stored scores per query (core.budget_params at fraction {ROW_BUDGET}/n), device "
            f"{plan.device.type}; times are warm medians ({'CUDA events' if plan.device.type == 'cuda' else 'wall'})"
        )
    names = list(planned)
    for index, name in enumerate(names):
        limit = planned[name]
        if isinstance(limit, str):
            report["steps"][name] = {"status": limit, "seconds": 0.0}
            continue
        if budget_s is not None:
            later = sum(v for v in (planned[s] for s in names[index + 1 :]) if not isinstance(v, str))
            left = budget_s - END_S - (time.perf_counter() - begun)
            limit = step_limit(limit, later, left, plan.limits_s[name])
            if limit < plan.least_s[name]:
                report["steps"][name] = {
                    "status": f"not run: {max(limit, 0):.0f} s of the budget left, under the {plan.least_s[name]:g} s "
                    "it needs",
                    "seconds": 0.0,
                }
                write(report, out, tag, quiet=True)
                continue
        print(f"==> {name} (limit {limit:.0f} s)", flush=True)

        def progress(state: dict[str, Any], name: str = name, tag: str = tag) -> None:
            _take(report, name, state.get("result"))
            write(report, out, tag, quiet=True)

        state, status, seconds = run_step(name, plan, out, limit, progress)
        _take(report, name, state.get("result"))
        if name == "facts" and isinstance(state.get("result"), dict):
            print(json.dumps(report["facts"], indent=1), flush=True)
            tag = gpu_tag(report["facts"])
        if name == "scaling" and not status.startswith("ok"):
            _fill_unreached(report, plan, limit)
            report["slopes"] = slopes(report["scaling_rows"])
        if state.get("traceback"):
            report.setdefault("tracebacks", {})[name] = state["traceback"]
        report["steps"][name] = {"status": status, "seconds": seconds, "limit_s": round(limit, 1)}
        print(f"    {name}: {status} ({seconds:.1f} s of {limit:.0f})", flush=True)
        write(report, out, tag, quiet=True)
    report["seconds"] = time.perf_counter() - begun
    write(report, out, tag)
    return report


def write(report: dict[str, Any], out: Path, tag: str, quiet: bool = False) -> None:
    data = dict(report)
    data["scaling_rows"] = [
        {**vars(r), "memory_ratio": r.memory_ratio} for r in report.get("scaling_rows", []) if isinstance(r, ScalingRow)
    ]
    (out / f"gpu_check_{tag}.json").write_text(json.dumps(harness.finite(data), indent=1, default=str) + "\n")
    text = markdown(report)
    (out / f"gpu_check_{tag}.md").write_text(text)
    if quiet:
        return
    print(text, flush=True)
    print(f"wrote {out / f'gpu_check_{tag}.md'} and .json", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="folder for the tables and the test log")
    parser.add_argument("--dry-run", action="store_true", help="the same steps on the CPU at small sizes")
    parser.add_argument("--steps", default=",".join(STEPS), help=f"comma-separated subset of {','.join(STEPS)}")
    parser.add_argument(
        "--limits", default="", help="seconds per step, e.g. tests=100,scaling=90 (default: the plan's)"
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=None,
        metavar="SECONDS",
        help="the whole check's time: the steps are planned to fit (a lent machine's time), each says what it reached",
    )
    args = parser.parse_args(argv)
    steps = tuple(s for s in args.steps.split(",") if s)
    unknown = set(steps) - set(STEPS)
    if unknown:
        parser.error(f"unknown steps {sorted(unknown)}; choose from {', '.join(STEPS)}")
    try:
        limits = {k: float(v) for k, v in (item.split("=") for item in args.limits.split(",") if item)}
    except ValueError:
        parser.error(f"--limits takes step=seconds pairs, got {args.limits!r}")
    if args.budget is not None and not args.budget > STARTUP_S:
        parser.error(f"--budget takes seconds above {STARTUP_S:g}, got {args.budget:g}")
    report = run(args.out, args.dry_run, steps, limits, args.budget)
    failed = [name for name, step in report["steps"].items() if step["status"].startswith("failed")]
    return 1 if failed else 0


if __name__ == "__main__":
    # Run as benchmarks.gpu, not __main__, so the step processes find step_child under its module's name.
    sys.exit(importlib.import_module("benchmarks.gpu").main())
