"""Attention over routed key blocks, shared by MoBA and NSA's selection branch.

Each query i attends, with one softmax, to the tokens of s key blocks of ``block`` positions picked for it
(``selected[b, i]``, where ``valid``), and under ``causal`` only to tokens j <= i. Queries go one query block at a
time (the tile a block-sparse kernel's grid runs): the keys of each query's blocks are gathered, (L, s * L) scores
per query block, never n x n.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from core.approximators.common import (
    DROPPED,
    MIN_GROUP_BYTES,
    ceil_div,
    flat_rows,
    fused_attention,
    fused_attention_serves,
    gather_rows,
    masked_softmax,
)

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
    valid (B, n, s)). The router is asked once per query block; statistics in float32 for half inputs.

    On a CPU in float32 or float64 the work goes key block by key block (``_by_key_block``), to float precision of
    the query-block path below, which half precision and CUDA keep."""
    batch, n, _ = q.shape
    if fused_attention_serves(q, v):
        routes = [router(slice(start, min(start + block, n))) for start in range(0, n, block)]
        selected, valid = torch.cat([r[0] for r in routes], 1), torch.cat([r[1] for r in routes], 1)
        return _by_key_block(q, k, v, scale, block, selected, valid, causal), selected, valid
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


def _by_key_block(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    scale: torch.Tensor,
    block: int,
    selected: torch.Tensor,
    valid: torch.Tensor,
    causal: bool,
) -> torch.Tensor:
    """``routed_attention``'s output computed key block by key block: each (query, routed block) pair joins a tile of
    up to ``block`` queries that routed to the same block, a tile attends to its block's tokens in one fused call,
    and each query's pieces are merged by their log-sum-exps (the same single softmax over the union of its blocks:
    a row's blocks are distinct).

    The query-block path gathers every query's own copy of its blocks' keys, s * block rows of d per query, and ran
    at under 1 GFLOP/s; here each tile gathers its queries' rows and its block's keys once."""
    batch, n, d = q.shape
    slots, blocks = selected.shape[-1], ceil_div(n, block)
    device = q.device
    # Pairs in (batch, query, slot) order, sorted by (batch, block); pairs that are not valid sort last and drop out.
    group = (torch.arange(batch, device=device)[:, None, None] * blocks + selected).reshape(-1)
    group = group.masked_fill(~valid.reshape(-1), batch * blocks)
    order = torch.argsort(group, stable=True)
    sorted_group = group[order]
    counts = torch.bincount(sorted_group, minlength=batch * blocks + 1)[: batch * blocks]
    pairs = int(counts.sum())
    order, sorted_group = order[:pairs], sorted_group[:pairs]
    tiles_of = torch.div(counts + block - 1, block, rounding_mode="floor")  # tiles per group
    first_tile = torch.cumsum(tiles_of, 0) - tiles_of
    rank = torch.arange(pairs, device=device) - (torch.cumsum(counts, 0) - counts)[sorted_group]
    slot_of_pair = (first_tile[sorted_group] + torch.div(rank, block, rounding_mode="floor")) * block + rank % block
    tiles = int(tiles_of.sum())
    # Each tile's query rows (of the flattened B * n table; empty slots read row 0 and are never read back), and
    # its block's token rows.
    query_row = torch.zeros(tiles * block, dtype=torch.long, device=device)
    query_row[slot_of_pair] = torch.div(order, slots, rounding_mode="floor")  # pair (b, i, s) -> row b * n + i
    tile_group = torch.repeat_interleave(torch.arange(batch * blocks, device=device), tiles_of)
    tile_batch = torch.div(tile_group, blocks, rounding_mode="floor")
    tokens = (tile_group % blocks)[:, None] * block + torch.arange(block, device=device)  # (tiles, L)
    key_row = tile_batch[:, None] * n + tokens.clamp_max(n - 1)
    one_scale = bool(scale.amin() == scale.amax())
    table_q, table_k, table_v = flat_rows(q), flat_rows(k), flat_rows(v)
    pair_out = torch.zeros(batch * n * slots, v.shape[-1], dtype=q.dtype, device=device)
    pair_lse = torch.full((batch * n * slots,), float("-inf"), dtype=q.dtype, device=device)
    where = torch.empty(tiles * block, dtype=torch.long, device=device)  # the pair of each tile slot
    where[slot_of_pair] = order
    filled = torch.zeros(tiles * block, dtype=torch.bool, device=device)
    filled[slot_of_pair] = True
    # Tiles in groups of bounded memory: a tile holds 3 * block rows of d and block x block scores.
    per_tile = block * (3 * d + v.shape[-1]) * q.element_size() + block * block * (q.element_size() + 4)
    group_tiles = max(1, MIN_GROUP_BYTES // per_tile)
    for start in range(0, tiles, group_tiles):
        part = slice(start, min(start + group_tiles, tiles))
        rows = query_row[part.start * block : part.stop * block].view(-1, block)
        queries = gather_rows(table_q, rows)
        if not one_scale:
            queries = queries * scale.reshape(-1)[tile_batch[part]][:, None, None]
        bias = None
        padded = tokens[part] >= n  # the last block's padding positions
        if causal:  # a query sees tokens up to its own position (the row's position within its batch element)
            later = tokens[part][:, None, :] > (rows % n)[:, :, None]
            bias = torch.where(later | padded[:, None, :], DROPPED, 0.0).to(q.dtype)
        elif bool(padded.any()):
            bias = torch.where(padded, DROPPED, 0.0).to(q.dtype)[:, None, :]
        out, lse = fused_attention(
            queries, gather_rows(table_k, key_row[part]), gather_rows(table_v, key_row[part]), bias,
            float(scale.flatten()[0]) if one_scale else 1.0,
        )  # fmt: skip
        keep = filled[part.start * block : part.stop * block]
        targets = where[part.start * block : part.stop * block][keep]
        pair_out.index_copy_(0, targets, out.reshape(-1, out.shape[-1])[keep])
        pair_lse.index_copy_(0, targets, lse.reshape(-1)[keep])
    weights = torch.softmax(pair_lse.view(batch, n, slots), dim=-1).unsqueeze(-1)
    return (pair_out.view(batch, n, slots, -1) * weights).sum(2)


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
