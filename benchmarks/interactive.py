"""Interactive-path timings: what a user waits for when a page first draws.

    python -m benchmarks.interactive            # prints a table, writes benchmarks/results/interactive_<device>.json
    python -m benchmarks.interactive --repeats 3 --out /tmp/x

Measured (median of repeats, every cache cleared before each repeat, after one warm-up):
1. ``compare_default``: the Compare page's computation at its defaults (clustered input, n = 512, d = 64,
   4 heads, tau = 0.3, budget 1/8, methods performer, lsh, scatterbrain, nystrom): ui.compute's load_inputs,
   exact and run_method (each method, its dense attention, the error maps and metrics). Goal: <= 0.3 s.
2. ``compare_all``: the same with every non-oracle method (the goal's wording: every non-oracle method + exact).
3. ``engine_all``: the engine part alone of 2 (core.approximate + .attention() per method), to show how much
   the UI layer adds.
4. ``sweep_1head`` / ``sweep_4heads``: ``core.sweeps.error_vs_entropy`` with 24 temperatures and 6 methods at
   n = 1024 (clustered, d = 64, budget 1/8). Goal: <= 5 s.
Per-method times inside each measurement are reported too, so a miss points at its cause.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from core import data as core_data  # noqa: E402
from core import profiling, registry  # noqa: E402

RESULTS_DIR = REPO_ROOT / "benchmarks" / "results"
COMPARE_GOAL_S = 0.3
SWEEP_GOAL_S = 5.0
COMPARE_DEFAULT_METHODS = ("performer", "lsh", "scatterbrain", "nystrom")
SWEEP_METHODS = ("performer", "lsh", "scatterbrain", "nystrom", "linformer", "local")
SWEEP_POINTS = 24
ORACLES = ("topk", "svd", "rpca")
SLOW_TRAINABLE = ("learned_kernel",)


def compare_defaults() -> dict[str, Any]:
    """The Compare page's default settings, read from ui.sidebar when it is importable."""
    defaults: dict[str, Any] = {
        "n": 512,
        "d": 64,
        "heads": 4,
        "tau": 0.3,
        "spread": 0.3,
        "clusters": 8,
        "seed": 0,
        "budget": 1 / 8,
    }
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from ui.sidebar import DEFAULTS
        defaults.update({k: DEFAULTS[k] for k in defaults if k in DEFAULTS})
    except Exception:  # noqa: BLE001 - without ui the documented defaults above are used
        pass
    return defaults


def non_oracle_methods() -> list[str]:
    return [m for m in registry.methods() if m not in ORACLES and m != "exact" and m not in SLOW_TRAINABLE]


def _median_timing(fn: Callable[[], dict[str, float]], repeats: int) -> dict[str, Any]:
    """Median wall and process-CPU seconds of ``fn`` after one warm-up, with its parts (medians too)."""
    fn()  # warm-up: imports, thread pools, first-touch allocations
    totals, cpus, parts = [], [], []
    for _ in range(repeats):
        start, cpu = time.perf_counter(), time.process_time()
        part = fn()
        totals.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
        parts.append(part)
    per_part = {k: statistics.median(p[k] for p in parts) for k in parts[0]} if parts and parts[0] else {}
    return {
        "seconds": statistics.median(totals),
        "cpu_seconds": statistics.median(cpus),
        "all_seconds": totals,
        "parts": per_part,
    }


def _ui_compute() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import logging

        logging.getLogger("streamlit").setLevel(logging.ERROR)
        from ui import compute
    # cache_data outside a Streamlit runtime warns on every call; the memory cache it falls back to is what we time
    logging.getLogger("streamlit.runtime.caching.cache_data_api").setLevel(logging.ERROR)
    return compute


def compare_page(methods: list[str], repeats: int, **overrides: Any) -> dict[str, Any]:
    """Cold-cache time of the Compare page's engine work through ui.compute (as the page calls it)."""
    import core

    compute = _ui_compute()
    cfg = {**compare_defaults(), **overrides}
    spec = compute.InputSpec("clustered", cfg["n"], cfg["d"], cfg["heads"], cfg["clusters"], cfg["spread"], cfg["seed"])
    beta = 1.0 / cfg["tau"]
    params = {m: core.budget_params(m, cfg["n"], cfg["d"], cfg["budget"]) for m in methods}

    def once() -> dict[str, float]:
        for fn in (compute.load_inputs, compute.exact):
            fn.clear()
        compute.result_cache.memory().clear()  # run_method's in-process layer
        part: dict[str, float] = {}
        start = time.perf_counter()
        compute.load_inputs(spec)
        part["inputs"] = time.perf_counter() - start
        start = time.perf_counter()
        compute.exact(spec, beta, "cpu")
        part["exact"] = time.perf_counter() - start
        for m in methods:
            start = time.perf_counter()
            result = compute.run_method(spec, beta, "cpu", m, compute.params_key(params[m]), cfg["seed"])
            if result.error_message:
                raise RuntimeError(f"{m}: {result.error_message}")
            part[m] = time.perf_counter() - start
        return part

    out = _median_timing(once, repeats)
    out["settings"] = {**cfg, "methods": methods, "device": "cpu"}
    return out


def engine_only(methods: list[str], repeats: int, **overrides: Any) -> dict[str, Any]:
    """The engine calls of the Compare page without the UI layer: approximate + dense attention per method."""
    import core

    cfg = {**compare_defaults(), **overrides}
    x = core_data.clustered(cfg["n"], cfg["d"], cfg["clusters"], cfg["spread"], cfg["seed"], heads=cfg["heads"])
    beta = 1.0 / cfg["tau"]
    params = {m: core.budget_params(m, cfg["n"], cfg["d"], cfg["budget"]) for m in methods}

    def once() -> dict[str, float]:
        part: dict[str, float] = {}
        start = time.perf_counter()
        exact = core.approximate("exact", x.q, x.k, x.v, scale=beta)
        exact.attention()
        part["exact"] = time.perf_counter() - start
        for m in methods:
            start = time.perf_counter()
            result = core.approximate(m, x.q, x.k, x.v, scale=beta, seed=cfg["seed"], **params[m])
            part[f"{m} (output)"] = time.perf_counter() - start
            result.attention()
            part[m] = time.perf_counter() - start
        return part

    out = _median_timing(once, repeats)
    out["settings"] = {**cfg, "methods": methods}
    return out


def sweep(heads: int, repeats: int, methods: tuple[str, ...] = SWEEP_METHODS, n: int = 1024) -> dict[str, Any]:
    """The 24-point error-vs-entropy sweep, with each method's share measured by a progress callback."""
    from core import sweeps

    cfg = compare_defaults()
    x = core_data.clustered(n, cfg["d"], cfg["clusters"], cfg["spread"], cfg["seed"], heads=heads)
    taus = np.geomspace(0.01, 10.0, SWEEP_POINTS).tolist()
    present = [m for m in methods if m in registry.methods()]

    def once() -> dict[str, float]:
        marks: list[tuple[str, float]] = []
        start = time.perf_counter()

        def progress(fraction: float, label: str) -> None:
            marks.append((label, time.perf_counter()))

        sweeps.error_vs_entropy(x.q, x.k, x.v, present, taus=taus, fraction=1 / 8, seed=0, progress=progress)
        part: dict[str, float] = {}
        previous = start
        for label, at in marks:
            part[label] = part.get(label, 0.0) + at - previous
            previous = at
        return part

    out = _median_timing(once, repeats)
    out["settings"] = {
        "n": n,
        "d": cfg["d"],
        "heads": heads,
        "points": SWEEP_POINTS,
        "taus": "geomspace(0.01, 10)",
        "methods": present,
        "fraction": 1 / 8,
    }
    return out


def run(repeats: int = 5, sweep_repeats: int = 3) -> dict[str, Any]:
    everything = non_oracle_methods()
    default = [m for m in COMPARE_DEFAULT_METHODS if m in registry.methods()]
    results: dict[str, Any] = {"machine": profiling.machine_facts("cpu")}
    results["compare_default"] = {**compare_page(default, repeats), "goal_s": COMPARE_GOAL_S}
    results["compare_all"] = {**compare_page(everything, repeats), "goal_s": COMPARE_GOAL_S}
    results["engine_all"] = engine_only(everything, repeats)
    results["sweep_1head"] = {**sweep(1, sweep_repeats), "goal_s": SWEEP_GOAL_S}
    results["sweep_4heads"] = {**sweep(4, sweep_repeats), "goal_s": SWEEP_GOAL_S}
    results["machine"]["load_average_end"] = [round(v, 2) for v in __import__("os").getloadavg()]
    return results


def table(results: dict[str, Any]) -> str:
    lines = [
        "| measurement | median wall (s) | median cpu (s) | goal (s) | met (wall) | slowest parts (wall s) |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        if name == "machine":
            continue
        goal = r.get("goal_s")
        met = "–" if goal is None else ("yes" if r["seconds"] <= goal else "NO")
        top = sorted(r["parts"].items(), key=lambda kv: -kv[1])[:4]
        parts = ", ".join(f"{k} {v:.3f}" for k, v in top)
        goal_text = "" if goal is None else goal
        lines.append(f"| {name} | {r['seconds']:.3f} | {r['cpu_seconds']:.3f} | {goal_text} | {met} | {parts} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sweep-repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's, = cores)")
    args = parser.parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    results = run(args.repeats, args.sweep_repeats)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"interactive_{results['machine']['device']}_{results['machine']['threads']}t.json"
    path.write_text(json.dumps(_clean(results), indent=1) + "\n")
    print(table(results))
    print(
        f"\nload average {results['machine'].get('load_average')} -> {results['machine']['load_average_end']}; "
        f"written {path}"
    )
    return 0


def _clean(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


if __name__ == "__main__":
    raise SystemExit(main())
