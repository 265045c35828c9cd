"""Native Sparse Attention (Yuan et al. 2025, arXiv 2502.11089): compressed tokens, selected blocks and a window.

o_i = sum_c g_c Attn_c(i) (Eq. 5) over three branches that share one K and V here:

    cmp: softmax over compressed keys K~_j = mean(K of block j), values V~_j = mean(V of block j) (Eq. 7; the paper
         compresses with a learned MLP, fla with mean pooling as here). Causal: block j is visible to query i only
         once it lies entirely in the past, (j + 1) L - 1 <= i.
    slc: the query's top-n blocks by its compressed attention p = softmax(q . K~) (Eq. 8; with equal compression and
         selection blocks Eq. 9's score is p itself), its own block and block 0 always among them (the paper keeps
         1 initial and 2 local blocks); one softmax over their tokens (j <= i when causal).
    win: exact softmax over the keys i - w .. i (causal) or |i - j| <= w.

Gates: the paper's g_c = sigmoid(MLP(x_i)) needs the layer input x, which the engine does not have; g_cmp, g_slc and
g_win are fixed numbers here (1/3 each by default, a choice), renormalised per row over the branches that have a
key (the first L - 1 causal rows see no compressed key: fla returns 0 there, which shrinks their output).

Reference: fla's ``fla/ops/nsa/naive.py`` (one function per branch, as here) and ``fla/layers/nsa.py``.
What it is not: a trained NSA layer (no learned compression MLP, no learned gates, no separate K/V per branch).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from core import registry
from core.approximation import Approximation, AttentionInputs, Cost, make_result
from core.approximators.block_select import block_means, routed_attention, routed_support, top_blocks
from core.approximators.common import ceil_div, float32_copy, masked_softmax
from core.approximators.local import band_mask, local_cost, window_param
from core.errors import ParameterError
from core.registry import MethodSpec, ParamSpec, register

BRANCHES = ("cmp", "slc", "win")


def compressed_visible(n: int, block: int, causal: bool, device: torch.device) -> torch.Tensor:
    """(n, nb) bool: query i may see compressed block j (causal: only once the whole block is in the past)."""
    blocks = ceil_div(n, block)
    ends = torch.clamp((torch.arange(blocks, device=device) + 1) * block, max=n) - 1
    if not causal:
        return torch.ones(n, blocks, dtype=torch.bool, device=device)
    return ends[None, :] <= torch.arange(n, device=device)[:, None]


def compression_branch(inputs: AttentionInputs, block: int, causal: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """cmp: (output (B, n, dv), probabilities p over the compressed keys (B, n, nb) in statistics dtype)."""
    stats = inputs.statistics_dtype
    keys = block_means(inputs.k.to(stats), block)
    values = block_means(inputs.v.to(stats), block)
    visible = compressed_visible(inputs.n, block, causal, inputs.device)
    probs = masked_softmax((inputs.q.to(stats) @ keys.transpose(-1, -2)).mul_(inputs.scale), visible)
    return (probs @ values).to(inputs.dtype), probs


def selection_branch(
    inputs: AttentionInputs, block: int, selected_blocks: int, probs: torch.Tensor, causal: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """slc: each query's top ``selected_blocks`` blocks by p (own block and block 0 forced), one softmax over their
    tokens: (output, selected (B, n, s), valid (B, n, s))."""
    blocks = probs.shape[-1]
    owner = torch.arange(inputs.n, device=inputs.device) // block
    block_ids = torch.arange(blocks, device=inputs.device)
    count = min(selected_blocks, blocks)

    def route(rows: slice) -> tuple[torch.Tensor, torch.Tensor]:
        score = probs[:, rows].clone()
        forced = (owner[rows, None] == block_ids) | (block_ids == 0)
        # the own block first, then block 0: with one selected block, it is the own block
        score = score.masked_fill(forced, 2.0).masked_fill(owner[rows, None] == block_ids, 3.0)
        if causal:
            score = score.masked_fill(block_ids > owner[rows, None], float("-inf"))
        return top_blocks(score, count)

    return routed_attention(inputs.q, inputs.k, inputs.v, inputs.scale, block, route, causal)


def window_branch(inputs: AttentionInputs, window: int, causal: bool) -> torch.Tensor:
    """win: exact attention in the band (the registered local method's blocked path)."""
    local = registry.get("local").fn(inputs, {"window": window, "causal": causal})
    return local.output.reshape(inputs.batch, inputs.n, inputs.dv)


def row_gates(inputs: AttentionInputs, params: dict[str, Any], block: int, causal: bool) -> torch.Tensor:
    """(n, 3) gates per row, renormalised over the branches that have a key for that row."""
    gates = torch.tensor([params["g_cmp"], params["g_slc"], params["g_win"]], dtype=torch.float64)
    present = torch.ones(inputs.n, 3, dtype=torch.float64)
    present[:, 0] = compressed_visible(inputs.n, block, causal, torch.device("cpu")).any(-1).double()
    present[:, 1] = float(params["selected_blocks"] > 0)
    weights = gates * present
    total = weights.sum(-1, keepdim=True)
    if bool((total <= 0).any()):
        raise ParameterError(
            "nsa.g_win",
            "the gates of the selection (with selected_blocks >= 1) and window branches must not all be 0: "
            "some rows would attend to nothing",
        )
    return (weights / total).to(device=inputs.device, dtype=inputs.statistics_dtype)


def _run(inputs: AttentionInputs, params: dict[str, Any]) -> Approximation:
    block, causal = min(params["block"], inputs.n), bool(params.get("causal"))
    window, selected_blocks = params["window"], params["selected_blocks"]
    gates = row_gates(inputs, params, block, causal)  # (n, 3)
    cmp_out, probs = compression_branch(inputs, block, causal)
    output = cmp_out.to(gates.dtype) * gates[:, 0:1]
    selected = valid = None
    if selected_blocks > 0:
        slc_out, selected, valid = selection_branch(inputs, block, selected_blocks, probs, causal)
        output += slc_out.to(gates.dtype) * gates[:, 1:2]
    output += window_branch(inputs, window, causal).to(gates.dtype) * gates[:, 2:3]
    output = output.to(inputs.dtype)

    def selection_support() -> torch.Tensor:
        if selected is None or valid is None:
            return torch.zeros(inputs.batch, inputs.n, inputs.n, dtype=torch.bool, device=inputs.device)
        return routed_support(selected, valid, inputs.n, block, causal)

    def window_support() -> torch.Tensor:
        return band_mask(inputs.n, window, inputs.device, causal).expand(inputs.batch, -1, -1)

    def support() -> torch.Tensor:
        """The entries scored exactly (selection and window); the compressed branch sees blocks, not entries."""
        return selection_support() | window_support()

    def dense() -> torch.Tensor:
        logits = float32_copy(inputs).logits()
        stats = logits.dtype
        blocks = probs.shape[-1]
        sizes = torch.full((blocks,), float(block), dtype=stats, device=inputs.device)
        sizes[-1] = inputs.n - (blocks - 1) * block
        owner = torch.arange(inputs.n, device=inputs.device) // block
        cmp = (probs.to(stats) / sizes).index_select(-1, owner)  # p_i(block of j) / |block|
        g = gates.to(stats)
        matrix = cmp * g[:, 0:1]
        matrix += masked_softmax(logits, selection_support()) * g[:, 1:2]
        matrix += masked_softmax(logits, window_support()) * g[:, 2:3]
        return matrix

    return make_result(
        inputs,
        "nsa",
        output,
        dense=dense,
        parts={
            "support": support,
            "selection_support": selection_support,
            "window_support": window_support,
            "compressed_attention": lambda: probs,
        },
        info={"block": block, "blocks": probs.shape[-1]},
    )


def nsa_memory(n: int, d: int, dv: int, block: int, selected_blocks: int, window_memory: int) -> int:
    block = min(block, n)
    blocks = ceil_div(n, block)
    return (
        n * blocks  # compressed scores per query
        + blocks * (d + dv)  # compressed keys and values
        + n * min(selected_blocks, blocks) * block  # scores over the selected blocks' tokens
        + n * min(selected_blocks, blocks)  # the selected block indices
        + window_memory  # the window's blocked band (local_cost)
    )


def nsa_cost(inputs: AttentionInputs, params: dict[str, Any]) -> Cost:
    n, d, dv, b = inputs.n, inputs.d, inputs.dv, inputs.batch
    block = min(params["block"], n)
    blocks = ceil_div(n, block)
    window = local_cost(inputs, {"window": params["window"], "causal": params.get("causal")})
    pairs = n * min(params["selected_blocks"], blocks) * block
    flops = 2 * n * blocks * (d + dv) + 4 * n * blocks + n * (d + dv) + 2 * pairs * (d + dv) + 4 * pairs
    memory = nsa_memory(n, d, dv, block, params["selected_blocks"], window.memory // b)
    return Cost(memory=b * memory, flops=b * flops + window.flops)


def nsa_budget(n: int, d: int, fraction: float) -> dict[str, Any]:
    # Blocks near sqrt(n) / 2 (the paper's 32/64 at 64K are far below; this keeps n / L compressed scores small), at
    # least 4 / fraction so that they take at most a quarter; 3/4 of the rest to selection, the remainder to the
    # window (3 w scores per query when blocked).
    per_query = fraction * n
    block = 2 ** max(0, round(math.log2(max(1.0, math.sqrt(n) / 2))))
    while n / block > per_query / 4 and block < n:
        block *= 2
    block = min(block, n)
    rest = max(0.0, per_query - n / block)
    selected = int(0.75 * rest // block)
    window = max(0, round((rest - selected * block) / 3))
    return {"block": block, "selected_blocks": selected, "window": window}


def _gate(name: str, what: str) -> ParamSpec:
    return ParamSpec(
        name,
        "float",
        1 / 3,
        f"Gate of the {what} branch (the paper learns sigmoid(MLP(x)) per token; here a fixed weight, renormalised "
        "per row over the branches that have a key).",
        low=0.0,
        high=1.0,
    )


register(
    MethodSpec(
        name="nsa",
        title="NSA (native sparse)",
        family="routed-sparse",
        description="Native Sparse Attention: compressed block tokens, the top-n blocks they select and a sliding "
        "window, mixed by fixed gates; mean-pooled compression, untrained.",
        params=(
            ParamSpec(
                "block",
                "int",
                32,
                "Block length L of compression and selection (the paper: 32 and 64; fla: 64).",
                low=1,
                high=lambda n, d: float(max(n, 1)),
                log=True,
                budgeted=True,
            ),
            ParamSpec(
                "selected_blocks",
                "int",
                4,
                "Blocks n each query selects, its own block and block 0 included (the paper: 16).",
                low=0,
                high=lambda n, d: float(max(n, 1)),
                budgeted=True,
            ),
            window_param(32),
            _gate("g_cmp", "compressed"),
            _gate("g_slc", "selected"),
            _gate("g_win", "window"),
        ),
        fn=_run,
        budget=nsa_budget,
        cost=nsa_cost,
        half_native=True,
        causal_form=True,
    )
)
