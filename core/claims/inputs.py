"""The inputs claims are measured on: Scatterbrain's clustered Process 1 at a paper's sizes (``Setting``), and the 72
real all-MiniLM-L6-v2 heads as one batch (q pre-scaled, so beta = 1 is the model's own attention)."""

from __future__ import annotations

import functools
import inspect
from typing import Any

import torch

from core import data
from core.approximation import approximate
from core.claims.claim import Setting
from core.errors import ParameterError

# Real heads are short (51 tokens on the default text), so their budgets are fractions of n: the app's 1/8.
REAL_FRACTION = 1 / 8

# Process 1 ties nothing to position; an engine version that places cluster members at random positions takes
# order_by_cluster, and contiguous settings ask for it. Older versions always return contiguous runs.
_ORDER_KW = "order_by_cluster" in inspect.signature(data.clustered).parameters


@functools.lru_cache(maxsize=16)
def clustered_input(setting: Setting, seed: int) -> data.Inputs:
    extra: dict[str, Any] = {"order_by_cluster": setting.contiguous} if _ORDER_KW else {}
    return data.clustered(setting.n, setting.d, setting.clusters, setting.spread, seed, dtype=torch.float64, **extra)


@functools.lru_cache(maxsize=2)
def real_heads(text: str | None = None) -> data.Inputs:
    """All layers x heads of MiniLM on ``text`` as one (72, n, 32) float64 batch (beta = 1: the model's own)."""
    r = data.real(text, dtype=torch.float64)
    q, k, v = (t.reshape(-1, *t.shape[-2:]) for t in (r.q, r.k, r.v))
    return data.Inputs(q, k, v, meta={"kind": "real", "model": r.model_name, "tokens": len(r.tokens)})


def is_real(x: data.Inputs) -> bool:
    return x.meta.get("kind") == "real"


def beta_for(x: data.Inputs, clustered_beta: float) -> float:
    """The temperature to measure at: the model's own (beta = 1) on the real heads, else ``clustered_beta``."""
    return 1.0 if is_real(x) else clustered_beta


def need_input(x: data.Inputs | None) -> data.Inputs:
    """The input of a claim that is measured on one (its ``setting`` or the real heads)."""
    if x is None:
        raise ParameterError("inputs", "this claim needs an input")
    return x


def exact_attention(x: data.Inputs, beta: float | torch.Tensor) -> torch.Tensor:
    return approximate("exact", x.q, x.k, x.v, scale=beta).attention()


def exp_logits(x: data.Inputs, beta: float) -> torch.Tensor:
    return torch.exp(beta * (x.q @ x.k.transpose(-1, -2)))


def real_k(x: data.Inputs) -> int:
    """The oracles' budget K on the real heads: ``REAL_FRACTION`` of their length."""
    return max(1, round(REAL_FRACTION * x.q.shape[-2]))
