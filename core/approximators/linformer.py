"""Linformer-style attention with a random projection.

Keys and values are projected along the sequence by E (r x n): softmax(beta Q (E K)^T) (E V).
Linformer learns E; nothing here is trained, so E is a random Gaussian (Johnson-Lindenstrauss) matrix
with N(0, 1/n) entries (near-orthonormal rows). Expect it to be much worse than a trained Linformer.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from core.approximation import Approximation, AttentionInputs, Cost, make_result
from core.approximators.common import PROJECTION_STREAM, is_half
from core.device import row_blocks
from core.registry import MethodSpec, ParamSpec, register


@functools.lru_cache(maxsize=8)
def _projection(rank: int, n: int, seed_key: int, device: str, dtype: torch.dtype) -> torch.Tensor:
    """E drawn in float64 on the CPU, kept only as the copy a call uses (a call then allocates no r x n tensor)."""
    g = torch.Generator().manual_seed(seed_key)
    e = torch.randn(rank, n, generator=g, dtype=torch.float64, device="cpu") / n**0.5
    return e.to(device=device, dtype=dtype)


def projection_for(inputs: AttentionInputs, rank: int) -> torch.Tensor:
    seed_key = int(inputs.generator(PROJECTION_STREAM).initial_seed())
    return _projection(rank, inputs.n, seed_key, str(inputs.device), inputs.dtype)


def _half_softmax(scores: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """softmax(scale * scores) of half-precision scores (B, n, r), written over them: each block of rows is scaled
    and normalised in float32 (max and sum in float32), then stored in the scores' dtype."""
    for rows in row_blocks(scores.shape[-2], scores.shape[0] * scores.shape[-1], scores.device):
        scores[:, rows] = torch.softmax(scores[:, rows].float().mul_(scale), dim=-1)
    return scores


def _run(inputs: AttentionInputs, params: dict[str, Any]) -> Approximation:
    e = projection_for(inputs, params["rank"])
    k_proj, v_proj = e @ inputs.k, e @ inputs.v  # (B, r, d)
    scores = inputs.q @ k_proj.transpose(-1, -2)  # (B, n, r)
    if is_half(inputs.dtype):
        probs = _half_softmax(scores, inputs.scale)
    else:
        probs = torch.softmax(scores.mul_(inputs.scale), dim=-1)  # scaled in place
    del scores
    output = probs @ v_proj
    return make_result(inputs, "linformer", output, dense=lambda: probs @ e, parts={"projection": lambda: e})


def linformer_cost(inputs: AttentionInputs, params: dict[str, Any]) -> Cost:
    n, d, dv, b, r = inputs.n, inputs.d, inputs.dv, inputs.batch, params["rank"]
    memory = n * r + r * (d + dv) + r * n
    flops = 2 * r * n * (d + dv) + 2 * n * r * d + 2 * n * r * dv + 3 * n * r
    return Cost(memory=b * memory, flops=b * flops)


def linformer_budget(n: int, d: int, fraction: float) -> dict[str, Any]:
    # scores n r plus the projection r n
    return {"rank": max(1, round(fraction * n / 2))}


register(
    MethodSpec(
        name="linformer",
        title="Linformer (random projection)",
        family="low-rank",
        description="Projects keys and values along the sequence to r rows; E is RANDOM Gaussian here because "
        "nothing is trained (Linformer learns it).",
        params=(
            ParamSpec(
                "rank",
                "int",
                64,
                "Projected length r of keys and values.",
                low=1,
                high=lambda n, d: float(n),
                log=True,
                budgeted=True,
            ),
        ),
        fn=_run,
        budget=linformer_budget,
        cost=linformer_cost,
        randomized=True,
        half_native=True,
        no_causal_reason="Linformer projects keys and values along the whole sequence, so every projected key "
        "mixes past and future positions; it has no causal form",
    )
)
