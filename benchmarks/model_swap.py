"""Methods swapped into the real model (issue #39): retrieval accuracy and embedding cosine per method at 1/8 and 1/4
of the budget, all six layers and all heads swapped, on the shipped corpus (assets/corpus/python_reference.txt).

    python -m benchmarks.model_swap                 # the committed table: 64 passages, 2 seeds
    python -m benchmarks.model_swap --quick         # 6 passages, 2 methods, 1 seed (a smoke run)

Each passage's first half retrieves its second half among the slice's second halves by all-MiniLM-L6-v2's sentence
embedding (mean-pooled, normalised); the exact model is the first row. Temperature: the model's own (tau = 1, scale
1/sqrt(32) on its queries). Randomised methods run with seeds 0..seeds-1: the table gives their mean and range.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from benchmarks.harness import RESULTS_DIR, commit, machine_facts, write_results
from core import model_swap, registry

ROOT = Path(__file__).resolve().parent.parent
METHODS = ("performer", "nystrom", "lsh", "scatterbrain", "local", "linformer")
FRACTIONS = (1 / 8, 1 / 4)


def summarise(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Mean and range over seeds per (method, fraction)."""
    frame = pd.DataFrame(rows)
    columns = ["top1", "top5", "cosine", "agree_top1", "agree_top5"]
    grouped = frame.groupby(["method", "fraction"], sort=False)[columns]
    out = (
        grouped.mean().add_suffix("_mean").join(grouped.min().add_suffix("_min")).join(grouped.max().add_suffix("_max"))
    )
    out["seeds"] = frame.groupby(["method", "fraction"], sort=False)["seed"].nunique()
    return out.reset_index()


def markdown(summary: pd.DataFrame, meta: dict[str, Any]) -> str:
    lines = [
        "# Methods swapped into all-MiniLM-L6-v2: retrieval and embedding cosine\n",
        f"`{meta['command']}` at commit {meta['commit']}, on {meta['device']} ({meta['threads']} thread(s)), "
        f"{meta['seconds']:.0f} s. Corpus: the first {meta['passages']} passages of "
        "assets/corpus/python_reference.txt (Python Language Reference, PSF licence); each first half retrieves its "
        "second half among all second halves. All 6 layers and all 12 heads swapped; temperature: the model's own "
        "(tau = 1). Randomised methods: mean over seeds 0.."
        f"{meta['seeds'] - 1}, range in brackets.\n",
        "| method | budget | top-1 | top-5 | cosine to exact embedding | top-1 same as exact | top-5 overlap "
        "with exact | seeds |",
        "|---|---|---|---|---|---|---|---|",
    ]

    def cell(row: Any, name: str, digits: str = ".2f") -> str:
        mean, low, high = row[f"{name}_mean"], row[f"{name}_min"], row[f"{name}_max"]
        text = f"{mean:{digits}}"
        return text + (f" [{low:{digits}}, {high:{digits}}]" if row["seeds"] > 1 else "")

    for _, row in summary.iterrows():
        budget = "full" if row["method"] == "exact" else f"1/{1 / row['fraction']:.0f}"
        lines.append(
            f"| {row['method']} | {budget} | {cell(row, 'top1')} | {cell(row, 'top5')} | {cell(row, 'cosine', '.3f')}"
            f" | {cell(row, 'agree_top1')} | {cell(row, 'agree_top5')} | {row['seeds']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--passages", type=int, default=64)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--methods", nargs="+", default=list(METHODS))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR, help="folder for the tables")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    passages, seeds, methods = (
        (6, 1, ["performer", "nystrom"]) if args.quick else (args.passages, args.seeds, args.methods)
    )
    for method in methods:
        registry.get(method)
    load = os.getloadavg()
    at_commit = commit(ROOT)  # the engine that runs, even if HEAD moves during the run
    start = time.perf_counter()
    rows = model_swap.retrieval(
        model_swap.corpus()[:passages],
        methods,
        FRACTIONS,
        seeds=seeds,
        device=args.device,
        progress=lambda fraction, label: print(f"{fraction:5.0%} {label}", flush=True),
    )
    seconds = time.perf_counter() - start
    command = "python -m benchmarks.model_swap" + (" --quick" if args.quick else "")
    if not args.quick and (passages, seeds, args.threads) != (64, 2, 1):
        command += f" --passages {passages} --seeds {seeds} --threads {args.threads}"
    meta = {
        "command": command,
        "commit": at_commit,
        "device": args.device,
        "threads": args.threads,
        "passages": passages,
        "seeds": seeds,
        "temperature": "the model's own (tau = 1)",
        "layers": list(range(model_swap.LAYERS)),
        "heads": "all",
        "seconds": seconds,
    }
    summary = summarise(rows)
    result = {**meta, "rows": rows, "summary": summary.to_dict("records"), "machine": machine_facts(load)}
    name = "model_swap_quick" if args.quick else "model_swap"
    write_results(args.out, name, result, markdown(summary, meta))


if __name__ == "__main__":
    main()
