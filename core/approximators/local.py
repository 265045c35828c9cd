"""Local (banded) attention: each query attends to keys within ``window`` positions, |i - j| <= w.

The band is computed in blocks of length L = max(w, 1): query block t needs key blocks t-1, t, t+1,
so the scores are (n / L) x L x 3L: O(n w) memory, never n x n. Causal: keys i - w .. i only, so query block t
needs key blocks t-1 and t, (n / L) x L x 2L scores (lucidrains' local-attention with look_backward=1,
look_forward=0). The blocks go through SDPA (one fused call per
memory-bounded group of blocks; heads are blocks too), which keeps half-precision softmax statistics in float32.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F

from core.approximation import Approximation, AttentionInputs, Cost, make_result
from core.approximators.common import (
    BlockGroup,
    blocks_per_group,
    ceil_div,
    flat_rows,
    float32_copy,
    gather_rows,
    masked_softmax,
)
from core.registry import MethodSpec, ParamSpec, register


def band_groups(
    inputs: AttentionInputs, window: int, bytes_per_pair: int, bytes_per_row: int = 0, causal: bool = False
) -> Iterator[BlockGroup]:
    """Query blocks of L = max(w, 1) positions with the 3L keys around them (causal: the 2L keys up to the block's
    end, masked to 0 <= i - j <= w), in memory-bounded groups.

    Blocks are ordered (batch, block), so a group's queries are consecutive rows of the padded sequence.
    bytes_per_pair, bytes_per_row: what the caller's temporaries take per score and per row, for the group size.
    """
    b, n = inputs.batch, inputs.n
    length = max(1, min(window, n))
    blocks_per_row = ceil_div(n, length)
    blocks = b * blocks_per_row
    device = inputs.device
    offsets = torch.arange(length, device=device)
    key_blocks = 2 if causal else 3
    key_offsets = torch.arange(key_blocks * length, device=device) - length
    # |i - j| <= w depends only on the offsets inside the block: one (L, 3L) pattern serves every block.
    lag = offsets.unsqueeze(-1) - key_offsets.unsqueeze(0)
    pattern = (lag >= 0) & (lag <= window) if causal else lag.abs_() <= window
    tables = flat_rows(inputs.q), flat_rows(inputs.k), flat_rows(inputs.v)
    row_bytes = inputs.q.element_size() * (inputs.d + key_blocks * (inputs.d + inputs.dv)) + 8 * 4 + 4 * bytes_per_row
    bytes_per_block = key_blocks * length * length * (1 + bytes_per_pair) + length * row_bytes
    group = blocks_per_group(blocks, bytes_per_block, blocks * key_blocks * length * length)
    for start in range(0, blocks, group):
        block = torch.arange(start, min(start + group, blocks), device=device)
        batch = torch.div(block, blocks_per_row, rounding_mode="floor")
        first = (block - batch * blocks_per_row).unsqueeze(-1) * length
        q_pos, k_pos = first + offsets, first + key_offsets
        q_real, k_real = q_pos < n, (k_pos >= 0) & (k_pos < n)
        valid = pattern & q_real.unsqueeze(-1) & k_real.unsqueeze(-2)
        offset = batch.unsqueeze(-1) * n
        q_index, k_index = offset + q_pos.clamp_max(n - 1), offset + k_pos.clamp(0, n - 1)
        q, k, v = gather_rows(tables[0], q_index), gather_rows(tables[1], k_index), gather_rows(tables[2], k_index)
        yield BlockGroup(
            q_pos.masked_fill(~q_real, n),
            q_index,
            k_index,
            batch,
            torch.zeros_like(batch),
            valid,
            q,
            k,
            v,
            inputs.scale[batch],
        )


def band_mask(n: int, window: int, device: torch.device, causal: bool = False) -> torch.Tensor:
    pos = torch.arange(n, device=device)
    lag = pos[:, None] - pos[None, :]
    return ((lag >= 0) & (lag <= window)) if causal else lag.abs() <= window


# SDPA's temporaries per score (a boolean mask, its float copy and the scores), for the group size.
SDPA_BYTES_PER_PAIR = 9


def _run(inputs: AttentionInputs, params: dict[str, Any]) -> Approximation:
    window, causal = params["window"], bool(params.get("causal"))
    b, n, length = inputs.batch, inputs.n, max(1, min(window, inputs.n))
    padded = ceil_div(n, length) * length
    output = torch.empty(b * padded, inputs.dv, dtype=inputs.dtype, device=inputs.device)
    # One scale for the batch goes to SDPA as it is; a scale per batch element (a temperature sweep) scales q.
    shared_scale = float(inputs.scale.amax()) if bool(inputs.scale.amin() == inputs.scale.amax()) else None
    start = 0
    for group in band_groups(inputs, window, SDPA_BYTES_PER_PAIR, causal=causal):
        q = group.q if shared_scale is not None else (group.q * group.scale).to(inputs.dtype)
        # Every real query has itself in its band, so only padding rows are fully masked (and dropped).
        # 4-D: torch's CPU kernel takes its fused path (half matmuls, float32 statistics) only for 4-D inputs; the
        # 3-D math path was 1.4-3x slower and computed half inputs in float32.
        out = F.scaled_dot_product_attention(
            q[None],
            group.k[None],
            group.v[None],
            attn_mask=group.valid_mask()[None],
            scale=shared_scale if shared_scale is not None else 1.0,
        )[0]
        output[start : start + out.shape[0] * length] = out.reshape(-1, inputs.dv)
        start += out.shape[0] * length
    output = output.view(b, padded, inputs.dv)[:, :n]

    def support() -> torch.Tensor:
        return band_mask(inputs.n, window, inputs.device, causal)

    def dense() -> torch.Tensor:
        return masked_softmax(float32_copy(inputs).logits(), support())

    return make_result(inputs, "local", output, dense=dense, parts={"support": support})


def local_cost(inputs: AttentionInputs, params: dict[str, Any]) -> Cost:
    n, d, dv, b = inputs.n, inputs.d, inputs.dv, inputs.batch
    length = max(1, min(params["window"], n))
    pairs = ceil_div(n, length) * length * (2 if params.get("causal") else 3) * length
    return Cost(memory=b * pairs, flops=b * (2 * pairs * d + 2 * pairs * dv + 4 * pairs))


def window_param(default: int = 32) -> ParamSpec:
    return ParamSpec(
        "window",
        "int",
        default,
        "Each query attends to keys at most this many positions away (|i - j| <= window; causal: i - window <= "
        "j <= i).",
        low=0,
        high=lambda n, d: float(max(n - 1, 0)),
        budgeted=True,
    )


def local_budget(n: int, d: int, fraction: float) -> dict[str, Any]:
    # The blocked band computes 3 w scores per query (blocks of w against their 3 neighbours).
    return {"window": max(0, round(fraction * n / 3))}


register(
    MethodSpec(
        name="local",
        title="Local window",
        family="sparse",
        description="Exact attention inside a band |i - j| <= window; everything outside is dropped.",
        params=(window_param(),),
        fn=_run,
        budget=local_budget,
        cost=local_cost,
        half_native=True,
        causal_form=True,
    )
)
