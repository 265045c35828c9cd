"""Exact softmax attention, the reference every approximation is measured against."""

from __future__ import annotations

from typing import Any

import torch.nn.functional as F

from core.approximation import Approximation, AttentionInputs, Cost, make_result
from core.registry import MethodSpec, register


def exact_cost(inputs: AttentionInputs, params: dict[str, Any]) -> Cost:
    n, d, dv, b = inputs.n, inputs.d, inputs.dv, inputs.batch
    return Cost(memory=b * n * n, flops=b * (2 * n * n * d + 2 * n * n * dv + 3 * n * n))


def _run(inputs: AttentionInputs, params: dict[str, Any]) -> Approximation:
    scale = inputs.scale
    if bool((scale == scale.flatten()[0]).all()):
        # One temperature for the whole batch: torch's fused kernel (FlashAttention/efficient on GPU).
        output = F.scaled_dot_product_attention(inputs.q, inputs.k, inputs.v, scale=float(scale.flatten()[0]))
    else:
        # A batched temperature sweep: fold each batch element's beta into q.
        output = F.scaled_dot_product_attention(inputs.q * scale, inputs.k, inputs.v, scale=1.0)
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
    )
)
