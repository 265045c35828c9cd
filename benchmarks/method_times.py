"""Each method's wall time at one size, next to exact attention (issue #2's table).

    python -m benchmarks.method_times [--n 4096] [--d 64] [--heads 8] [--fraction 0.125] [--repeats 5]

Median seconds per call through ``torch.utils.benchmark`` (a warm-up call, then ``Timer.blocked_autorange`` for about
``--repeats`` calls), on the default device, printed as ``torch.utils.benchmark.Compare``'s table and written to
benchmarks/results/method_times_<device>.json. Oracles and the trainable kernels (learned_kernel, hedgehog: each call
trains its feature map, and hedgehog refuses n = 4096 at 8 heads) are skipped: they are not efficient paths. For the
full scaling study against the peer implementations use benchmarks.suite.
"""

from __future__ import annotations

import argparse
import json
import platform
from pathlib import Path

import torch

import core
from benchmarks.harness import RESULTS_DIR, compare_table, time_engine
from core.device import describe, resolve_device, synchronize

SKIP = {"topk", "svd", "rpca", "learned_kernel", "hedgehog"}


def main(argv: list[str] | None = None) -> list[dict[str, object]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--d", type=int, default=64)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--fraction", type=float, default=1 / 8)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR, help="output folder (default benchmarks/results)")
    args = parser.parse_args(argv)
    device = resolve_device(args.device)
    x = core.data.clustered(args.n, args.d, max(1, int(args.n**0.5)), 0.3, 0, heads=args.heads).to(device)
    rows: list[dict[str, object]] = []
    measurements = []
    for name in core.methods():
        max_n = core.registry.get(name).max_n
        if name in SKIP or (max_n is not None and args.n > max_n):  # the oracles that build n x n refuse this n
            continue
        params = core.budget_params(name, args.n, args.d, args.fraction)

        def call(name: str = name, params: dict[str, object] = params) -> None:
            core.approximate(name, x.q, x.k, x.v, scale=3.0, **params)
            synchronize(device)

        timing = time_engine(
            call, repeats=args.repeats, label=f"n={args.n} d={args.d} heads={args.heads}", sub_label=name,
            description=f"{describe(device)}, budget {args.fraction:g}",
        )  # fmt: skip
        measurements.append(timing)
        rows.append({"method": name, "median_s": timing.median, "times_s": list(timing.times), "params": params})
    exact_median = next(float(row["median_s"]) for row in rows if row["method"] == "exact")  # type: ignore[arg-type]
    for row in rows:
        row["ratio_to_exact"] = float(row["median_s"]) / exact_median  # type: ignore[arg-type]
    print(compare_table(measurements))
    print(f"{'method':<14} {'x exact':>8}  params")
    for row in rows:
        print(f"{row['method']:<14} {row['ratio_to_exact']:>8.2f}  {row['params']}")
    meta = {
        "device": describe(device),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "threads": torch.get_num_threads(),
        "args": {k: v for k, v in vars(args).items() if k != "out"},
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"method_times_{device.type}.json"
    path.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    print(f"wrote {path}")
    return rows


if __name__ == "__main__":
    main()
