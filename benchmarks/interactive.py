"""Interactive-path timings: what a user waits for when a page first draws.

    python -m benchmarks.interactive            # prints a table, writes benchmarks/results/interactive_<device>.json
    python -m benchmarks.interactive --repeats 3 --out /tmp/x

Measured through ``torch.utils.benchmark`` (``benchmarks.harness.time_engine``: a warm-up call, then blocks for about
``--repeats`` calls; medians per call, every cache cleared in each call; the whole calls on the wall clock and on CPU
time at once, ``time_engine_two_clocks``):
1. ``compare_default``: the Compare page's computation at its defaults (clustered input, n = 512, d = 64,
   4 heads, tau = 0.3, budget 1/8, methods performer, lsh, scatterbrain, nystrom): service.compute's load_inputs,
   exact and run_method_now (what run_method computes when neither its memory layer nor the shared disk cache has
   the result: each method, its dense attention, the error maps and metrics). Goal: <= 0.3 s.
2. ``compare_all``: the same with every non-oracle method (the goal's wording: every non-oracle method + exact).
3. ``engine_all``: the engine part alone of 2 (core.approximate + .attention() per method), to show how much
   the UI layer adds.
4. ``sweep_1head`` / ``sweep_4heads``: ``core.sweeps.error_vs_entropy`` with 24 temperatures and 6 methods at
   n = 1024 (clustered, d = 64, budget 1/8). Goal: <= 5 s.
Each step's own time is reported too, so a miss points at its cause: timed apart, with the steps before it cached
(a page step), or as the sweep with that method alone less the sweep with none (a sweep's method).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks.harness import RESULTS_DIR, time_engine, time_engine_two_clocks
from core import data as core_data
from core import profiling, registry

COMPARE_GOAL_S = 0.3
SWEEP_GOAL_S = 5.0
COMPARE_DEFAULT_METHODS = ("performer", "lsh", "scatterbrain", "nystrom")
SWEEP_METHODS = ("performer", "lsh", "scatterbrain", "nystrom", "linformer", "local")
SWEEP_POINTS = 24
ORACLES = ("topk", "svd", "rpca")
SLOW_TRAINABLE = ("learned_kernel", "hedgehog")  # each call trains: not timed here, as in method_times and causal


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
            from ui.fields import DEFAULTS
        defaults.update({k: DEFAULTS[k] for k in defaults if k in DEFAULTS})
    except Exception:  # noqa: BLE001 - without ui the documented defaults above are used
        pass
    return defaults


def non_oracle_methods() -> list[str]:
    return [m for m in registry.methods() if m not in ORACLES and m != "exact" and m not in SLOW_TRAINABLE]


def _median_timing(
    name: str, whole: Callable[[], Any], parts: dict[str, Callable[[], Any]], repeats: int
) -> dict[str, Any]:
    """Median wall and process-CPU seconds per call of ``whole``, and the median wall seconds of each part."""
    wall, cpu = time_engine_two_clocks(whole, repeats=repeats, label=name, sub_label="whole")
    return {
        "seconds": wall.median,
        "cpu_seconds": cpu.median,
        "all_seconds": list(wall.times),
        "parts": {
            part: time_engine(call, repeats=repeats, label=name, sub_label=part).median for part, call in parts.items()
        },  # fmt: skip
    }


def _ui_compute() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import logging

        logging.getLogger("streamlit").setLevel(logging.ERROR)
        from service import compute
    return compute


def compare_page(methods: list[str], repeats: int, **overrides: Any) -> dict[str, Any]:
    """Cold-cache time of the Compare page's engine work through service.compute (as the page calls it)."""
    import core
    from service import result_cache, views

    compute = _ui_compute()
    cfg = {**compare_defaults(), **overrides}
    spec = views.InputSpec("clustered", cfg["n"], cfg["d"], cfg["heads"], cfg["clusters"], cfg["spread"], cfg["seed"])
    beta = 1.0 / cfg["tau"]
    params = {m: core.budget_params(m, cfg["n"], cfg["d"], cfg["budget"]) for m in methods}

    def inputs() -> None:
        result_cache.memory().clear()
        compute.load_inputs(spec)

    def exact() -> None:
        result_cache.memory().clear()
        compute.exact(views.ExactAttention(spec, beta, "cpu"))

    def method(m: str) -> None:
        # run_method would answer every call after the first from its memory layer or the shared disk cache.
        result = compute.run_method_now(views.MethodRun.of(spec, beta, "cpu", m, params[m], cfg["seed"]))
        if result.error_message:
            raise RuntimeError(f"{m}: {result.error_message}")

    def whole() -> None:  # every cache empty, as a page's first visit
        inputs()
        exact()
        for m in methods:
            method(m)

    # Each step timed apart runs with the steps before it cached, as inside the whole page.
    parts = {"inputs": inputs, "exact": exact, **{m: lambda m=m: method(m) for m in methods}}
    out = _median_timing("compare_page", whole, parts, repeats)
    out["settings"] = {**cfg, "methods": methods, "device": "cpu"}
    return out


def engine_only(methods: list[str], repeats: int, **overrides: Any) -> dict[str, Any]:
    """The engine calls of the Compare page without the UI layer: approximate + dense attention per method."""
    import core

    cfg = {**compare_defaults(), **overrides}
    x = core_data.clustered(cfg["n"], cfg["d"], cfg["clusters"], cfg["spread"], cfg["seed"], heads=cfg["heads"])
    beta = 1.0 / cfg["tau"]
    params = {m: core.budget_params(m, cfg["n"], cfg["d"], cfg["budget"]) for m in methods}

    def output(m: str) -> Any:
        extra = {} if m == "exact" else {"seed": cfg["seed"], **params[m]}
        return core.approximate(m, x.q, x.k, x.v, scale=beta, **extra)

    def dense(m: str) -> None:
        output(m).attention()

    def whole() -> None:
        for m in ("exact", *methods):
            dense(m)

    parts: dict[str, Callable[[], Any]] = {"exact": lambda: dense("exact")}
    for m in methods:
        parts[f"{m} (output)"] = lambda m=m: output(m)
        parts[m] = lambda m=m: dense(m)
    out = _median_timing("engine_only", whole, parts, repeats)
    out["settings"] = {**cfg, "methods": methods}
    return out


def sweep(heads: int, repeats: int, methods: tuple[str, ...] = SWEEP_METHODS, n: int = 1024) -> dict[str, Any]:
    """The 24-point error-vs-entropy sweep; a method's share is the sweep with it alone less the sweep with none."""
    from core import sweeps

    cfg = compare_defaults()
    x = core_data.clustered(n, cfg["d"], cfg["clusters"], cfg["spread"], cfg["seed"], heads=heads)
    taus = np.geomspace(0.01, 10.0, SWEEP_POINTS).tolist()
    present = [m for m in methods if m in registry.methods()]

    def run(names: list[str]) -> Callable[[], Any]:
        return lambda: sweeps.error_vs_entropy(x.q, x.k, x.v, names, taus=taus, fraction=1 / 8, seed=0)

    alone = {"exact attention": run([]), **{registry.get(m).label: run([m]) for m in present}}
    out = _median_timing("sweep", run(present), alone, repeats)
    exact_part = out["parts"]["exact attention"]
    out["parts"] = {label: s if label == "exact attention" else max(0.0, s - exact_part)
                    for label, s in out["parts"].items()}  # fmt: skip
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
    results["machine"]["load_average_end"] = [round(v, 2) for v in os.getloadavg()]
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
