"""Every method's measured peak memory against its cost model, and Performer's time slope at fixed features.

    python -m benchmarks.memory_model                  # n = 4096 and 16384; writes memory_model_cpu.{md,json}
    python -m benchmarks.memory_model --quick          # n = 512 and 1024, into a temporary folder (a smoke run)
    python -m benchmarks.memory_model --device cuda    # peaks from torch.cuda.max_memory_allocated; memory_model_cuda.*
    python -m benchmarks.memory_model --slope          # Performer from n = 2K to 16K at 256 features, the committed
                                                       # performer.py beside the working tree; performer_slope_cpu.*

Memory: d = 64, one head, the input's dtype float32, one thread, each method at 1/8 of full attention's budget
(``core.budget_params``) on ``core.data.clustered(n, 64, n // 64, 0.3, 0)`` with scale 1 / 0.3 and seed 0. The
measured figure is ``core.profiling.measure_peak`` of ``core.approximate(...).output`` under
``torch.inference_mode()`` after one warm-up call (on a CPU: the resident-set high-water mark over the call, minus
the resident set before it; on CUDA: the allocator's peak over what was allocated before). The model is the
method's ``cost.memory`` (scalars) x 4 bytes. Methods that refuse the size (the oracles' ``max_n``, the trainable
kernel's training limit) are listed as not run.

Slope: the least-squares slope of log(time) against log(n) (``core.profiling.loglog_slope``) of the median process
CPU time of ``_run`` of the committed ``core/approximators/performer.py`` (``git show <ref>:...``, loaded as a module)
and of the working tree's, called alternately on the same prepared inputs, so both see the same machine load.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any
from unittest import mock

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as the app's server runs

import torch

import core  # noqa: E402
from benchmarks.harness import RESULTS_DIR, ROOT, commit, machine_facts, write_results  # noqa: E402
from core import registry  # noqa: E402
from core.approximation import AttentionInputs, prepare_inputs  # noqa: E402
from core.device import resolve_device, synchronize  # noqa: E402
from core.errors import ParameterError  # noqa: E402
from core.profiling import loglog_slope, measure_peak, model_cost, set_mmap_threshold  # noqa: E402

D = 64
SPREAD = 0.3
SCALE = 1 / SPREAD
FRACTION = 1 / 8
SIZES = (4096, 16384)
QUICK_SIZES = (512, 1024)
# --quick: the slow iterative methods run short (their memory does not depend on how long they run).
QUICK_PARAMS = {"rpca": {"iterations": 10}, "learned_kernel": {"steps": 5}}
# Not on an efficient path: the oracles build n x n matrices and the trainable kernel fits on n x rows scores.
NOT_EFFICIENT = frozenset({"topk", "topk_renormalized", "svd", "rpca", "learned_kernel"})
# On a CPU the peak is the resident set's: with glibc's default (a threshold that moves) a freed tensor may stay in
# the heap and a later one land on fresh pages, so the same call measured up to 1.5x apart from run to run. With
# this fixed threshold every tensor of 64 KiB or more gets its own mapping, returned to the OS when it is freed, and
# the peak counts the tensors alive together (small allocations still come from the heap).
MMAP_THRESHOLD_BYTES = 2**16
SLOPE_SIZES = (2048, 4096, 8192, 16384)
SLOPE_FEATURES = 256
PERFORMER_PATH = "core/approximators/performer.py"


# ------------------------------------------------------------------ memory against the model


def clustered_inputs(n: int, device: torch.device) -> core.data.Inputs:
    return core.data.clustered(n, D, max(1, n // 64), SPREAD, 0, heads=1).to(device)


def steady_allocator() -> bool:
    """Fix glibc's mmap threshold at MMAP_THRESHOLD_BYTES for this process (False where there is no glibc)."""
    return set_mmap_threshold(MMAP_THRESHOLD_BYTES)


def measure_method(
    method: str, n: int, x: core.data.Inputs, device: torch.device, extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    """One row of the table: the method's peak at size n against its model (or why it was not run)."""
    row: dict[str, Any] = {"method": method, "n": n, "efficient_path": method not in NOT_EFFICIENT}
    spec = registry.get(method)
    if spec.max_n is not None and n > spec.max_n:
        return {**row, "status": f"not run: an oracle, n <= {spec.max_n}"}
    params = {**core.budget_params(method, n, D, FRACTION), **(extra or {})}
    model = model_cost(method, n, D, 1, params)
    row["params"] = params
    row["model_bytes"] = float(model.memory) * 4 if model is not None else math.nan

    def call() -> torch.Tensor:
        with torch.inference_mode():
            return core.approximate(method, x.q, x.k, x.v, scale=SCALE, seed=0, **params).output

    try:
        call()  # warm-up: first-call setup (projection draws, caches) stays out of the peak
        synchronize(device)
    except ParameterError as exc:
        return {**row, "status": f"not run: {exc}"}
    _, peak = measure_peak(call, device)
    row["peak_bytes"] = math.nan if peak.bytes is None else float(peak.bytes)
    row["how"] = peak.how
    row["ratio"] = row["peak_bytes"] / row["model_bytes"] if row["model_bytes"] > 0 else math.nan
    row["status"] = "ok"
    return row


def memory_table(rows: list[dict[str, Any]], command: str, device: torch.device, state: str) -> str:
    lines = [
        f"`{command}`",
        "",
        f"Peak memory of `core.approximate(...).output` against the cost model, on {device.type}: d = {D}, one head, "
        f"float32, {torch.get_num_threads()} thread(s), budget 1/8 of full attention, clustered input, scale 1/0.3, "
        f"seed 0; one warm-up call, then one measured call. Model = cost.memory x 4 bytes. {state}",
        "",
        "| method | n | budget | measured MiB | model MiB | measured / model | efficient path |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        budget = ", ".join(f"{k}={v}" for k, v in (r.get("params") or {}).items() if _is_budget(r["method"], k))
        if r["status"] != "ok":
            lines.append(f"| {r['method']} | {r['n']} | {budget} | {r['status']} | | | |")
            continue
        lines.append(
            f"| {r['method']} | {r['n']} | {budget} | {r['peak_bytes'] / 2**20:.1f} | {r['model_bytes'] / 2**20:.1f} | "
            f"{r['ratio']:.2f} | {'yes' if r['efficient_path'] else 'no'} |"
        )
    return "\n".join(lines) + "\n"


def _is_budget(method: str, name: str) -> bool:
    return any(p.name == name and p.budgeted for p in registry.get(method).params)


def run_memory(
    sizes: tuple[int, ...], device: torch.device, methods: list[str], quick: bool = False
) -> list[dict[str, Any]]:
    rows = []
    for n in sizes:
        x = clustered_inputs(n, device)
        for method in methods:
            start = time.perf_counter()
            row = measure_method(method, n, x, device, QUICK_PARAMS.get(method) if quick else None)
            rows.append(row)
            what = f"{row['ratio']:.2f}x the model" if row["status"] == "ok" else row["status"]
            print(f"n={n} {method}: {what} ({time.perf_counter() - start:.1f} s)", flush=True)
    return rows


# ------------------------------------------------------------------ Performer's time slope


def committed_module(ref: str, path: str = PERFORMER_PATH) -> ModuleType:
    """``path`` as committed at ``ref``, imported as a separate module (its ``register`` call is skipped, so the
    working tree's method stays the registered one)."""
    source = subprocess.run(["git", "show", f"{ref}:{path}"], cwd=ROOT, capture_output=True, text=True, check=True)
    folder = Path(tempfile.mkdtemp(prefix="memory-model-"))
    file = folder / f"committed_{Path(path).stem}.py"
    file.write_text(source.stdout)
    spec = importlib.util.spec_from_file_location(file.stem, file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[file.stem] = module  # dataclasses look their module up there
    with mock.patch.object(registry, "register", lambda method_spec: method_spec):
        spec.loader.exec_module(module)
    return module


def cpu_seconds(call: Callable[[], Any]) -> tuple[float, float]:
    """(process CPU seconds, wall seconds) of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    call()
    return time.process_time() - cpu, time.perf_counter() - wall


def run_slope(ref: str, heads: int, repeats: int, sizes: tuple[int, ...]) -> dict[str, Any]:
    from core.approximators import performer

    versions = {"committed": committed_module(ref), "working tree": performer}
    params = registry.get("performer").validate({"features": SLOPE_FEATURES}, max(sizes), D)
    times: dict[str, dict[int, list[float]]] = {name: {} for name in versions}
    walls: dict[str, dict[int, list[float]]] = {name: {} for name in versions}
    largest_difference = 0.0
    for n in sizes:
        x = core.data.clustered(n, D, max(1, n // 64), SPREAD, 0, heads=heads)
        inputs = prepare_inputs(x.q, x.k, x.v, SCALE, 0)
        calls = {}
        for name, module in versions.items():

            def call(module: ModuleType = module, inputs: AttentionInputs = inputs) -> torch.Tensor:
                with torch.inference_mode():
                    return module._run(inputs, params).output

            calls[name] = call
        outputs = [call() for call in calls.values()]  # warm-up, and the numbers must agree
        largest_difference = max(largest_difference, float((outputs[0] - outputs[1]).abs().max()))
        for name in versions:
            times[name][n], walls[name][n] = [], []
        for _ in range(repeats):
            for name, call in calls.items():  # alternating, so both see the same load
                cpu, wall = cpu_seconds(call)
                times[name][n].append(cpu)
                walls[name][n].append(wall)
        medians = {name: statistics.median(times[name][n]) for name in versions}
        print(f"heads={heads} n={n}: " + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in medians.items()), flush=True)
    result: dict[str, Any] = {"heads": heads, "features": SLOPE_FEATURES, "sizes": list(sizes), "repeats": repeats}
    for name in versions:
        medians = [statistics.median(times[name][n]) for n in sizes]
        result[name] = {
            "median_cpu_s": medians,
            "median_wall_s": [statistics.median(walls[name][n]) for n in sizes],
            "cpu_s": [times[name][n] for n in sizes],
            "slope": loglog_slope(sizes, medians),
        }
    result["largest_output_difference"] = largest_difference
    return result


def slope_table(results: list[dict[str, Any]], command: str, ref: str) -> str:
    lines = [
        f"`{command}`",
        "",
        f"Performer (positive features, orthogonal) at a fixed {SLOPE_FEATURES} features, d = {D}, float32, "
        f"{torch.get_num_threads()} thread: median process CPU ms per call of `_run` over the repeats, the committed "
        f"{PERFORMER_PATH} ({ref}) and the working tree's called alternately on the same inputs. Slope: "
        "least-squares log-log slope of time against n (the cost model's is 1.0).",
        "",
        "| heads | version | " + " | ".join(f"n = {n}" for n in results[0]["sizes"]) + " | slope |",
        "|---|---|" + "---|" * len(results[0]["sizes"]) + "---|",
    ]
    for r in results:
        for name in ("committed", "working tree"):
            cells = " | ".join(f"{t * 1e3:.1f}" for t in r[name]["median_cpu_s"])
            lines.append(f"| {r['heads']} | {name} | {cells} | {r[name]['slope']:.2f} |")
    lines.append("")
    lines.append(
        "Largest difference between the two versions' outputs: "
        + ", ".join(f"{r['largest_output_difference']:.1e} ({r['heads']} head(s))" for r in results)
        + "."
    )
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ command line


def changed_engine_files() -> str:
    """', with uncommitted changes to <files>' for the engine files the working tree changes, or ''."""
    try:
        names = subprocess.run(
            ["git", "diff", "--name-only", "HEAD", "--", "core"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        return ""
    return f", with uncommitted changes to {', '.join(names)}" if names else ""


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="n = 512 and 1024 into a temporary folder (smoke run)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (default cpu)")
    parser.add_argument("--methods", nargs="*", default=None, help="default: every registered method")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default benchmarks/results)")
    parser.add_argument("--sizes", type=int, nargs="*", default=None, help="sequence lengths (default 4096 16384)")
    parser.add_argument(
        "--malloc-default", action="store_true", help="keep glibc's moving mmap threshold (noisier CPU peaks)"
    )
    parser.add_argument("--slope", action="store_true", help="Performer's time slope instead of the memory table")
    parser.add_argument("--baseline", default="HEAD", help="--slope: the git ref of the committed version")
    parser.add_argument("--heads", type=int, nargs="*", default=[1, 8], help="--slope: head counts")
    parser.add_argument("--repeats", type=int, default=7, help="--slope: timed calls of each version per size")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    out = args.out or (Path(tempfile.mkdtemp(prefix="memory-model-")) if args.quick else RESULTS_DIR)
    command = "python -m benchmarks.memory_model " + " ".join(argv if argv is not None else sys.argv[1:])
    load_start = os.getloadavg()
    state = f"Working tree on commit {commit(ROOT)}{changed_engine_files()}."
    if args.slope:
        sizes = SLOPE_SIZES[:2] if args.quick else SLOPE_SIZES
        repeats = 2 if args.quick else args.repeats
        results = [run_slope(args.baseline, heads, repeats, sizes) for heads in args.heads]
        result = {"machine": machine_facts(load_start), "baseline": args.baseline, "state": state, "runs": results}
        write_results(out, "performer_slope_cpu", result, slope_table(results, command.strip(), args.baseline))
        return result
    device = resolve_device(args.device)
    methods = args.methods or list(core.methods())
    if device.type == "cpu" and not args.malloc_default:
        steady = steady_allocator()
        state += f" glibc mmap threshold fixed at {MMAP_THRESHOLD_BYTES // 1024} KiB: {'yes' if steady else 'no'}."
    sizes = tuple(args.sizes) if args.sizes else QUICK_SIZES if args.quick else SIZES
    rows = run_memory(sizes, device, methods, quick=args.quick)
    facts = machine_facts(load_start)
    result = {"machine": facts, "device": device.type, "threads": torch.get_num_threads(), "state": state, "rows": rows}
    if device.type == "cuda":
        result["device_name"] = torch.cuda.get_device_name(device)
    write_results(out, f"memory_model_{device.type}", result, memory_table(rows, command.strip(), device, state))
    return result


if __name__ == "__main__":
    main()
