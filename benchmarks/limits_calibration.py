"""How far the server's up-front time estimates for temperature sweeps (``core.limits.sweep_estimate``, used by Error
vs entropy and the regime map) sit above what the sweeps really take on this machine, next to the previous
estimate (every method charged the Compare page's 200 ns per dense entry, as before the SWEEP_* constants).

    python -m benchmarks.limits_calibration          # medians of 3; writes results/limits_calibration_cpu.*
    python -m benchmarks.limits_calibration --quick  # one repeat, two cases (a smoke run)
    python -m benchmarks.limits_calibration --only buttons  # the button-started work only

It also times the work each page starts with a button (Rank vs heads, Paper claims, Kernels, VCC, Scaling) against
the estimate the page shows before it; those estimates must land within +-30 % of the measured time.

An estimate must stay above the measured time (the server refuses up front what would pass the job limit; a job that
runs longer is still stopped at the limit), but not so far above that work of a few seconds is refused: the
"largest n that fits" column is what a refusal message offers under the default 60 s limit.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as the app's server runs

import numpy as np
import torch

import core  # noqa: E402
from benchmarks.harness import RESULTS_DIR, machine_facts, time_engine, time_once, write_results  # noqa: E402
from core import limits, regime, sweeps  # noqa: E402
from service import scheduler  # noqa: E402

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
# Timed seconds per row after its warm-up: a sweep of 10 s or more is timed once or twice, not three times (its
# spread is a few per cent of a figure the estimate exceeds 2-10×), and its warm-up call is one of them.
LONG_ROW_BUDGET_S = 20.0
LONG_ROW_S = 10.0


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


# ------------------------------------------------------------------ button-started work
# What a page shows before its button is pressed ("about N s") against the same engine call, at the page's defaults
# (and one larger setting where the estimate's shape matters). Target: within +-30 % of the measured time.


def _vcc_case(n: int) -> tuple[float, Callable[[], Any]]:
    from core import vcc_study, vcc_tree

    x = core.data.clustered(n=n, d=32, clusters=8, spread=0.3, seed=0, heads=1)
    vips, block = 8, 16
    budget_max = vcc_tree.max_splits(vcc_tree.build_hierarchy(n - vips, "two_level", block))[1]
    params = {"mode": "two_level", "block_size": block, "share_heads": False, "vip": vips}
    runs = vcc_study.sweep_runs(budget_max)
    estimate = vcc_study.sweep_seconds(runs, 1, n)
    return estimate, lambda: vcc_study.error_sweep(x.q, x.k, x.v, 1 / 0.3, params, 0, budget_max)


def _kernel_inputs(n: int, heads: int, d: int) -> Any:
    return core.data.gaussian(n=n, d=d, seed=0, heads=heads)


def button_cases(quick: bool) -> list[tuple[str, str, Callable[[], tuple[float, Callable[[], Any]]]]]:
    """(page, what, () -> (the estimate the page shows, the call its button makes)), built lazily."""
    from core import claims, kernel_study, rank_heads, rank_heads_study

    def rank_grid(steps: int) -> tuple[float, Callable[[], Any]]:
        settings = rank_heads_study.TrainSettings("nearest", 16, 2, steps, 1, 0, "cpu")
        cells = rank_heads_study.grid_cells(16, [1, 4, 16], [1, 4, 16])
        estimate = rank_heads.estimate_seconds(16, cells, steps, seeds=1)
        return estimate, lambda: [rank_heads_study.train_cell(settings, *cell) for cell in cells]

    def paper_claims() -> tuple[float, Callable[[], Any]]:
        every = claims.CLAIMS
        estimate = sum(claims.estimate_seconds(c) for c in every)
        return estimate, lambda: claims.run_all()

    def kernel_pair(draws: int) -> tuple[float, Callable[[], Any]]:
        return kernel_study.kernel_mse_seconds(16, draws), lambda: kernel_study.kernel_mse_at_pair(
            16, 1.0, math.radians(145), draws, 0
        )

    def kernel_attention(n: int, redraws: int) -> tuple[float, Callable[[], Any]]:
        x = _kernel_inputs(n, 1, 16)
        return kernel_study.attention_seconds(n, 1, redraws), lambda: kernel_study.attention_study(
            x.q, x.k, x.v, 1.0, redraws, 0
        )

    def kernel_fit(steps: int) -> tuple[float, Callable[[], Any]]:
        x, fresh = _kernel_inputs(256, 1, 16), core.data.gaussian(n=256, d=16, seed=1, heads=1)
        variants = ("ff", "oglu", "aoglu")
        fit_on = kernel_study.QKV(x.q, x.k, x.v)
        other = kernel_study.QKV(fresh.q, fresh.k, fresh.v)
        return kernel_study.comparison_seconds(len(variants), steps), lambda: kernel_study.compare_on_inputs(
            fit_on, other, 1.0, 16, variants, steps, 0.0, 0.05, 0
        )

    def kernel_penalty(steps: int) -> tuple[float, Callable[[], Any]]:
        from core import kernels

        x = _kernel_inputs(256, 1, 16)
        return kernel_study.penalty_seconds(steps), lambda: kernels.penalty_sweep(
            x.q, x.k, x.v, 1.0, 16, kernel_study.PENALTIES, steps=steps, lr=0.05, seed=0
        )

    def kernel_entries(n: int, heads: int, m: int, redraws: int) -> tuple[float, Callable[[], Any]]:
        from core import kernels

        x = _kernel_inputs(n, heads, 16)
        return kernel_study.entry_estimate(n, heads, m, redraws).seconds, lambda: kernels.entry_error_by_size(
            x.q, x.k, 1.0, m, redraws=redraws, seed=0
        )

    def kernel_trig(n: int, heads: int) -> tuple[float, Callable[[], Any]]:
        x = _kernel_inputs(n, heads, 16)
        ms = (16, 64, 256)
        return kernel_study.trig_estimate(n, heads, 16, ms).seconds, lambda: kernel_study.trig_fraction(
            x.q, x.k, ms, orthogonal=True, seed=0
        )

    def scaling(total: float) -> tuple[float, Callable[[], Any]]:
        from core import profiling

        methods = ["exact", "lsh", "performer", "scatterbrain", "nystrom"]
        sizes = [256, 512, 1024, 2048, 4096, 8192]
        return total, lambda: profiling.scaling_run(
            methods, sizes, d=64, heads=8, row_budget=64, scale=1.0, seed=0, device=torch.device("cpu"),
            point_limit_s=10.0, total_limit_s=total, memory_limit_bytes=2048 * 2**20,
        )  # fmt: skip

    quick_cases = [
        ("Kernels", "Run the Performer at every m (n = 256, 4 redraws)", lambda: kernel_attention(256, 4)),
        ("Kernels", "Fit the kernels (3 variants, 100 steps)", lambda: kernel_fit(100)),
        ("VCC", "Sweep the budget (n = 256, defaults)", lambda: _vcc_case(256)),
    ]
    if quick:
        return quick_cases
    return [
        ("Rank vs heads", "Train the grid (defaults, 500 steps)", lambda: rank_grid(500)),
        ("Rank vs heads", "Train the grid (1000 steps)", lambda: rank_grid(1000)),
        ("Paper claims", "Measure the claims (every claim)", paper_claims),
        ("Kernels", "Measure (1000 draws, d = 16)", lambda: kernel_pair(1000)),
        ("Kernels", "Measure (5000 draws, d = 16)", lambda: kernel_pair(5000)),
        *quick_cases[:2],
        ("Kernels", "Run the Performer at every m (n = 512, 4 redraws)", lambda: kernel_attention(512, 4)),
        ("Kernels", "Fit the kernels (3 variants, 400 steps)", lambda: kernel_fit(400)),
        ("Kernels", "Refit at every λ (100 steps)", lambda: kernel_penalty(100)),
        ("Kernels", "Bin the entries (n = 1024, 4 heads, m = 256, 3 redraws)", lambda: kernel_entries(1024, 4, 256, 3)),
        ("Kernels", "Count the non-positive normalisers (n = 1024, 4 heads)", lambda: kernel_trig(1024, 4)),
        quick_cases[2],
        ("VCC", "Sweep the budget (n = 1024)", lambda: _vcc_case(1024)),
        ("Scaling", "Measure (defaults, 30 s total)", lambda: scaling(30.0)),
    ]


def measure_buttons(quick: bool) -> list[dict[str, Any]]:
    """Each button's work once, cold, with the threads one compute slot gets on this machine (as the app runs it)."""
    threads = scheduler.threads_per_job(scheduler.default_slots())
    rows = []
    for page, what, build in button_cases(quick):
        estimate, call = build()
        measured = time_once(call, threads=threads)
        ratio = estimate / measured
        rows.append({"page": page, "work": what, "estimate_s": estimate, "measured_s": measured, "ratio": ratio,
                     "within_30_percent": abs(ratio - 1) <= 0.3})  # fmt: skip
        print(f"{page}: {what}: estimate {estimate:.1f} s, measured {measured:.1f} s ({ratio:.2f}x)", flush=True)
    return rows


def button_lines(rows: list[dict[str, Any]]) -> list[str]:
    return [
        "",
        "Button-started work: the estimate a page shows before its button against one run of the same engine call "
        "(the threads of one compute slot). Target: estimate / measured within 0.7-1.3.",
        "",
        "| page | work | estimate s | measured s | estimate / measured | within ±30 % |",
        "|---|---|---|---|---|---|",
        *(
            f"| {r['page']} | {r['work']} | {r['estimate_s']:.1f} | {r['measured_s']:.1f} | {r['ratio']:.2f}× | "
            f"{'yes' if r['within_30_percent'] else 'no'} |"
            for r in rows
        ),
    ]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one repeat of two cases (a smoke run)")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    parser.add_argument("--only", choices=("sweeps", "buttons"), help="one of the two tables (default: both)")
    args = parser.parse_args(argv)
    for name in (limits.SECONDS_ENV, limits.MEMORY_ENV):  # the table is about the defaults
        os.environ.pop(name, None)
    repeats = 1 if args.quick else 3
    cases = [CASES[0], CASES[4]] if args.quick else CASES
    load_start = os.getloadavg()
    rows: list[dict[str, Any]] = []
    for what, methods, n, heads, points in cases if args.only != "buttons" else []:
        # After a warm-up: first-call setup (feature draws, allocator) is not what the estimate is about; in a call
        # of LONG_ROW_S or more it is lost in the spread, and that warm-up is timed too.
        timing = time_engine(case_call(what, methods, n, heads, points), repeats=repeats, label=what,
                             budget_s=LONG_ROW_BUDGET_S, warm_up_counts_from_s=LONG_ROW_S)  # fmt: skip
        seconds, measured = list(timing.times), timing.median
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
        "`python -m benchmarks.limits_calibration"
        + (" --quick" if args.quick else "")
        + (f" --only {args.only}" if args.only else "")
        + "`",
        "",
        f"CPU, {torch.get_num_threads()} torch threads, d = {D}; measured: median seconds per call "
        f"(about {repeats} calls after a warm-up, at most about {LONG_ROW_BUDGET_S:g} s of them: a row of "
        f"{LONG_ROW_S:g} s or more is timed once or twice, its warm-up call included). "
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
    buttons = measure_buttons(args.quick) if args.only != "sweeps" else []
    lines += button_lines(buttons)
    result = {"machine": machine_facts(load_start), "threads": torch.get_num_threads(), "repeats": repeats,
              "rows": rows, "buttons": buttons}  # fmt: skip
    # A partial run never overwrites the full table.
    name = "limits_calibration_cpu" + ("_quick" if args.quick else "") + (f"_{args.only}" if args.only else "")
    write_results(args.out, name, result, "\n".join(lines) + "\n")
    return result


if __name__ == "__main__":
    main()
