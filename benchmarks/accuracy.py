"""Each method's error on the clustered input at three temperatures, at an equal memory budget.

    python -m benchmarks.accuracy [--n 512] [--fraction 0.125] [--out DIR]

Prints a table and writes benchmarks/results/accuracy.{csv,json}.
"""

from __future__ import annotations

import argparse
import csv
import json
import platform
from pathlib import Path

import torch

import core
from benchmarks.harness import RESULTS_DIR


def main(argv: list[str] | None = None) -> list[dict[str, object]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=512)
    parser.add_argument("--d", type=int, default=64)
    parser.add_argument("--clusters", type=int, default=32)
    parser.add_argument("--spread", type=float, default=0.3)
    parser.add_argument("--fraction", type=float, default=1 / 8)
    parser.add_argument("--betas", type=float, nargs="+", default=[1.0, 4.0, 16.0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR, help="output folder (default benchmarks/results)")
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    inputs = core.data.clustered(args.n, args.d, args.clusters, args.spread, args.seed)
    names = [name for name in core.methods() if name != "exact" and name != "learned_kernel"]
    rows = []
    for beta in args.betas:
        exact = core.approximate("exact", inputs.q, inputs.k, inputs.v, scale=beta)
        exact_attention = exact.attention()
        entropy = float(core.metrics.mean_row_entropy(exact_attention).mean())
        for name in names:
            params = core.budget_params(name, args.n, args.d, args.fraction)
            approx = core.approximate(name, inputs.q, inputs.k, inputs.v, scale=beta, seed=args.seed, **params)
            rows.append(
                {
                    "method": name,
                    "beta": beta,
                    "entropy": round(entropy, 3),
                    "attention_error": float(
                        core.metrics.relative_frobenius_error(approx.attention(), exact_attention).mean()
                    ),
                    "output_error": float(core.metrics.relative_output_error(approx.output, exact.output).mean()),
                    "params": json.dumps(params, sort_keys=True),
                }
            )
    header = f"{'method':<14}" + "".join(
        f"  beta={b:<6g} (H={r['entropy']:.2f})"
        for b, r in zip(args.betas, [next(x for x in rows if x["beta"] == b) for b in args.betas], strict=True)
    )
    print(
        f"clustered n={args.n} d={args.d} clusters={args.clusters} spread={args.spread}, budget {args.fraction:g} "
        "of full; relative Frobenius error of the attention matrix"
    )
    print(header)
    for name in names:
        cells = [next(r for r in rows if r["method"] == name and r["beta"] == b) for b in args.betas]
        print(f"{name:<14}" + "".join(f"  {c['attention_error']:<22.3f}" for c in cells))
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "accuracy.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    meta = {
        "machine": platform.machine(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "args": {k: v for k, v in vars(args).items() if k != "out"},
    }
    (args.out / "accuracy.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    return rows


if __name__ == "__main__":
    main()
