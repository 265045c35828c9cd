"""Each method's error in half precision (issue #31): bfloat16 and float16 inputs against the float32 call on the
same rounded values, and against exact attention in float64, next to whether the method is half-native.

    python -m benchmarks.precision                  # n = 1024, d = 64, 8 heads, budget 1/8, tau 0.3
    python -m benchmarks.precision --device cuda    # on a GPU host: precision_cuda.{md,json}
    python -m benchmarks.precision --quick          # n = 256, 2 heads, short fits (a smoke run)

The input is the clustered one of benchmarks.method_times (sqrt(n) clusters, spread 0.3, seed 0), rounded to each
half precision; its float32 copy holds the same values. Errors are relative Frobenius errors of the output, the
largest over the heads (as tests/test_precision.py bounds them). A method that is not half-native computes half
inputs in float32, so its distance from the float32 call is the final rounding alone.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import torch

import core
from benchmarks.harness import RESULTS_DIR, machine_facts, write_results
from core.approximation import HALF_ERROR_FACTOR, UNIT_ROUNDOFF
from core.device import describe, resolve_device

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
# rpca's 60 default iterations take minutes per call at n = 1024, and 5 took 40-50 s per call, three quarters of the
# table's time; its half error is the final rounding either way.
SHORT = {"rpca": {"iterations": 2}}
QUICK = {"learned_kernel": {"steps": 5}, "rpca": {"iterations": 2}}


def relative_error(output: torch.Tensor, reference: torch.Tensor) -> float:
    return float(core.metrics.relative_output_error(output.double(), reference.double()).max())


def measure(method: str, x: core.data.Inputs, scale: float, params: dict[str, Any]) -> dict[str, Any]:
    """The errors of one method in each half precision, and of its float32 call on the bfloat16 values."""
    row: dict[str, Any] = {"method": method, "half_native": core.methods()[method].half_native, "params": params}
    for label, dtype in DTYPES.items():
        q, k, v = (t.to(dtype) for t in (x.q, x.k, x.v))
        low = core.approximate(method, q, k, v, scale=scale, seed=0, **params).output
        ref = core.approximate(method, q.float(), k.float(), v.float(), scale=scale, seed=0, **params).output
        q64, k64, v64 = q.double(), k.double(), v.double()
        exact = torch.softmax(scale * q64 @ k64.transpose(-1, -2), dim=-1) @ v64
        row[label] = {
            "dtype": str(low.dtype),
            "vs_float32": relative_error(low, ref),
            "vs_float32_roundoffs": relative_error(low, ref) / UNIT_ROUNDOFF[dtype],
            "vs_exact": relative_error(low, exact),
        }
        if label == "bf16":
            row["float32_vs_exact"] = relative_error(ref, exact)
    row["bound_roundoffs"] = HALF_ERROR_FACTOR.get(method)
    return row


def markdown(rows: list[dict[str, Any]], args: argparse.Namespace, device: torch.device) -> str:
    command = "python -m benchmarks.precision" + (" --quick" if args.quick else "")
    if device.type != "cpu":
        command += f" --device {device.type}"
    lines = [
        f"`{command}`",
        "",
        f"{describe(device)}, torch {torch.__version__}. Clustered input, n = {args.n}, d = {args.d}, "
        f"{args.heads} heads, budget {args.fraction:g}, tau {args.tau:g}; relative output error, the largest over "
        "the heads. *vs float32*: the half call against the float32 call on the same rounded values, with its "
        "multiple of the unit roundoff u (2^-8 for bf16, 2^-11 for fp16); *vs exact*: against exact attention in "
        "float64 on those values. *bound*: the stated error (core.approximation.HALF_ERROR_FACTOR, in u) that "
        "tests/test_precision.py checks at n = 256. Shortened fits: "
        + ", ".join(
            f"{m} {', '.join(f'{k} = {v}' for k, v in p.items())}" for m, p in (QUICK if args.quick else SHORT).items()
        )
        + ".",
        "",
        "| method | half-native | bf16 vs float32 | fp16 vs float32 | bound (u) | float32 vs exact | bf16 vs exact "
        "| fp16 vs exact |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['method']} | {'yes' if r['half_native'] else 'no'} | failed: {r['error'][:200]} "
                         "| | | | | |")  # fmt: skip
            continue
        bound = "" if r["bound_roundoffs"] is None else f"{r['bound_roundoffs']:g}"
        lines.append(
            f"| {r['method']} | {'yes' if r['half_native'] else 'no'} "
            f"| {r['bf16']['vs_float32']:.2e} ({r['bf16']['vs_float32_roundoffs']:.2f} u) "
            f"| {r['fp16']['vs_float32']:.2e} ({r['fp16']['vs_float32_roundoffs']:.2f} u) | {bound} "
            f"| {r['float32_vs_exact']:.2e} | {r['bf16']['vs_exact']:.2e} | {r['fp16']['vs_exact']:.2e} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1024)
    parser.add_argument("--d", type=int, default=64)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--fraction", type=float, default=1 / 8)
    parser.add_argument("--tau", type=float, default=0.3)
    parser.add_argument("--methods", nargs="*", default=None, help="default: every registered method")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--quick", action="store_true", help="n = 256, 2 heads, short fits (a smoke run)")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR, help="output folder (default benchmarks/results)")
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.heads = 256, 2
    device = resolve_device(args.device)
    load_start = os.getloadavg()
    x = core.data.clustered(args.n, args.d, max(1, int(args.n**0.5)), 0.3, 0, heads=args.heads).to(device)
    rows = []
    for method in args.methods or sorted(core.methods()):
        extra = QUICK if args.quick else SHORT
        params = {**core.budget_params(method, args.n, args.d, args.fraction), **extra.get(method, {})}
        try:
            row = measure(method, x, 1 / args.tau, params)
        except Exception as error:  # noqa: BLE001 - one failing method must not lose a GPU host's other rows
            row = {"method": method, "half_native": core.methods()[method].half_native, "params": params,
                   "error": f"{type(error).__name__}: {error}"}  # fmt: skip
            print(f"{method:<18} failed: {row['error']}", flush=True)
        else:
            print(f"{method:<18} half-native {row['half_native']!s:<5}  bf16 {row['bf16']['vs_float32']:.2e}  "
                  f"fp16 {row['fp16']['vs_float32']:.2e}  (vs float32)", flush=True)  # fmt: skip
        rows.append(row)
    result = {
        "machine": machine_facts(load_start),
        "device": describe(device),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "args": {k: v for k, v in vars(args).items() if k != "out"},
        "unit_roundoff": {label: UNIT_ROUNDOFF[dtype] for label, dtype in DTYPES.items()},
        "rows": rows,
    }
    name = f"precision_{device.type}" + ("_quick" if args.quick else "")
    write_results(args.out, name, result, markdown(rows, args, device))
    return result


if __name__ == "__main__":
    main()
