"""How many temperatures a batched loop computes at once on the CPU: the old 32M-entry stack against
``core.device.chunk_elements`` (4M entries on a CPU), side by side in one run, on the engine calls behind Error vs
entropy (``core.sweeps.error_vs_entropy``) and the temperature scrubbers (``core.scrub``).

    python -m benchmarks.chunking            # medians of 5 after a warm-up; writes benchmarks/results/chunking_cpu.*
    python -m benchmarks.chunking --quick    # 1 repeat, two cases (a smoke run)

Times go through ``torch.utils.benchmark`` (``benchmarks.harness.time_engine``: a warm-up, then
blocks of calls; the median per call). Both chunk sizes give the same numbers to float rounding
(tests/test_sweeps.py, tests/test_scrub.py); the table also prints the largest difference it saw.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as the app's server runs

import numpy as np
import torch

import core  # noqa: E402
from benchmarks.harness import RESULTS_DIR, machine_facts, time_engine, write_results  # noqa: E402
from core import scrub, sweeps  # noqa: E402

if TYPE_CHECKING:
    from torch.utils.benchmark import Measurement

OLD_CHUNK = 2**25
SWEEP_METHODS = ["lsh", "performer", "scatterbrain"]  # Error vs entropy's defaults (ui.presets.EVE_METHODS)
SCRUB_METHODS = ["performer", "lsh", "scatterbrain", "nystrom"]  # Compare's defaults (ui.presets.COMPARE_METHODS)
# (what, n, heads, temperatures); the first row is Error vs entropy at its defaults (n = 512, 4 heads, 12 points).
CASES = [
    ("sweep", 512, 4, 12),
    ("sweep", 1024, 4, 6),
    ("sweep", 1024, 1, 12),
    ("sweep", 256, 4, 12),
    ("scrub views", 512, 1, 13),
    ("scrub views", 1024, 1, 13),
    ("scrub split", 512, 1, 13),
    ("scrub split", 1024, 1, 13),
]


def case_call(what: str, n: int, heads: int, points: int) -> Callable[[], dict[str, np.ndarray]]:
    """The engine call of one case; it returns the numbers to compare between chunk sizes."""
    x = core.data.clustered(n=n, d=64, clusters=32, spread=0.1, seed=0, heads=heads)
    taus = list(np.geomspace(0.03, 3.0, points))
    if what == "sweep":

        def sweep() -> dict[str, np.ndarray]:
            result = sweeps.error_vs_entropy(x.q, x.k, x.v, SWEEP_METHODS, taus=taus, seed=0)
            return {f"{m} {kind}": errors[m] for kind, errors in (("attention", result.attention_error),
                    ("output", result.output_error)) for m in SWEEP_METHODS}  # fmt: skip

        return sweep
    q, k, v = x.q[0], x.k[0], x.v[0]
    if what == "scrub views":
        return lambda: dict(scrub.temperature_views(q, k, v, SCRUB_METHODS, taus, seed=0, side=48).error)
    return lambda: {name: np.asarray(e) for name, e in scrub.split_views(q, k, v, taus, seed=0, side=48).error.items()}


def with_chunk(elements: int | None, call: Callable[[], Any], repeats: int) -> tuple[Measurement, Any]:
    """Time ``call`` with every batched loop's chunk at ``elements`` (None: the engine's own choice); returns the
    measurement and the numbers of the last call."""
    last: list[Any] = [None]

    def keep_result() -> None:
        last[0] = call()

    saved = sweeps.chunk_elements, scrub.chunk_elements
    if elements is not None:
        sweeps.chunk_elements = scrub.chunk_elements = lambda device: elements
    try:
        measurement = time_engine(keep_result, repeats=repeats, label="chunking")
    finally:
        sweeps.chunk_elements, scrub.chunk_elements = saved
    return measurement, last[0]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one repeat of two cases (a smoke run)")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    repeats = 1 if args.quick else 5
    cases = CASES[:1] + CASES[4:5] if args.quick else CASES
    load_start = os.getloadavg()
    now = core.device.chunk_elements(torch.device("cpu"))
    rows = []
    for what, n, heads, points in cases:
        call = case_call(what, n, heads, points)
        old_s, old = with_chunk(OLD_CHUNK, call, repeats)
        new_s, new = with_chunk(None, call, repeats)
        diff = max(float(np.max(np.abs(np.asarray(new[k]) - np.asarray(old[k])) / np.maximum(np.abs(old[k]), 1e-30)))
                   for k in old)  # fmt: skip
        row = {"what": what, "n": n, "heads": heads, "temperatures": points, "old_s": list(old_s.times),
               "new_s": list(new_s.times), "old_median_s": old_s.median, "new_median_s": new_s.median,
               "largest_relative_difference": diff}  # fmt: skip
        row["ratio"] = row["new_median_s"] / row["old_median_s"]
        rows.append(row)
        print(f"{what} n={n} heads={heads} T={points}: {row['old_median_s']:.3f} -> {row['new_median_s']:.3f} s "
              f"({row['ratio']:.2f}x), largest relative difference {diff:.1e}", flush=True)  # fmt: skip
    lines = [
        "`python -m benchmarks.chunking" + (" --quick`" if args.quick else "`"),
        "",
        f"CPU, {torch.get_num_threads()} torch threads; median seconds per call (torch.utils.benchmark, about "
        f"{repeats} calls after a warm-up), both chunk sizes in one run. Old: {OLD_CHUNK:,} entries at once; new: "
        f"core.device.chunk_elements = {now:,} on a CPU.",
        "",
        "| engine call | n | heads | temperatures | old median s | new median s | new / old | largest rel. diff |",
        "|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['what']} | {r['n']} | {r['heads']} | {r['temperatures']} | {r['old_median_s']:.3f} | "
        f"{r['new_median_s']:.3f} | {r['ratio']:.2f}× | {r['largest_relative_difference']:.1e} |"
        for r in rows
    ]
    result = {"machine": machine_facts(load_start), "threads": torch.get_num_threads(), "old_chunk": OLD_CHUNK,
              "new_chunk": now, "repeats": repeats, "rows": rows}  # fmt: skip
    write_results(args.out, "chunking_cpu" if not args.quick else "chunking_cpu_quick", result, "\n".join(lines) + "\n")
    return result


if __name__ == "__main__":
    main()
