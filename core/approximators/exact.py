"""Exact softmax attention, the reference every approximation is measured against."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from core.approximation import Approximation, AttentionInputs, Cost, make_result
from core.registry import MethodSpec, register


def exact_cost(inputs: AttentionInputs, params: dict[str, Any]) -> Cost:
    n, d, dv, b = inputs.n, inputs.d, inputs.dv, inputs.batch
    return Cost(memory=b * n * n, flops=b * (2 * n * n * d + 2 * n * n * dv + 3 * n * n))


def _fused_sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    # Half-precision q, k, v go in as they are: the fused kernels accumulate in float32 and keep float32 softmax
    # statistics. torch's CPU kernel only takes its fused (flash) path for 4-D inputs; 3-D falls back to the math
    # path, which is 3-4x slower and stores the n x n scores.
    return F.scaled_dot_product_attention(q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0), scale=scale)[0]


def _run(inputs: AttentionInputs, params: dict[str, Any]) -> Approximation:
    scale = inputs.scale
    if bool((scale == scale.flatten()[0]).all()):
        # One temperature for the whole batch: torch's fused kernel (FlashAttention/efficient on GPU).
        output = _fused_sdpa(inputs.q, inputs.k, inputs.v, float(scale.flatten()[0]))
    else:
        # A batched temperature sweep: fold each batch element's beta into q (a float32 scale promotes half q, so
        # the folded q is rounded back to the input's dtype).
        output = _fused_sdpa((inputs.q * scale).to(inputs.dtype), inputs.k, inputs.v, 1.0)
    return make_result(inputs, "exact", output, dense=inputs.exact_attention)


register(
    MethodSpec(
        name="exact",
        title="Exact softmax",
        family="exact",
        description="softmax(beta * Q K^T) V, computed by torch's scaled_dot_product_attention.",
        params=(),
        fn=_run,
        cost=exact_cost,
        half_native=True,
    )
)
