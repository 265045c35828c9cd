"""NSA, MoBA, Hedgehog and Based beside the papers' methods (issue #40): CPU time at n = 4096 and 1/8 budget, and
accuracy at 1/8 budget on the clustered input at tau = 0.05, 0.2, 1 and on MiniLM's real heads.

    python -m benchmarks.newer_methods [--n 4096] [--threads 1] [--repeats 3] [--quick] [--out DIR]

Times: one head (d = 64) of the clustered input (sqrt(n) clusters, spread 0.3, scale 3 as benchmarks.method_times),
each method at its 1/8 budget, one untimed warm-up call and then ``--repeats`` calls: median and fastest wall time and
the process's CPU time. Hedgehog's call includes fitting its map (100 Adam steps, its default); its row with
steps = 0 is the attention alone. One head, because Hedgehog's fit at n = 4096 and 1/8 budget (d' = 128) is at the
engine's training limit with one head. Oracles (topk_renormalized too: it builds n x n) and the trainable kernel
are skipped.

Accuracy: relative Frobenius error of the attention matrix against exact attention, mean over heads, at the 1/8
budget: the clustered input at the explorer's defaults (n = 512, d = 64, 32 clusters, spread 0.1, 4 heads, seed 0),
with cluster members at random positions (Process 1) and with them in contiguous runs (``order_by_cluster``), at
tau = 0.05, 0.2 and 1; and MiniLM's 72 heads on the default text (51 tokens) at tau = 1, at 1/8 and at the real
input's default budget 1/2. Writes benchmarks/results/newer_methods_cpu.{md,json}.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

import core
from benchmarks.harness import RESULTS_DIR, commit, machine_facts, write_results
from core import compare
from core.device import describe, resolve_device, synchronize

NEW = ("nsa", "moba", "hedgehog", "based")
SKIP = {"topk", "topk_renormalized", "svd", "rpca", "learned_kernel"}  # oracles and the trainable kernel
CONTEXT = ("lsh", "local", "performer", "scatterbrain", "nystrom")  # the papers' methods beside them in accuracy
TAUS = (0.05, 0.2, 1.0)
ROOT = Path(__file__).resolve().parent.parent


def time_methods(n: int, d: int, fraction: float, repeats: int, device: torch.device) -> list[dict[str, Any]]:
    x = core.data.clustered(n, d, max(1, int(n**0.5)), 0.3, 0, heads=1).to(device)
    plan: list[tuple[str, str, dict[str, Any]]] = []
    for name in core.methods():
        if name in SKIP:
            continue
        params = core.budget_params(name, n, d, fraction)
        plan.append((name, name, params))
        if name == "hedgehog":
            plan.append(("hedgehog (steps=0: attention only)", name, {**params, "steps": 0}))
    rows = []
    for label, name, params in plan:

        def call(name: str = name, params: dict[str, Any] = params) -> None:
            core.approximate(name, x.q, x.k, x.v, scale=3.0, **params)
            synchronize(device)

        call()  # warm-up
        walls, cpus = [], []
        for _ in range(repeats):
            wall, cpu = time.perf_counter(), time.process_time()
            call()
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
        rows.append(
            {
                "method": label,
                "new": name in NEW,
                "median_s": statistics.median(walls),
                "fastest_s": min(walls),
                "cpu_median_s": statistics.median(cpus),
                "params": params,
            }
        )
        print(f"{label:<36} {statistics.median(walls):9.4f} s", flush=True)
    exact = next(r["median_s"] for r in rows if r["method"] == "exact")
    for row in rows:
        row["ratio_to_exact"] = row["median_s"] / exact
    return rows


def clustered_accuracy(n: int, fraction: float, heads: int) -> list[dict[str, Any]]:
    methods = [*NEW, *CONTEXT]
    rows = []
    for order in (False, True):
        x = core.data.clustered(n, 64, 32, 0.1, 0, heads=heads, order_by_cluster=order)
        for tau in TAUS:
            errors = compare.attention_errors(x.q, x.k, x.v, methods, scale=1 / tau, fraction=fraction, seed=0)
            for method, error in errors.items():
                positions = "contiguous clusters" if order else "random positions"
                rows.append({"input": f"clustered, {positions}", "tau": tau, "method": method, "error": error})
    return rows


def real_accuracy(fractions: tuple[float, ...]) -> list[dict[str, Any]]:
    x = core.data.real()
    methods = [*NEW, *CONTEXT]
    rows = []
    for fraction in fractions:
        per_method: dict[str, list[float]] = {m: [] for m in methods}
        for layer in range(x.q.shape[0]):
            for head in range(x.q.shape[1]):
                q, k, v = x.q[layer, head], x.k[layer, head], x.v[layer, head]
                errors = compare.attention_errors(q, k, v, methods, scale=1.0, fraction=fraction, seed=0)
                for method, error in errors.items():
                    per_method[method].append(error)
        wins = {m: 0 for m in methods}
        for i in range(len(per_method[methods[0]])):
            wins[min(methods, key=lambda m: per_method[m][i])] += 1
        for method, errors in per_method.items():
            rows.append(
                {
                    "input": f"MiniLM, {len(errors)} heads, n = {x.q.shape[-2]}",
                    "tau": 1.0,
                    "fraction": fraction,
                    "method": method,
                    "error": statistics.mean(errors),
                    "median_error": statistics.median(errors),
                    "heads_won": wins[method],
                }
            )
    return rows


def markdown(meta: dict[str, Any], times: list[dict[str, Any]], clustered: list[dict], real: list[dict]) -> str:
    lines = [
        "# NSA, MoBA, Hedgehog and Based beside the papers' methods",
        "",
        f"`{meta['command']}` at commit {meta['commit']}, {meta['device']}, torch {meta['torch']}, "
        f"{meta['threads']} thread(s), load {meta['machine'].get('load_average_at_end')}.",
        "",
        f"## CPU time: n = {meta['n']}, d = {meta['d']}, one head, budget {meta['fraction']:g}, scale 3 (tau = 1/3)",
        "",
        "| method | median s | fastest s | CPU s | x exact | new |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for r in times:
        lines.append(
            f"| {r['method']} | {r['median_s']:.4f} | {r['fastest_s']:.4f} | {r['cpu_median_s']:.4f} | "
            f"{r['ratio_to_exact']:.2f} | {'yes' if r['new'] else ''} |"
        )
    methods = list(dict.fromkeys(r["method"] for r in clustered))
    lines += ["", f"## Attention error at budget {meta['fraction']:g} (relative Frobenius, mean over heads)", ""]
    inputs = list(dict.fromkeys(r["input"] for r in clustered))
    lines.append("| input | tau | " + " | ".join(methods) + " |")
    lines.append("|---|---:|" + "---:|" * len(methods))
    for name in inputs:
        for tau in TAUS:
            cells = {r["method"]: r["error"] for r in clustered if r["input"] == name and r["tau"] == tau}
            lines.append(f"| {name} | {tau:g} | " + " | ".join(f"{cells[m]:.3f}" for m in methods) + " |")
    if real:
        lines += ["", "Real heads (tau = 1): mean error over the heads (heads won)", ""]
        lines.append("| input | budget | " + " | ".join(methods) + " |")
        lines.append("|---|---:|" + "---:|" * len(methods))
        for fraction in dict.fromkeys(r["fraction"] for r in real):
            cells = {r["method"]: r for r in real if r["fraction"] == fraction}
            name = next(r["input"] for r in real)
            lines.append(
                f"| {name} | {fraction:g} | "
                + " | ".join(f"{cells[m]['error']:.3f} ({cells[m]['heads_won']})" for m in methods)
                + " |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--d", type=int, default=64)
    parser.add_argument("--fraction", type=float, default=1 / 8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--quick", action="store_true", help="small sizes, no real model (the catalogue's check)")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR, help="output folder (default benchmarks/results)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    load_start = __import__("os").getloadavg()
    n = 256 if args.quick else args.n
    times = time_methods(n, args.d, args.fraction, 1 if args.quick else args.repeats, device)
    clustered = clustered_accuracy(128 if args.quick else 512, args.fraction, 2 if args.quick else 4)
    real = [] if args.quick else real_accuracy((args.fraction, 0.5))
    meta = {
        "command": "python -m benchmarks.newer_methods " + " ".join(argv if argv is not None else sys.argv[1:]),
        "commit": commit(ROOT),
        "device": describe(device),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "n": n,
        "d": args.d,
        "fraction": args.fraction,
        "scale_for_times": 3.0,
        "taus_for_accuracy": list(TAUS),
        "machine": machine_facts(load_start),
    }
    result = {"meta": meta, "times": times, "clustered_accuracy": clustered, "real_accuracy": real}
    name = "newer_methods_cpu" if device.type == "cpu" else f"newer_methods_{device.type}"
    write_results(args.out, name, result, markdown(meta, times, clustered, real))
    return result


if __name__ == "__main__":
    main()
