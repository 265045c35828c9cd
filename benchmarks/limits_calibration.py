"""How far the server's up-front time estimates for temperature sweeps (``core.limits.sweep_estimate``, used by Error
vs entropy and the regime map) sit above what the sweeps really take on this machine, next to the previous
estimate (every method charged the Compare page's 200 ns per dense entry, as before the SWEEP_* constants).

    python -m benchmarks.limits_calibration          # medians of 3; writes results/limits_calibration_cpu.*
    python -m benchmarks.limits_calibration --quick  # one repeat, two cases (a smoke run)

An estimate must stay above the measured time (the server refuses up front what would pass the job limit; a job that
runs longer is still stopped at the limit), but not so far above that work of a few seconds is refused: the
"largest n that fits" column is what a refusal message offers under the default 60 s limit.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as the app's server runs

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import core  # noqa: E402
from benchmarks.ui_timing import RESULTS, machine_facts, save_results  # noqa: E402
from core import limits, regime, sweeps  # noqa: E402

D = 64
EVE_DEFAULT = ("lsh", "performer", "scatterbrain")  # ui.presets.EVE_METHODS
# Every method Error vs entropy offers (the page excludes exact and the oracles topk, svd, rpca).
SINGLE = ("lsh", "performer", "scatterbrain", "nystrom", "linformer", "local", "linear_elu", "vcc",
          "topk_renormalized", "learned_kernel")  # fmt: skip
# (label, methods, n, heads, temperatures); "regime" rows run the regime map at its page defaults.
CASES: list[tuple[str, tuple[str, ...], int, int, int]] = [
    ("sweep", EVE_DEFAULT, 512, 4, 12),
    ("sweep", EVE_DEFAULT, 1024, 4, 12),
    ("sweep", EVE_DEFAULT, 2048, 4, 12),
    ("sweep", EVE_DEFAULT, 1024, 4, 40),
    *[("sweep", (m,), 1024, 4, 12) for m in SINGLE],
    ("regime", EVE_DEFAULT, 256, 1, 8),
]
REGIME_SPREADS, REGIME_SEEDS = 5, 3  # the regime page's defaults (ui/controls/regime.py)


def previous_sweep_estimate(methods: Mapping[str, Mapping[str, Any]], n: int, d: int, batch: int, points: int,
                            rows: int = 1) -> limits.Estimate:  # fmt: skip
    """The estimate before the SWEEP_* constants: each method's Compare-page cost (dense views) per temperature.
    Its memory model is today's, so the two differ in time only."""
    per_chunk = max(1, min(points, sweeps.CHUNK_ELEMENTS // max(1, batch * n * n)))
    calls = math.ceil(points / per_chunk)
    seconds = 0.0
    for method, params in methods.items():
        one = limits.method_estimate(method, n, d, batch, limits._budget_or(method, n, d, params), dense=True)
        seconds += ((one.seconds - limits.CALL_SECONDS) * points + limits.CALL_SECONDS * calls) * rows
    seconds += limits.exact_estimate(n, d, batch).seconds * points * rows
    return limits.Estimate(limits.sweep_estimate(methods, n, d, batch, points, rows).bytes, seconds)


def case_call(what: str, methods: tuple[str, ...], n: int, heads: int, points: int) -> Callable[[], Any]:
    if what == "regime":
        betas = list(np.geomspace(1.0, 50.0, points))
        spreads = list(np.linspace(0.05, 1.0, REGIME_SPREADS))
        roles = dict(zip(("sparse", "low_rank", "sparse_low_rank"), ("lsh", "performer", "scatterbrain"), strict=True))
        return lambda: regime.averaged_regime_map(n=n, d=D, clusters=16, betas=betas, spreads=spreads,
                                                  seeds=REGIME_SEEDS, methods=roles)  # fmt: skip
    x = core.data.clustered(n=n, d=D, clusters=16, spread=0.3, seed=0, heads=heads)
    taus = list(np.geomspace(0.01, 10.0, points))
    return lambda: sweeps.error_vs_entropy(x.q, x.k, x.v, list(methods), taus=taus, seed=0)


def estimates(what: str, methods: tuple[str, ...], n: int, heads: int, points: int) -> tuple[float, float, int, int]:
    """(previous s, current s, previous largest n, current largest n) under the default 60 s and 4 GiB."""
    chosen: dict[str, dict[str, Any]] = {m: {} for m in methods}
    rows = REGIME_SPREADS * REGIME_SEEDS if what == "regime" else 1

    def previous(size: int) -> limits.Estimate:
        return previous_sweep_estimate(chosen, size, D, heads, points, rows)

    def current(size: int) -> limits.Estimate:
        return limits.sweep_estimate(chosen, size, D, heads, points, rows)

    sizes = limits.sizes_up_to(4096)
    return (
        previous(n).seconds,
        current(n).seconds,
        limits.largest_fitting(sizes, previous) or 0,
        limits.largest_fitting(sizes, current) or 0,
    )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one repeat of two cases (a smoke run)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    for name in (limits.SECONDS_ENV, limits.MEMORY_ENV):  # the table is about the defaults
        os.environ.pop(name, None)
    repeats = 1 if args.quick else 3
    cases = [CASES[0], CASES[4]] if args.quick else CASES
    load_start = os.getloadavg()
    rows: list[dict[str, Any]] = []
    for what, methods, n, heads, points in cases:
        call = case_call(what, methods, n, heads, points)
        call()  # warm-up: first-call setup (feature draws, allocator) is not what the estimate is about
        seconds = []
        for _ in range(repeats):
            start = time.perf_counter()
            call()
            seconds.append(time.perf_counter() - start)
        measured = statistics.median(seconds)
        before, now, before_n, now_n = estimates(what, methods, n, heads, points)
        row = {"what": what, "methods": list(methods), "n": n, "heads": heads, "temperatures": points,
               "seconds": seconds, "measured_median_s": measured, "previous_estimate_s": before,
               "estimate_s": now, "previous_ratio": before / measured, "ratio": now / measured,
               "previous_largest_n": before_n, "largest_n": now_n}  # fmt: skip
        rows.append(row)
        print(f"{what} {'+'.join(methods)} n={n} heads={heads} T={points}: measured {measured:.2f} s, estimate "
              f"{before:.1f} -> {now:.1f} s ({row['previous_ratio']:.1f}x -> {row['ratio']:.1f}x), largest n "
              f"{before_n} -> {now_n}", flush=True)  # fmt: skip
    lines = [
        "`python -m benchmarks.limits_calibration" + (" --quick`" if args.quick else "`"),
        "",
        f"CPU, {torch.get_num_threads()} torch threads, d = {D}; measured: median of {repeats} after a warm-up. "
        f"Estimates from core.limits (previous: the Compare page's per-entry cost for every method). Largest n: "
        f"what a refusal offers under the default {limits.DEFAULT_JOB_SECONDS:g} s and 4 GiB (n up to 4096). "
        f"Regime rows: the map at its page defaults ({REGIME_SPREADS} spreads × {REGIME_SEEDS} seeds, heads 1).",
        "",
        "| engine call | methods | n | heads | temperatures | measured s | previous estimate s | estimate s | "
        "previous / measured | estimate / measured | previous largest n | largest n |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['what']} | {', '.join(list(r['methods']))} | {r['n']} | {r['heads']} | {r['temperatures']} | "
        f"{r['measured_median_s']:.2f} | {r['previous_estimate_s']:.1f} | {r['estimate_s']:.1f} | "
        f"{r['previous_ratio']:.1f}× | {r['ratio']:.1f}× | {r['previous_largest_n']} | {r['largest_n']} |"
        for r in rows
    ]
    result = {"machine": machine_facts(load_start), "threads": torch.get_num_threads(), "repeats": repeats,
              "rows": rows}  # fmt: skip
    name = "limits_calibration_cpu" + ("_quick" if args.quick else "")
    save_results(args.out, name, result, "\n".join(lines) + "\n")
    return result


if __name__ == "__main__":
    main()
