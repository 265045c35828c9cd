"""Each method's wall time at one size, next to exact attention (issue #2's table).

    python -m benchmarks.method_times [--n 4096] [--d 64] [--heads 8] [--fraction 0.125] [--repeats 5]

Median of repeats after one warm-up call, on the default device; prints a table and writes
benchmarks/results/method_times_<device>.json. Oracles and the trainable kernel are skipped (they are
not efficient paths). For the full scaling study against the peer implementations use benchmarks.suite.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import torch

import core
from core.device import describe, resolve_device, synchronize

RESULTS = Path(__file__).resolve().parent / "results"
SKIP = {"topk", "svd", "rpca", "learned_kernel"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--d", type=int, default=64)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--fraction", type=float, default=1 / 8)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="auto")
    args = parser.parse_args()
    device = resolve_device(args.device)
    x = core.data.clustered(args.n, args.d, max(1, int(args.n**0.5)), 0.3, 0, heads=args.heads).to(device)
    rows = []
    exact_median = None
    for name in core.methods():
        if name in SKIP:
            continue
        params = core.budget_params(name, args.n, args.d, args.fraction)
        core.approximate(name, x.q, x.k, x.v, scale=3.0, **params)  # warm-up: caches, allocator
        times = []
        for _ in range(args.repeats):
            synchronize(device)
            start = time.perf_counter()
            core.approximate(name, x.q, x.k, x.v, scale=3.0, **params)
            synchronize(device)
            times.append(time.perf_counter() - start)
        median = statistics.median(times)
        if name == "exact":
            exact_median = median
        rows.append({"method": name, "median_s": median, "times_s": times, "params": params})
    assert exact_median is not None
    print(
        f"n={args.n} d={args.d} heads={args.heads}, budget {args.fraction:g} of full, {describe(device)}, "
        f"median of {args.repeats}"
    )
    print(f"{'method':<14} {'median ms':>10} {'x exact':>8}  params")
    for row in rows:
        row["ratio_to_exact"] = row["median_s"] / exact_median
        print(f"{row['method']:<14} {row['median_s'] * 1e3:>10.1f} {row['ratio_to_exact']:>8.2f}  {row['params']}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    meta = {
        "device": describe(device),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "threads": torch.get_num_threads(),
        "args": vars(args),
    }
    out = RESULTS / f"method_times_{device.type}.json"
    out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
