"""The sparse side's hashing (issue #30): angular LSH (Reformer, cosine order) against SMYRF's XBOX+ then E2LSH
(inner-product order), for lsh and scatterbrain at equal budget, on the clustered input and the real MiniLM heads.

    python -m benchmarks.hashing          # clustered n = 1024 (3 spreads x 3 betas), offset keys, 72 real heads
    python -m benchmarks.hashing --quick  # n = 256, one setting, one seed, 12 real heads (a smoke run)

Both hashings get the same parameters (``core.budget_params`` at each budget, so the same rounds and buckets: the
same number of scores), only ``hashing`` differs. Per row and hashing: the output's relative error against exact
attention (median over the heads, mean over the hash seeds), the recall of each query's top keys by q.k (the share of
its top min(8, ceil(n / 8)) keys inside the support, over every query, head and seed) and the median seconds per call
(``torch.utils.benchmark``, one warm-up). Inputs:

- *clustered*: Scatterbrain's Process 1 (K = Q, norms near 1), sqrt(n) clusters, at each spread and inverse
  temperature beta;
- *offset keys*: Gaussian queries; keys Gaussian with log-normal norms plus a shared offset of length 4 (the shape
  of trained heads' keys), where cosine and inner-product rankings differ; beta = 1 / sqrt(d);
- *real*: all-MiniLM-L6-v2's 6 x 12 heads on the app's default text (n = 51), at the model's own temperature
  (beta = 1, q pre-scaled), at the app's 1/8 budget and at 1/4.
"""

from __future__ import annotations

import argparse
import math
import os
from functools import partial
from pathlib import Path
from typing import Any

import torch

import core
from benchmarks.harness import RESULTS_DIR, machine_facts, time_engine, write_results
from core import hashing_study
from core.approximators.lsh import HASHINGS
from core.claims.inputs import real_heads

METHODS = ("lsh", "scatterbrain")


def offset_keys(n: int, d: int, heads: int, seed: int) -> core.data.Inputs:
    g = torch.Generator().manual_seed(seed)
    offset = 4 * torch.nn.functional.normalize(torch.randn(d, generator=g, dtype=torch.float64), dim=0)
    q = torch.randn(heads, n, d, generator=g, dtype=torch.float64)
    norms = torch.exp(torch.randn(heads, n, 1, generator=g, dtype=torch.float64))
    k = torch.randn(heads, n, d, generator=g, dtype=torch.float64) * norms + offset
    v = torch.randn(heads, n, d, generator=g, dtype=torch.float64)
    return core.data.Inputs(q.float(), k.float(), v.float(), meta={"kind": "offset_keys", "n": n, "d": d})


def measure(
    x: core.data.Inputs, beta: float, method: str, params: dict[str, Any], seeds: int, repeats: int
) -> dict[str, Any]:
    """core.hashing_study's errors and recalls, plus each hashing's median seconds per call."""
    row = hashing_study.measure_hashings(x.q, x.k, x.v, beta=beta, method=method, params=params, seeds=range(seeds))
    for hashing in HASHINGS:
        chosen = {**row["params"], "hashing": hashing}
        timing = time_engine(
            partial(core.approximate, method, x.q, x.k, x.v, scale=beta, seed=0, **chosen), repeats=repeats
        )
        row[hashing]["seconds"] = float(timing.median)
    return row


def entropy(x: core.data.Inputs, beta: float) -> float:
    attention = core.approximate("exact", x.q, x.k, x.v, scale=beta).attention()
    return float(core.metrics.mean_row_entropy(attention).mean())


def markdown(rows: list[dict[str, Any]], args: argparse.Namespace, facts: dict[str, Any]) -> str:
    command = "python -m benchmarks.hashing" + (" --quick" if args.quick else "")
    lines = [
        f"`{command}`",
        "",
        f"CPU ({facts['machine']['cpus']} cores, load {facts['machine']['load_average_at_start']} at the start), "
        f"torch {torch.__version__}, {args.threads} thread(s); {args.seeds} hash seed(s). Equal parameters for both "
        "hashings (core.budget_params at the budget; only `hashing` differs). *error*: relative output error "
        "against exact attention, median over heads, mean over seeds; *recall*: share of each query's top "
        "min(8, ceil(n/8)) keys by q.k inside the support; *chance*: the recall of random balanced chunks, "
        "1 - (1 - c/n)^rounds; *ms*: median per call. Bold: the better hashing.",
        "",
        "| input | beta | H (nats) | budget | method | error angular | error xbox_e2lsh | recall angular "
        "| recall xbox_e2lsh | chance | ms angular | ms xbox_e2lsh |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]

    def pair(row: dict[str, Any], key: str, fmt: str, lower_is_better: bool) -> str:
        a, b = row["angular"][key], row["xbox_e2lsh"][key]
        cells = [format(a, fmt), format(b, fmt)]
        if a != b:
            better = 0 if (a < b) == lower_is_better else 1
            cells[better] = f"**{cells[better]}**"
        return " | ".join(cells)

    for r in rows:
        lines.append(
            f"| {r['input']} | {r['beta']:g} | {r['entropy']:.2f} | {r['budget']} | {r['method']} | "
            f"{pair(r, 'output_error', '.3f', True)} | {pair(r, 'top_key_recall', '.3f', False)} | "
            f"{r['chance_recall']:.3f} | "
            f"{r['angular']['seconds'] * 1e3:.1f} | {r['xbox_e2lsh']['seconds'] * 1e3:.1f} |"
        )
    lines += ["", "Rows where each hashing has the lower error / the higher recall:", ""]
    for source in dict.fromkeys(r["source"] for r in rows):
        for method in METHODS:
            mine = [r for r in rows if r["source"] == source and r["method"] == method]
            if not mine:
                continue
            err = sum(r["xbox_e2lsh"]["output_error"] < r["angular"]["output_error"] for r in mine)
            rec = sum(r["xbox_e2lsh"]["top_key_recall"] > r["angular"]["top_key_recall"] for r in mine)
            lines.append(
                f"- {source}, {method}: xbox_e2lsh lower error in {err} of {len(mine)}, higher recall in "
                f"{rec} of {len(mine)}"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1024)
    parser.add_argument("--d", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--spreads", type=float, nargs="+", default=[0.1, 0.3, 0.5])
    parser.add_argument("--betas", type=float, nargs="+", default=[1.0, 4.0, 16.0])
    parser.add_argument("--fraction", type=float, default=1 / 8, help="budget of the synthetic inputs")
    parser.add_argument("--real-fractions", type=float, nargs="+", default=[1 / 8, 1 / 4])
    parser.add_argument("--real-heads", type=int, default=72, help="the first this many of the 72 real heads")
    parser.add_argument("--seeds", type=int, default=3, help="hash seeds per row")
    parser.add_argument("--repeats", type=int, default=3, help="timing: about this many calls' worth of blocks")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="n = 256, one setting, one seed, 12 real heads")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR, help="output folder (default benchmarks/results)")
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.heads, args.spreads, args.betas, args.seeds, args.repeats = 256, 2, [0.3], [4.0], 1, 1
        args.real_fractions, args.real_heads = [1 / 8], 12
    torch.set_num_threads(args.threads)
    load_start = os.getloadavg()
    rows: list[dict[str, Any]] = []

    def run(source: str, label: str, x: core.data.Inputs, beta: float, fraction: float) -> None:
        n, d = x.q.shape[-2], x.q.shape[-1]
        h = entropy(x, beta)
        for method in METHODS:
            params = core.budget_params(method, n, d, fraction)
            row = measure(x, beta, method, params, args.seeds, args.repeats)
            budget = f"1/{round(1 / fraction)}"
            rows.append(
                {
                    "source": source,
                    "input": label,
                    "beta": beta,
                    "entropy": h,
                    "budget": budget,
                    "method": method,
                    **row,
                }
            )
            print(
                f"{label:<28} beta {beta:<5g} {method:<13} error {row['angular']['output_error']:.3f} / "
                f"{row['xbox_e2lsh']['output_error']:.3f}  recall {row['angular']['top_key_recall']:.3f} / "
                f"{row['xbox_e2lsh']['top_key_recall']:.3f}  (angular / xbox_e2lsh)",
                flush=True,
            )

    clusters = max(1, round(math.sqrt(args.n)))
    for spread in args.spreads:
        x = core.data.clustered(args.n, args.d, clusters, spread, 0, heads=args.heads)
        for beta in args.betas:
            run("clustered", f"clustered spread {spread:g}", x, beta, args.fraction)
    run("offset keys", "offset keys", offset_keys(args.n, args.d, args.heads, 0), 1 / math.sqrt(args.d), args.fraction)
    real = real_heads()
    q, k, v = (t[: args.real_heads].float() for t in (real.q, real.k, real.v))
    x = core.data.Inputs(q, k, v, meta=dict(real.meta))
    for fraction in args.real_fractions:
        run("real", f"real MiniLM ({x.q.shape[0]} heads, n={x.q.shape[-2]})", x, 1.0, fraction)
    facts = {"machine": machine_facts(load_start)}
    result = {
        **facts,
        "torch": torch.__version__,
        "threads": args.threads,
        "args": {k: v for k, v in vars(args).items() if k != "out"},
        "clusters": clusters,
        "rows": rows,
    }
    name = "hashing" + ("_quick" if args.quick else "")
    write_results(args.out, name, result, markdown(rows, args, facts))
    return result


if __name__ == "__main__":
    main()
