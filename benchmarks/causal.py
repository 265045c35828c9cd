"""Causal against non-causal attention (issue #30, item 2): each causal method's time, analytic memory and output
error against exact attention in the same mode, on the clustered input of benchmarks.method_times.

    python -m benchmarks.causal                # n = 4096, d = 64, 4 heads, budget 1/8, one thread
    python -m benchmarks.causal --quick        # n = 1024, 2 heads (a smoke run)

Times are the median of three warm calls. Errors are relative Frobenius errors of the output, exact attention in
the same mode (causal or not) as the reference.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path
from typing import Any

import torch

import core
from benchmarks.harness import RESULTS_DIR, machine_facts, write_results
from core import registry

TRAINABLE = {"learned_kernel", "hedgehog"}  # not timed here, as in benchmarks/method_times.py


def measure(n: int, d: int, heads: int, fraction: float) -> list[dict[str, Any]]:
    x = core.data.clustered(n, d, max(1, int(n**0.5)), 0.3, 0, heads=heads)
    rows = []
    for causal in (False, True):
        reference = core.approximate("exact", x.q, x.k, x.v, causal=causal).output
        for method in registry.causal_methods():
            if registry.get(method).family == "oracle" or method == "topk_renormalized":
                continue  # dense n x n: not an efficient path
            if method in TRAINABLE:
                continue  # each call trains its feature map (hedgehog refuses n = 4096 at 4 heads)
            params = {**core.budget_params(method, n, d, fraction), "causal": causal}
            result = core.approximate(method, x.q, x.k, x.v, **params)  # warm-up
            times = []
            for _ in range(3):
                start = time.perf_counter()
                result = core.approximate(method, x.q, x.k, x.v, **params)
                times.append(time.perf_counter() - start)
            error = float((result.output - reference).norm() / reference.norm())
            rows.append(
                {
                    "method": method,
                    "causal": causal,
                    "seconds": statistics.median(times),
                    "memory": result.cost.memory,
                    "flops": result.cost.flops,
                    "error": error,
                }
            )
    return rows


def markdown(rows: list[dict[str, Any]], n: int, d: int, heads: int, fraction: float, threads: int) -> str:
    lines = [
        f"# Causal against non-causal attention\n\n`python -m benchmarks.causal`: clustered input, n = {n}, d = {d}, "
        f"{heads} heads, budget {fraction:g}, float32, CPU, {threads} thread(s); median of 3 warm calls. Temperature: "
        f"the engine's default scale 1/sqrt(d) = {d**-0.5:.3g} (no scale given), so the rows are flat (near-uniform "
        "attention), not the app's tau 0.3.\n",
        "| method | causal | seconds | cost memory (scalars) | cost GFLOP | output error vs exact (same mode) |",
        "|---|---|---|---|---|---|",
    ]
    for r in sorted(rows, key=lambda r: (r["method"], r["causal"])):
        lines.append(
            f"| {r['method']} | {r['causal']} | {r['seconds']:.3f} | {r['memory']} | {r['flops'] / 1e9:.2f} | "
            f"{r['error']:.3g} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR, help="folder for the tables")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    n, heads = (1024, 2) if args.quick else (4096, 4)
    d, fraction = 64, 1 / 8
    load = os.getloadavg()
    rows = measure(n, d, heads, fraction)
    result = {"n": n, "d": d, "heads": heads, "fraction": fraction, "threads": args.threads, "rows": rows}
    result["machine"] = machine_facts(load)
    name = "causal_quick" if args.quick else "causal"
    write_results(args.out, name, result, markdown(rows, n, d, heads, fraction, args.threads))


if __name__ == "__main__":
    main()
