"""Attention over routed key blocks, shared by MoBA and NSA's selection branch.

Each query i attends, with one softmax, to the tokens of s key blocks of ``block`` positions picked for it
(``selected[b, i]``, where ``valid``), and under ``causal`` only to tokens j <= i. Queries go one query block at a
time (the tile a block-sparse kernel's grid runs): the keys of each query's blocks are gathered, (L, s * L) scores
per query block, never n x n.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from core.approximators.common import ceil_div, flat_rows, gather_rows, masked_softmax

# (B, rows, nb) routing scores of a slice of query rows -> (selected (B, rows, s) block indices, valid (B, rows, s))
Router = Callable[[slice], tuple[torch.Tensor, torch.Tensor]]


def block_means(x: torch.Tensor, block: int) -> torch.Tensor:
    """Mean of each block of ``block`` positions (the last block over its real positions): (B, ceil(n / L), d)."""
    batch, n, width = x.shape
    blocks = ceil_div(n, block)
    padded = x.new_zeros(batch, blocks * block, width)
    padded[:, :n] = x
    counts = torch.full((blocks,), float(block), dtype=x.dtype, device=x.device)
    counts[-1] = n - (blocks - 1) * block
    return padded.view(batch, blocks, block, width).sum(2) / counts[:, None]


def top_blocks(scores: torch.Tensor, count: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``count`` highest-scoring blocks per row (ties: the lower block index first, a stable sort), and which
    of them are real (score above -inf: masked blocks are never attended)."""
    order = torch.sort(scores, dim=-1, descending=True, stable=True).indices[..., :count]
    return order, torch.gather(scores, -1, order) > float("-inf")


def routed_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    scale: torch.Tensor,
    block: int,
    router: Router,
    causal: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """softmax over the tokens of each query's routed blocks, applied to v: (output (B, n, dv), selected (B, n, s),
    valid (B, n, s)). The router is asked once per query block; statistics in float32 for half inputs."""
    batch, n, _ = q.shape
    stats = torch.float32 if q.dtype in (torch.float16, torch.bfloat16) else q.dtype
    output = v.new_empty(batch, n, v.shape[-1])
    table_k, table_v = flat_rows(k), flat_rows(v)
    offsets = torch.arange(block, device=q.device)
    row_offset = (torch.arange(batch, device=q.device) * n)[:, None, None]
    chosen, kept = [], []
    for start in range(0, n, block):
        rows = slice(start, min(start + block, n))
        selected, valid = router(rows)  # (B, c, s)
        tokens = (selected[..., None] * block + offsets).flatten(-2)  # (B, c, s * L)
        real = valid.repeat_interleave(block, dim=-1) & (tokens < n)
        if causal:
            positions = torch.arange(rows.start, rows.stop, device=q.device)[None, :, None]
            real &= tokens <= positions
        index = row_offset + tokens.clamp_max(n - 1)
        keys, values = gather_rows(table_k, index), gather_rows(table_v, index)  # (B, c, s L, d)
        scores = (q[:, rows].unsqueeze(-2) @ keys.transpose(-1, -2)).squeeze(-2).to(stats).mul_(scale)
        probs = masked_softmax(scores, real).to(v.dtype)
        output[:, rows] = (probs.unsqueeze(-2) @ values).squeeze(-2)
        chosen.append(selected)
        kept.append(valid)
    return output, torch.cat(chosen, 1), torch.cat(kept, 1)


def routed_support(selected: torch.Tensor, valid: torch.Tensor, n: int, block: int, causal: bool) -> torch.Tensor:
    """The (B, n, n) bool support of ``routed_attention``: the tokens of each query's valid blocks (j <= i when
    causal)."""
    batch, _, _ = selected.shape
    blocks = ceil_div(n, block)
    hits = torch.zeros(batch, n, blocks, dtype=torch.bool, device=selected.device)
    hits.scatter_(-1, selected, valid)  # a row's blocks are distinct (top_blocks)
    support = hits.repeat_interleave(block, dim=-1)[..., :n]
    if causal:
        support &= torch.ones(n, n, dtype=torch.bool, device=selected.device).tril_()
    return support
