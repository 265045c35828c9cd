"""The GPU check: one command that proves the CUDA path and measures it, on a bare GPU host.

    scripts/gpu-check.sh OUT              # on the GPU host, from the repository root (installs carried wheels)
    scripts/gpu-check.sh OUT --dry-run    # the same steps on the CPU at small sizes (CI runs this)
    python -m benchmarks.gpu OUT [--dry-run] [--steps facts,tests,scaling,compare,pages,memory,precision]

Steps, each with its own time limit, so the whole check ends within about 7 minutes on an H100:
- facts: GPU, driver, torch, CUDA, cuDNN, Python, the SDPA kernels torch offers;
- tests: tests/test_cuda.py, then the engine tests with CUDA as torch's default device (pytest --torch-device);
- scaling: every method at n = 1K, 4K, 16K, 64K (8 heads, d = 64) in float32 and bfloat16, next to flash SDPA:
  warm median time from CUDA events, peak GPU memory against the method's cost model, error against exact;
- compare: the Compare page's default view computed at n = 4096 through the app's compute path;
- pages: every page's default view through Streamlit's AppTest with ?device=cuda;
- memory, precision: the memory-vs-model and half-precision tables (benchmarks.memory_model, benchmarks.precision).

Writes gpu_check_<gpu>.md and .json (for example gpu_check_h100.md) and pytest_<gpu>.log to OUT; a dry run writes
gpu_check_cpu_dry_run.* with every table marked as a CPU dry run. Nothing here needs a network.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from benchmarks import harness
from core.device import synchronize

ROOT = Path(__file__).resolve().parent.parent
STEPS = ("facts", "tests", "scaling", "compare", "cluster", "pages", "memory", "precision")
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
DRY_RUN_FIRST_ONLY = ("rpca", "svd", "learned_kernel", "hedgehog")  # seconds per call on a CPU even at n = 128
# Not efficient paths (n x n oracles, a kernel trained per call): timed at the smallest size, after the others.
REFERENCE_ONLY = ("topk", "topk_renormalized", "svd", "rpca", "learned_kernel", "hedgehog")
HEADS, D = 8, 64
BETA = 1 / 0.3  # tau 0.3, as benchmarks.suite
ROW_BUDGET = 256  # stored scores per query: fixed parameters as n grows, as benchmarks.suite
TRAINED_MAX_N = 1024  # learned_kernel and hedgehog train per call: their time is training, not attention
TRAINED = ("learned_kernel", "hedgehog")
COMPARE_N = 4096


@dataclass(frozen=True)
class Plan:
    """Sizes and time limits of one check: a GPU host's, or the CPU dry run's."""

    dry_run: bool
    device: torch.device
    sizes: tuple[int, ...]
    dtypes: tuple[str, ...]
    heads: int
    limits_s: dict[str, float] = field(default_factory=dict)
    point_limit_s: float = 5.0  # a method stops growing n when its next point is predicted above this

    @classmethod
    def make(cls, dry_run: bool) -> Plan:
        if dry_run:
            limits = {"tests": 240, "scaling": 120, "compare": 60, "cluster": 90, "pages": 300, "memory": 120}
            limits["precision"] = 120
            return cls(True, torch.device("cpu"), (128, 256), ("float32", "bfloat16"), 2, limits, 1.0)
        if not torch.cuda.is_available():
            raise SystemExit("no CUDA device here: run with --dry-run for the CPU rehearsal")
        limits = {"tests": 150, "scaling": 150, "compare": 30, "cluster": 60, "pages": 120, "memory": 40}
        limits["precision"] = 30
        sizes = (1024, 4096, 16384, 65536)
        return cls(False, torch.device("cuda"), sizes, ("float32", "bfloat16"), HEADS, limits, 2.0)


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
            smi = subprocess.run(["nvidia-smi", query, "--format=csv,noheader"], capture_output=True, text=True)
            info["nvidia_smi"] = smi.stdout.strip() or smi.stderr.strip()
    else:
        info["gpu"] = "none (CPU dry run)"
    for module in ("numpy", "streamlit", "plotly", "pydantic_settings", "diskcache", "transformers"):
        try:
            info[module] = importlib.import_module(module).__version__
        except Exception as exc:  # a missing package is a fact to report, not a crash
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
                results[name] = {"status": "not run: the step's time limit"}
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


def scaling(plan: Plan, rows: list[ScalingRow], progress: Callable[[], None] | None = None) -> None:
    """Every method against the SDPA reference at each size and dtype, within the step's time limit; ``rows``
    fills as it goes, so a failure keeps what was measured. The efficient methods go first, over every size; the
    oracles and the trainable kernel (n x n work, training) follow at the smallest size, so they cannot starve them."""
    deadline = time.perf_counter() + plan.limits_s["scaling"]
    last: dict[tuple[str, str], ScalingRow] = {}
    efficient = [m for m in scaling_methods() if m not in REFERENCE_ONLY]
    for n in plan.sizes:  # sizes outside: the time limit then cuts the largest n of every method alike
        for dtype_name in plan.dtypes:
            _scaling_point(plan, rows, last, n, dtype_name, efficient, deadline, with_sdpa=True)
            if progress is not None:
                progress()
    for dtype_name in plan.dtypes:
        slow = [m for m in scaling_methods() if m in REFERENCE_ONLY]
        _scaling_point(plan, rows, last, plan.sizes[0], dtype_name, slow, deadline, with_sdpa=False)
    if progress is not None:
        progress()


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

    if with_sdpa:
        ref = ScalingRow(label, n, dtype_name, {})
        _measure(ref, sdpa_call, exact32, device, deadline, plan.point_limit_s)
        rows.append(ref)
    for method in methods:
        spec = registry.get(method)
        row = ScalingRow(method, n, dtype_name, {}, half_native=bool(getattr(spec, "half_native", False)))
        rows.append(row)
        try:
            row.params = core.budget_params(method, n, D, min(1.0, ROW_BUDGET / n))
            cost = profiling.model_cost(method, n, D, plan.heads, row.params)
        except Exception as exc:
            row.status = f"not run: {exc}"
            continue
        size = torch.empty(0, dtype=dtype).element_size() if row.half_native else 4
        row.model_bytes = float(cost.memory) * size if cost is not None else math.nan
        previous = last.get((method, dtype_name))
        if spec.max_n is not None and n > spec.max_n:
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
        if row.status != "ok":
            continue

        def call(method: str = method, params: dict[str, Any] = row.params) -> torch.Tensor:
            with torch.inference_mode():
                return core.approximate(method, x.q, x.k, x.v, scale=BETA, seed=0, **params).output

        _measure(row, call, exact32, device, deadline, plan.point_limit_s)
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
            row.seconds, row.repeats = warm_median(call, device, budget_s=0.3 if device.type == "cuda" else 0.2)
    except Exception as exc:  # a method that fails on the device is a finding: record it and go on
        row.status = f"failed: {type(exc).__name__}: {str(exc)[:200]}"
        if device.type == "cuda":
            torch.cuda.empty_cache()


def compare_runs(plan: Plan) -> tuple[Any, float, list[Any]]:
    """(input spec, beta, one ``MethodRun`` view per default method) of the Compare page's default view at n = 4096
    (the dry run: 256) on the check's device."""
    from ui import presets, views

    sidebar = importlib.import_module("ui.sidebar")  # the package exports a function of that name
    n = 256 if plan.dry_run else COMPARE_N
    defaults = dict(sidebar.DEFAULTS)
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
        for m in presets.COMPARE_METHODS
    ]
    return spec, beta, runs


def compare_view(plan: Plan) -> dict[str, Any]:
    """The Compare page's default view through ui.compute: exact, then each default method with its errors, as the
    page computes them (no cache). Warm: the second pass is timed."""
    from ui import compute, presets, views

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
        "methods": list(presets.COMPARE_METHODS),
        "cold_total_s": passes[0]["total_s"],
        "warm_total_s": passes[1]["total_s"],
        "warm_engine_s": passes[1]["engine_s"],
        "warm_engine_total_s": sum(passes[1]["engine_s"].values()),
    }


def cluster_jobs(plan: Plan) -> dict[str, Any]:
    """A GPU worker computing for a web replica (issue 32): a Dask scheduler and one worker advertising ``GPU=1`` on
    loopback (deploy/cluster.py), this process in the replica's place. Compare's default methods go as jobs through
    ui.jobs and ui.cluster (``device=cuda`` jobs need the GPU resource); each result must match the same view computed
    here. Times: submit to result (transfer included), and the engine's own on the worker."""
    import tempfile

    import numpy as np

    from deploy.cluster import start_scheduler, start_worker, wait_for_workers
    from deploy.processes import stop
    from ui import cluster, compute, jobs

    _, _, runs = compare_runs(plan)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="gpu-check-cluster-") as folder:
        run_dir, env = Path(folder), dict(os.environ)
        scheduler, address = start_scheduler(run_dir, env)
        worker = start_worker(run_dir, env, address, "gpu-1", gpu=True, torch_threads=max(1, os.cpu_count() or 1))
        runner = cluster.ClusterRunner(address)
        sched = jobs.Scheduler(1, is_active=lambda session: None, cluster=lambda: runner)
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
                        "resources": cluster.resources_for(run),
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


def pages(plan: Plan) -> list[dict[str, Any]]:
    """Every page's default view through AppTest with ?device=cuda: no exception, the device really used."""
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
        status = r.status if r.status.startswith("ok") else r.status[:60]
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
    lines += ["", "## Steps", "", "| step | status | seconds |", "| --- | --- | ---: |"]
    for step, done in report["steps"].items():
        lines.append(f"| {step} | {done['status'][:120]} | {done['seconds']:.1f} |")
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


@contextlib.contextmanager
def _step(report: dict[str, Any], name: str, out: Path | None = None) -> Iterator[None]:
    """Run one step: its failure is recorded, not raised; the tables are rewritten after it (``out``), so a check
    stopped from outside keeps every step it finished."""
    print(f"==> {name}", flush=True)
    started = time.perf_counter()
    status = "ok"
    try:
        yield
    except Exception as exc:
        status = f"failed: {type(exc).__name__}: {exc}"
        report.setdefault("tracebacks", {})[name] = traceback.format_exc()[-4000:]
        print(report["tracebacks"][name], flush=True)
    report["steps"][name] = {"status": status, "seconds": time.perf_counter() - started}
    print(f"    {name}: {status} ({report['steps'][name]['seconds']:.1f} s)", flush=True)
    if out is not None and "facts" in report:
        write(report, out, gpu_tag(report["facts"]), quiet=True)


def run(
    out: Path, dry_run: bool, steps: tuple[str, ...] = STEPS, limits: dict[str, float] | None = None
) -> dict[str, Any]:
    plan = Plan.make(dry_run)
    plan.limits_s.update(limits or {})
    out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {
        "steps": {},
        "commit": harness.commit(ROOT) or "unknown",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    with _step(report, "facts", out):
        report["facts"] = facts(plan)
        print(json.dumps(report["facts"], indent=1), flush=True)
    tag = gpu_tag(report["facts"])
    if "tests" in steps:
        with _step(report, "tests", out):
            report["tests"] = run_tests(plan, out, tag)
    if "scaling" in steps:
        report["scaling_settings"] = (
            f"{plan.heads} heads, d = {D}, clustered input (n / 64 clusters, spread 0.3), tau 0.3, "
            f"{ROW_BUDGET} stored scores per query (core.budget_params at fraction {ROW_BUDGET}/n), device "
            f"{plan.device.type}; times are warm medians ({'CUDA events' if plan.device.type == 'cuda' else 'wall'})"
        )
        with _step(report, "scaling", out):
            rows: list[ScalingRow] = []
            report["scaling_rows"] = rows
            scaling(plan, rows, lambda: write(report, out, tag, quiet=True))
            report["slopes"] = slopes(rows)
    if "compare" in steps:
        with _step(report, "compare", out):
            report["compare"] = compare_view(plan)
    if "cluster" in steps:
        with _step(report, "cluster", out):
            report["cluster"] = cluster_jobs(plan)
    if "pages" in steps:
        with _step(report, "pages", out):
            report["pages"] = pages(plan)
    for name, module in (("memory", "benchmarks.memory_model"), ("precision", "benchmarks.precision")):
        if name in steps:
            with _step(report, name, out):
                report[name] = optional_table(module, plan, out)
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
    args = parser.parse_args(argv)
    steps = tuple(s for s in args.steps.split(",") if s)
    unknown = set(steps) - set(STEPS)
    if unknown:
        parser.error(f"unknown steps {sorted(unknown)}; choose from {', '.join(STEPS)}")
    try:
        limits = {k: float(v) for k, v in (item.split("=") for item in args.limits.split(",") if item)}
    except ValueError:
        parser.error(f"--limits takes step=seconds pairs, got {args.limits!r}")
    report = run(args.out, args.dry_run, steps, limits)
    failed = [name for name, step in report["steps"].items() if step["status"] != "ok"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
