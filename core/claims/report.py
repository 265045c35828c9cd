"""The claims table as the command line writes it: ``python -m core.claims`` measures every claim and writes
benchmarks/results/claims.md and .json."""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from core.claims.catalog import CLAIMS, SKIPPED
from core.claims.claim import INPUTS, ClaimResult, Measurement
from core.claims.measuring import run_claim


def fmt_value(m: Measurement | None) -> str:
    if m is None:
        return "–"
    v = m.value
    return f"{v:.3g}" if v == 0 or 1e-3 <= abs(v) < 1e4 else f"{v:.1e}"


def table_rows(results: Sequence[ClaimResult]) -> list[dict[str, Any]]:
    rows = []
    for r in results:
        row: dict[str, Any] = {"claim": r.id, "paper": r.paper, "statement": r.statement, "threshold": r.threshold}
        for which in INPUTS:
            m = r.measured.get(which)
            row[f"{which}"] = fmt_value(m)
            row[f"{which}_verdict"] = m.verdict if m else ("error: " + r.errors[which] if which in r.errors else "–")
            row[f"{which}_detail"] = m.detail if m else ""
        row.update({"verdict": r.verdict, "seconds": round(r.seconds, 2)})
        rows.append(row)
    return rows


def markdown(results: Sequence[ClaimResult]) -> str:
    lines = [
        "| claim | measured (clustered) | measured (real MiniLM) | threshold | verdict |",
        "|---|---|---|---|---|",
    ]
    for row in table_rows(results):
        real = row["real"] if row["real"] == "–" else f"{row['real']} ({row['real_verdict']})"
        threshold = row["threshold"].replace("|", "\\|")  # a bare | would split the markdown cell
        lines.append(
            f"| {row['claim']} | {row['clustered']} ({row['clustered_verdict']}) | {real} | {threshold} | "
            f"**{row['verdict']}** |"
        )
    lines += ["", "Skipped claims:", ""] + [f"- {cid}: {why}" for cid, why in SKIPPED]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m core.claims", description="Measure every paper claim and write benchmarks/results/claims.*"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(Path(__file__).resolve().parents[2] / "benchmarks" / "results"))
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    start = time.perf_counter()
    results = []
    for claim in CLAIMS:
        results.append(run_claim(claim, args.seed))
        r = results[-1]
        print(f"{r.id:22s} {r.verdict:24s} {r.seconds:6.2f} s", file=sys.stderr)
    table = markdown(results)
    print(table)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    header = (
        f"# Paper claims, measured\n\n`python -m core.claims --seed {args.seed}`; torch {torch.__version__}, "
        f"{platform.machine()}, {torch.get_num_threads()} threads, {time.perf_counter() - start:.0f} s in all.\n\n"
    )
    (out / "claims.md").write_text(header + table + "\n", encoding="utf-8")
    payload = {
        "seed": args.seed,
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "results": [{**asdict(r), "measured": {k: asdict(m) for k, m in r.measured.items()}} for r in results],
        "skipped": [{"id": cid, "reason": why} for cid, why in SKIPPED],
    }
    (out / "claims.json").write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    return 0
