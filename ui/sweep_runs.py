"""The Error vs entropy page's engine calls: the temperature sweep (through the shared scheduler and disk cache)
and, for the real model, every head of every layer. Numbers come from core.sweeps and service.compute unchanged."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from core import limits, registry
from service import compute, views
from service.scheduler import estimate_seconds
from ui.settings import Settings

REAL_LAYERS = 6


def taus_between(low: float, high: float, points: int) -> np.ndarray:
    return np.geomspace(low, high, points) if high > low else np.array([low])


def sweep_check(
    s: Settings, methods: Sequence[str], params: dict[str, dict[str, Any]], points: int, redraws: int = 1
) -> Callable:
    """The server-limit check of a sweep (for ``ui.within_limits``): fewer redraws first, then a smaller n."""
    chosen = {m: params[m] for m in methods}
    random = {m: p for m, p in chosen.items() if registry.get(m).randomized}

    def estimate(n: int, draws: int) -> limits.Estimate:
        once = limits.sweep_estimate(chosen, n, s.d, s.heads, points)
        if draws <= 1 or not random:
            return once
        again = limits.sweep_estimate(random, n, s.d, s.heads, points)  # the redraws run one after another
        return limits.Estimate(max(once.bytes, again.bytes), once.seconds + (draws - 1) * again.seconds)

    return lambda: limits.check_knobs(
        [
            ("redraws", redraws, range(1, redraws + 1), lambda r: estimate(s.n, r)),
            ("n", s.n, limits.sizes_up_to(s.n), lambda n: estimate(n, redraws)),
        ]
    )


def temperature_sweep(
    s: Settings, taus: np.ndarray, methods: Sequence[str], params: dict[str, dict[str, Any]], redraws: int = 1
) -> dict[str, Any]:
    """Errors of every method over the temperatures, and the randomised methods' ``redraws`` draws (cached; heavy
    settings queue in the scheduler)."""
    view = sweep_view(s, taus, methods, params, redraws)
    random = sum(registry.get(m).randomized for m in methods)
    work = len(taus) * s.spec.heads * s.spec.n**2 * (len(methods) + 1 + (redraws - 1) * (random + 1))
    return views.run(view, estimate_seconds(work), title="The temperature sweep")


def sweep_view(
    s: Settings, taus: np.ndarray, methods: Sequence[str], params: dict[str, dict[str, Any]], redraws: int = 1
) -> views.TemperatureSweep:
    """The view the page's sweep computes (its cache key)."""
    return views.TemperatureSweep(
        inputs=s.spec,
        betas=tuple(1.0 / float(t) for t in taus),
        methods=tuple(methods),
        fraction=s.fraction,
        seed=s.seed,
        params=views.method_params(methods, params),
        device=s.device_name,
        causal=s.causal,
        redraws=redraws,
    )


def heads_layers(s: Settings) -> list[int]:
    """The layers whose heads are placed one by one: the real model's six, or an upload's one."""
    return list(range(REAL_LAYERS)) if s.spec.source == "real" else [s.spec.layer]


def real_heads_table(
    s: Settings,
    methods: Sequence[str],
    params: dict[str, dict[str, Any]],
    progress: Callable[[int], object],
) -> tuple[pd.DataFrame, list[tuple[str, str]]]:
    """One row per (method, layer, head) at the sidebar temperature, and (method, error) refusals: every layer of the
    real model, or the one layer of an upload (its heads as the sidebar keeps them)."""
    rows, refused = [], []
    for layer in heads_layers(s):
        spec = s.spec.replace(layer=layer)
        exact = compute.exact(views.ExactAttention(spec, s.beta, s.device_name, s.causal))
        for method in methods:
            mode = {"causal": True} if s.causal else {}
            res = compute.run_method_scheduled(
                views.MethodRun.of(spec, s.beta, s.device_name, method, {**params[method], **mode}, s.seed)
            )
            if res.error_message:
                refused.append((method, res.error_message))
                continue
            for h in range(spec.heads):
                rows.append(
                    {
                        "method": method,
                        "layer": layer,
                        "head": h,
                        "entropy": float(exact.entropy[h]),
                        "attention_error": float(res.metrics["attention_error"][h]),
                        "output_error": float(res.metrics["output_error"][h]),
                    }
                )
        progress(layer)
    return pd.DataFrame(rows), refused
