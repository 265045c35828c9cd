"""The Error vs entropy page's engine calls: the temperature sweep (through the shared scheduler and disk cache)
and, for the real model, every head of every layer. Numbers come from core.sweeps and ui.compute unchanged."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from core import limits, sweeps
from ui import compute
from ui.jobs import estimate_seconds, run_heavy
from ui.sidebar import Settings

REAL_LAYERS = 6


def _sweep(
    spec: compute.InputSpec,
    taus: tuple[float, ...],
    methods: tuple[str, ...],
    fraction: float,
    seed: int,
    params: tuple,
    device_name: str,
    _progress: Any = None,
) -> dict[str, Any]:
    dev = compute.resolve(device_name)
    q, k, v = compute.tensors(spec, dev)
    result = sweeps.error_vs_entropy(
        q,
        k,
        v,
        list(methods),
        taus=list(taus),
        fraction=fraction,
        seed=seed,
        method_params={m: dict(compute._params_dict(p)) for m, p in params},
        progress=_progress,
    )
    return {
        "entropy": result.entropy,
        "betas": result.betas,
        "attention": result.attention_error,
        "output": result.output_error,
        "params": result.params,
    }


def taus_between(low: float, high: float, points: int) -> np.ndarray:
    return np.geomspace(low, high, points) if high > low else np.array([low])


def sweep_check(s: Settings, methods: Sequence[str], params: dict[str, dict[str, Any]], points: int) -> Callable:
    """The server-limit check of a sweep (for ``ui.state.within_limits``)."""
    chosen = {m: params[m] for m in methods}
    estimate = lambda n: limits.sweep_estimate(chosen, n, s.d, s.heads, points)  # noqa: E731
    return lambda: limits.check("n", s.n, limits.sizes_up_to(s.n), estimate)


def temperature_sweep(
    s: Settings, taus: np.ndarray, methods: Sequence[str], params: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """Errors of every method over the temperatures (cached; heavy settings queue in the scheduler)."""
    key = tuple((m, compute.params_key(params[m])) for m in methods)
    args = (s.spec, tuple(float(t) for t in taus), tuple(methods), s.fraction, s.seed, key, s.device_name)
    work = len(taus) * s.spec.heads * s.spec.n**2 * (len(methods) + 1)
    return run_heavy(
        "error_vs_entropy",
        args,
        lambda report: _sweep(*args, _progress=report),
        estimate_seconds(work),
        title="The temperature sweep",
    )


def real_heads_table(
    s: Settings,
    methods: Sequence[str],
    params: dict[str, dict[str, Any]],
    progress: Callable[[int], None],
) -> tuple[pd.DataFrame, list[tuple[str, str]]]:
    """One row per (method, layer, head) of the real model at the sidebar temperature; and (method, error) refusals."""
    rows, refused = [], []
    for layer in range(REAL_LAYERS):
        spec = compute.InputSpec(**{**s.spec.__dict__, "layer": layer})
        exact = compute.exact(spec, s.beta, s.device_name)
        for method in methods:
            key = compute.params_key(params[method])
            res = compute.run_method_scheduled(spec, s.beta, s.device_name, method, key, s.seed)
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
