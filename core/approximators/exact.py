"""Exact softmax attention, the reference every approximation is measured against."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from core.approximation import Approximation, AttentionInputs, Cost, make_result
from core.approximators.common import masked_softmax
from core.registry import MethodSpec, register


def exact_cost(inputs: AttentionInputs, params: dict[str, Any]) -> Cost:
    n, d, dv, b = inputs.n, inputs.d, inputs.dv, inputs.batch
    # Causal: the n (n + 1) / 2 pairs on and below the diagonal (the fused kernels skip the blocks above it).
    pairs = n * (n + 1) // 2 if params.get("causal") else n * n
    return Cost(memory=b * pairs, flops=b * (2 * pairs * d + 2 * pairs * dv + 3 * pairs))


def causal_mask(n: int, device: torch.device) -> torch.Tensor:
    """(n, n) bool, True where key j <= query i: the support of causal attention."""
    return torch.ones(n, n, dtype=torch.bool, device=device).tril_()


def _fused_sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, causal: bool) -> torch.Tensor:
    # Half-precision q, k, v go in as they are: the fused kernels accumulate in float32 and keep float32 softmax
    # statistics. torch's CPU kernel only takes its fused (flash) path for 4-D inputs; 3-D falls back to the math
    # path, which is 3-4x slower and stores the n x n scores.
    return F.scaled_dot_product_attention(
        q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0), scale=scale, is_causal=causal
    )[0]


def _run(inputs: AttentionInputs, params: dict[str, Any]) -> Approximation:
    scale, causal = inputs.scale, bool(params.get("causal"))
    if bool((scale == scale.flatten()[0]).all()):
        # One temperature for the whole batch: torch's fused kernel (FlashAttention/efficient on GPU).
        output = _fused_sdpa(inputs.q, inputs.k, inputs.v, float(scale.flatten()[0]), causal)
    else:
        # A batched temperature sweep: fold each batch element's beta into q (a float32 scale promotes half q, so
        # the folded q is rounded back to the input's dtype).
        output = _fused_sdpa((inputs.q * scale).to(inputs.dtype), inputs.k, inputs.v, 1.0, causal)

    def causal_dense() -> torch.Tensor:
        return masked_softmax(inputs.logits(), causal_mask(inputs.n, inputs.device))

    return make_result(inputs, "exact", output, dense=causal_dense if causal else inputs.exact_attention)


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
        causal_form=True,
    )
)
