"""Local (banded) attention: each query attends to keys within ``window`` positions, |i - j| <= w.

The band is computed in blocks of length L = max(w, 1): query block t needs key blocks t-1, t, t+1,
so the scores are (n / L) x L x 3L: O(n w) memory, never n x n.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from core.approximation import Approximation, AttentionInputs, Cost, make_result
from core.approximators.common import ceil_div, masked_softmax
from core.registry import MethodSpec, ParamSpec, register


@dataclass
class BandBlocks:
    """Queries in blocks of L, with the 3L keys around each block."""

    q: torch.Tensor  # (B, nb, L, d)
    k: torch.Tensor  # (B, nb, 3L, d)
    v: torch.Tensor  # (B, nb, 3L, dv)
    in_band: torch.Tensor  # (nb, L, 3L) bool: a real query, a real key, and |i - j| <= w
    key_pos: torch.Tensor  # (nb, 3L) key positions (may be out of range where masked)
    q_pos: torch.Tensor  # (nb, L)
    block: int


def band_blocks(inputs: AttentionInputs, window: int) -> BandBlocks:
    n = inputs.n
    length = max(1, min(window, n))
    blocks = ceil_div(n, length)
    padded = blocks * length

    def blocked(x: torch.Tensor) -> torch.Tensor:
        pad = torch.zeros(x.shape[0], length, x.shape[-1], dtype=x.dtype, device=x.device)
        tail = torch.zeros(x.shape[0], padded - n + length, x.shape[-1], dtype=x.dtype, device=x.device)
        full = torch.cat([pad, x, tail], dim=1).reshape(x.shape[0], blocks + 2, length, x.shape[-1])
        return torch.cat([full[:, :-2], full[:, 1:-1], full[:, 2:]], dim=2)  # (B, nb, 3L, d)

    q = torch.cat(
        [inputs.q, torch.zeros(inputs.batch, padded - n, inputs.d, dtype=inputs.dtype, device=inputs.device)], dim=1
    ).reshape(inputs.batch, blocks, length, inputs.d)
    starts = torch.arange(blocks, device=inputs.device) * length
    q_pos = starts[:, None] + torch.arange(length, device=inputs.device)[None, :]
    key_pos = starts[:, None] - length + torch.arange(3 * length, device=inputs.device)[None, :]
    in_band = (
        ((q_pos[:, :, None] - key_pos[:, None, :]).abs() <= window)
        & (key_pos[:, None, :] >= 0)
        & (key_pos[:, None, :] < n)
        & (q_pos[:, :, None] < n)
    )
    return BandBlocks(q, blocked(inputs.k), blocked(inputs.v), in_band, key_pos, q_pos, length)


def band_mask(n: int, window: int, device: torch.device) -> torch.Tensor:
    pos = torch.arange(n, device=device)
    return (pos[:, None] - pos[None, :]).abs() <= window


# Query blocks are processed in groups so that one group's scores stay under this many entries.
SCORES_PER_GROUP = 2**21


def _run(inputs: AttentionInputs, params: dict[str, Any]) -> Approximation:
    window = params["window"]
    band = band_blocks(inputs, window)
    blocks, length = band.q.shape[1], band.block
    group = max(1, SCORES_PER_GROUP // max(1, inputs.batch * length * 3 * length))
    lowest = torch.finfo(inputs.dtype).min
    pieces = []
    for start in range(0, blocks, group):
        part = slice(start, start + group)
        scores = band.q[:, part] @ band.k[:, part].transpose(-1, -2)
        scores.mul_(inputs.scale.unsqueeze(1)).masked_fill_(~band.in_band[part], lowest)
        # Every real query has itself in its band, so no real row is fully masked.
        pieces.append(torch.softmax(scores, dim=-1) @ band.v[:, part])
    output = torch.cat(pieces, dim=1).reshape(inputs.batch, -1, inputs.dv)[:, : inputs.n]

    def dense() -> torch.Tensor:
        return masked_softmax(inputs.logits(), band_mask(inputs.n, window, inputs.device))

    return make_result(
        inputs, "local", output, dense=dense, parts={"support": lambda: band_mask(inputs.n, window, inputs.device)}
    )


def local_cost(inputs: AttentionInputs, params: dict[str, Any]) -> Cost:
    n, d, dv, b = inputs.n, inputs.d, inputs.dv, inputs.batch
    length = max(1, min(params["window"], n))
    pairs = ceil_div(n, length) * length * 3 * length
    return Cost(memory=b * pairs, flops=b * (2 * pairs * d + 2 * pairs * dv + 4 * pairs))


def window_param(default: int = 32) -> ParamSpec:
    return ParamSpec(
        "window",
        "int",
        default,
        "Each query attends to keys at most this many positions away (|i - j| <= window).",
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
    )
)
