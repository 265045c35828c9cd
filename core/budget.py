"""Equal-budget comparisons: parameters that give a method a fraction of full attention's memory."""

from __future__ import annotations

import math
from typing import Any

from core import registry
from core.errors import ParameterError


def budget_params(method: str, n: int, d: int, fraction: float) -> dict[str, Any]:
    """Parameters that give ``method`` about ``fraction`` of full attention's memory (n^2 per head).

    The papers compare methods at equal budget (Scatterbrain uses 1/8 of full); this is that one call.
    Methods with nothing to budget (exact) return {}.
    """
    spec = registry.get(method)
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ParameterError("n", f"must be an integer >= 1, got {n!r}")
    if isinstance(d, bool) or not isinstance(d, int) or d < 1:
        raise ParameterError("d", f"must be an integer >= 1, got {d!r}")
    if not isinstance(fraction, (int, float)) or not math.isfinite(fraction) or not 0 < fraction <= 1:
        raise ParameterError("fraction", f"must be a number in (0, 1], got {fraction!r}")
    if spec.budget is None:
        return {}
    params = spec.budget(n, d, float(fraction))
    # Budgets are clipped into each parameter's allowed range for this n and d.
    sized = spec.validate({k: _clip(spec.param(k), v, n, d) for k, v in params.items()}, n, d)
    # A budget sets sizes, never the mode: without the causal switch in it,
    # approximate(..., causal=True, **budget_params(...)) combines the two without a clash of keyword arguments.
    return {k: v for k, v in sized.items() if k != registry.CAUSAL}


def _clip(param: registry.ParamSpec, value: Any, n: int, d: int) -> Any:
    low, high = param.bounds(n, d)
    if param.kind == "int":
        value = int(round(value))
    if high is not None and value > high:
        value = int(high) if param.kind == "int" else float(high)
    if low is not None and value < low:
        value = int(math.ceil(low)) if param.kind == "int" else float(low)
    return value
