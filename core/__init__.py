"""Attention Explorer engine: exact softmax attention and its efficient approximations.

Pure PyTorch/NumPy; no UI imports. Usable from a notebook:

    >>> import core
    >>> x = core.data.clustered(n=256, d=32, clusters=16, spread=0.3, seed=0)
    >>> approx = core.approximate("performer", x.q, x.k, x.v, scale=4.0, features=64)
    >>> approx.output.shape, approx.attention().shape
"""

from __future__ import annotations

import os

# Idle OpenMP threads sleep instead of spinning: on a shared or small machine, spinning threads made
# interactive calls 10x slower. Only effective when core is imported before torch, and never overrides a user.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from core import data, metrics, sweeps  # noqa: E402
from core.approximation import Approximation, AttentionInputs, Cost, approximate
from core.budget import budget_params
from core.device import resolve_device
from core.errors import ParameterError, Refusal
from core.registry import MethodSpec, ParamSpec, methods

__all__ = [
    "Approximation",
    "AttentionInputs",
    "Cost",
    "MethodSpec",
    "ParamSpec",
    "ParameterError",
    "Refusal",
    "approximate",
    "budget_params",
    "data",
    "methods",
    "metrics",
    "resolve_device",
    "sweeps",
]
