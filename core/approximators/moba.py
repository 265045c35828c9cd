"""MoBA, Mixture of Block Attention (Lu et al. 2025, arXiv 2502.13189): each query routes to top-k key blocks.

Keys are cut into blocks of B positions. Query i scores block b by the gate s_ib = q_i . mean(K_b) (Eq. 6,
unscaled: a positive scale would not change the choice), always takes its own block, and attends with ONE softmax
to the tokens of its own block and the top k - 1 other blocks (Alg. 1 merges the pieces with an online softmax;
the result is the same). Causal (the paper's form): blocks after the query's own are masked from the gate and
tokens j > i from the softmax. Ties in the gate go to the lower block index (a stable sort), where the paper's two
implementations disagree (MoBA issues #23, #38).

Reference: MoonshotAI/MoBA ``moba/moba_naive.py`` (builds the full n x n matrix) and fla's ``fla/layers/moba.py``.
What it is not: the trained model. MoBA is a drop-in for softmax attention inside a model trained (or
continued) with it; here it routes the given q, k, v as they are, so its error is what routing costs an
untrained head. Non-causal use also takes the own block and the top k - 1 of all others (the paper only
defines the causal form).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from core.approximation import Approximation, AttentionInputs, Cost, make_result
from core.approximators.block_select import Router, block_means, routed_attention, routed_support, top_blocks
from core.approximators.common import ceil_div, float32_copy, masked_softmax
from core.registry import MethodSpec, ParamSpec, register


def moba_gate(inputs: AttentionInputs, block: int, top_k: int, causal: bool) -> Router:
    """The router of ``routed_attention``: per query slice, its top-k blocks by q . mean(K_b), own block first."""
    means = block_means(inputs.k.to(inputs.statistics_dtype), block)  # (B, nb, d)
    blocks = means.shape[1]
    count = min(top_k, blocks)
    owner = torch.arange(inputs.n, device=inputs.device) // block
    block_ids = torch.arange(blocks, device=inputs.device)

    def route(rows: slice) -> tuple[torch.Tensor, torch.Tensor]:
        gate = inputs.q[:, rows].to(means.dtype) @ means.transpose(-1, -2)  # (B, c, nb)
        own = owner[rows, None] == block_ids
        if causal:
            gate = gate.masked_fill(block_ids > owner[rows, None], float("-inf"))
        return top_blocks(gate.masked_fill(own, float("inf")), count)

    return route


def _run(inputs: AttentionInputs, params: dict[str, Any]) -> Approximation:
    block, top_k, causal = min(params["block"], inputs.n), params["top_k"], bool(params.get("causal"))
    route = moba_gate(inputs, block, top_k, causal)
    output, selected, valid = routed_attention(inputs.q, inputs.k, inputs.v, inputs.scale, block, route, causal)

    def support() -> torch.Tensor:
        return routed_support(selected, valid, inputs.n, block, causal)

    def dense() -> torch.Tensor:
        return masked_softmax(float32_copy(inputs).logits(), support())

    blocks = ceil_div(inputs.n, block)
    return make_result(
        inputs,
        "moba",
        output,
        dense=dense,
        parts={"support": support, "selected_blocks": lambda: selected},
        info={"block": block, "blocks": blocks, "blocks_per_query": min(top_k, blocks)},
    )


def moba_memory(n: int, d: int, dv: int, block: int, top_k: int) -> int:
    """Scalars stored per head; the gate is scored one query block at a time."""
    block = min(block, n)
    blocks = ceil_div(n, block)
    chosen = min(top_k, blocks)
    return (
        n * chosen * block  # each query's scores over its routed blocks' tokens (with blocking waste)
        + n * chosen  # the routed block indices
        + block * blocks  # one query block's gate scores
        + blocks * d  # the block means
    )


def moba_cost(inputs: AttentionInputs, params: dict[str, Any]) -> Cost:
    n, d, dv, b = inputs.n, inputs.d, inputs.dv, inputs.batch
    block = min(params["block"], n)
    blocks = ceil_div(n, block)
    pairs = n * min(params["top_k"], blocks) * block
    flops = 2 * n * blocks * d + n * d + 2 * pairs * (d + dv) + 4 * pairs  # gate, means, scores and P V, softmax
    return Cost(memory=b * moba_memory(n, d, dv, block, params["top_k"]), flops=b * flops)


def moba_budget(n: int, d: int, fraction: float) -> dict[str, Any]:
    # Blocks near sqrt(n) as the paper's 512 at 8K (a power of 2, a kernel tile); top_k fills the rest of the budget.
    target = fraction * n * n
    best: tuple[float, int, int] | None = None
    for power in range(0, max(1, math.ceil(math.log2(max(n, 1)))) + 1):
        block = min(2**power, n)
        blocks = ceil_div(n, block)
        per_block = n * block + n
        top_k = max(1, min(blocks, round((target - block * blocks - blocks * d) / per_block)))
        miss = abs(math.log(moba_memory(n, d, d, block, top_k) / target))
        miss += 0.05 * abs(math.log2(block / math.sqrt(n)))  # prefer sqrt(n) among equal fits
        if best is None or miss < best[0]:
            best = (miss, block, top_k)
    assert best is not None
    return {"block": best[1], "top_k": best[2]}


register(
    MethodSpec(
        name="moba",
        title="MoBA (block routing)",
        family="routed-sparse",
        description="Mixture of Block Attention: each query routes to its own and the top-k key blocks by "
        "q . mean(K_block) and attends to their tokens with one softmax; untrained here.",
        params=(
            ParamSpec(
                "block",
                "int",
                64,
                "Block size B of the key blocks (the paper: 512 at 8K, 4096 at 1M).",
                low=1,
                high=lambda n, d: float(max(n, 1)),
                log=True,
                budgeted=True,
            ),
            ParamSpec(
                "top_k",
                "int",
                3,
                "Blocks each query attends to, its own included (the paper: 3 at 8K, 12 at 1M).",
                low=1,
                high=lambda n, d: float(max(n, 1)),
                log=True,
                budgeted=True,
            ),
        ),
        fn=_run,
        budget=moba_budget,
        cost=moba_cost,
        half_native=True,
        causal_form=True,
    )
)
