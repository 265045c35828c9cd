"""LSH sparse attention in the style of Reformer and SMYRF.

Each round draws a random rotation R and hashes queries and keys separately by angular LSH,
h(x) = argmax([x R, -x R]) (on unit-normalised x, so Q != K works), refined by a second angular hash.
As in SMYRF, queries and keys are then sorted by hash code (ties by position) and cut into ``buckets``
balanced chunks of c = ceil(n / buckets): query chunk t attends to key chunk t. That keeps the cost at
O(n c) per round whatever the bucket sizes, and with one bucket it is exact attention.

Rounds are combined as attention over the union of their supports: a pair found in r rounds has its
score lowered by log r in each (so it counts once), and the rounds' outputs are mixed with
log-sum-exp weights.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from core.approximation import Approximation, AttentionInputs, Cost, make_result
from core.approximators.common import HASH_STREAM, ceil_div, masked_softmax
from core.registry import MethodSpec, ParamSpec, register

MAX_ROUNDS = 16
MAX_DIRECTIONS = 32


@dataclass
class HashPlan:
    """Sorted orders and chunk ids of queries and keys for every round."""

    q_order: torch.Tensor  # (B, R, N) positions in sorted order, padded with n (a dummy) to N = buckets * c
    k_order: torch.Tensor  # (B, R, N)
    q_chunk: torch.Tensor  # (B, R, n) chunk index of each query position
    k_chunk: torch.Tensor  # (B, R, n)
    q_bucket: torch.Tensor  # (B, R, n) raw hash bucket of each position
    k_bucket: torch.Tensor
    chunk: int  # c
    chunks: int  # number of chunks per round (= buckets)

    @property
    def rounds(self) -> int:
        return int(self.q_chunk.shape[1])

    def support_rounds(self) -> torch.Tensor:
        """(B, R, n, n) bool: (i, j) in round r's support."""
        return self.q_chunk.unsqueeze(-1) == self.k_chunk.unsqueeze(-2)

    def support(self) -> torch.Tensor:
        """(B, n, n) bool: the union of the rounds' supports, built round by round (no (B, R, n, n) tensor)."""
        union = self.round_support(0)
        for r in range(1, self.rounds):
            union.logical_or_(self.round_support(r))
        return union

    def round_support(self, r: int) -> torch.Tensor:
        """(B, n, n) bool: round r's support (query and key in the same chunk)."""
        return self.q_chunk[:, r].unsqueeze(-1) == self.k_chunk[:, r].unsqueeze(-2)

    def seen_before(self, r: int, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor | None:
        """Pairs of round r's chunks that an earlier round already attended: (B, C, c, c) bool, or None.

        Counting each pair only in the first round that finds it makes the rounds together attend over the
        union of their supports, each pair exactly once.
        """
        if r == 0:
            return None
        batch = q_pos.shape[0]
        flat_q, flat_k = q_pos.reshape(batch, -1), k_pos.reshape(batch, -1)
        seen: torch.Tensor | None = None
        for earlier in range(r):
            # Dummies get chunk ids that never match anything (-1 for queries, -2 for keys).
            cq = _pad_gather(self.q_chunk[:, earlier], flat_q, -1).reshape(q_pos.shape)
            ck = _pad_gather(self.k_chunk[:, earlier], flat_k, -2).reshape(k_pos.shape)
            same = cq.unsqueeze(-1) == ck.unsqueeze(-2)
            seen = same if seen is None else seen.logical_or_(same)
        return seen


def _pad_gather(values: torch.Tensor, index: torch.Tensor, fill: int) -> torch.Tensor:
    """values (B, n) at index (B, m) where index n (the dummy) reads ``fill``."""
    padded = torch.cat([values, torch.full_like(values[:, :1], fill)], dim=1)
    return torch.gather(padded, 1, index)


def hash_directions(buckets: int) -> tuple[int, int]:
    """Random directions of the primary and secondary angular hash.

    The hash only fixes the sort order; the chunks come from cutting the sorted sequence. So one fixed-size
    code serves every bucket count and hashing costs O(n d) per round: a primary hash into 2 * MAX_DIRECTIONS
    buckets, and a secondary one that orders the points inside each primary bucket. One bucket needs none.
    """
    if buckets <= 1:
        return 0, 0
    return MAX_DIRECTIONS, MAX_DIRECTIONS


def hash_plan(inputs: AttentionInputs, rounds: int, buckets: int) -> HashPlan:
    """Angular LSH of queries and keys for every round, sorted into balanced chunks.

    Hashes depend on q and k alone: when the batch repeats one q and k (``inputs.repeats``, a temperature sweep),
    the first copy is hashed and its plan repeated, which gives the same plan as hashing every copy.
    """
    repeats = inputs.repeats
    b, n, d = inputs.batch // repeats, inputs.n, inputs.d
    q_all, k_all = inputs.q[:b], inputs.k[:b]
    buckets = min(buckets, n)
    chunk = ceil_div(n, buckets)
    chunks = ceil_div(n, chunk)
    primary, secondary = hash_directions(buckets)
    rotations = inputs.randn(rounds, d, max(primary + secondary, 1), stream=HASH_STREAM)
    positions = torch.arange(n, device=inputs.device)

    def angular(rotated: torch.Tensor) -> torch.Tensor:
        # argmax over [x R, -x R] without building the concatenation
        top, top_index = rotated.max(dim=-1)
        bottom, bottom_index = rotated.min(dim=-1)
        return torch.where(top >= -bottom, top_index, bottom_index + rotated.shape[-1])

    def hashes(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if not primary:
            zeros = torch.zeros(b, rounds, n, dtype=torch.long, device=inputs.device)
            return zeros, zeros
        unit = x / x.norm(dim=-1, keepdim=True).clamp_min(torch.finfo(x.dtype).tiny)
        rotated = torch.einsum("bnd,rdk->brnk", unit, rotations)  # (B, R, n, primary + secondary)
        bucket = angular(rotated[..., :primary])
        return bucket, bucket * (2 * secondary) + angular(rotated[..., primary:])

    def order_and_chunk(code: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        key = code * n + positions  # sort by hash code, ties by position (a stable, seed-free order)
        order = key.argsort(dim=-1)
        rank = torch.empty_like(order)
        rank.scatter_(-1, order, positions.expand_as(order))
        pad = torch.full((b, rounds, chunks * chunk - n), n, dtype=order.dtype, device=order.device)
        return torch.cat([order, pad], dim=-1), torch.div(rank, chunk, rounding_mode="floor")

    (q_bucket, q_code), (k_bucket, k_code) = hashes(q_all), hashes(k_all)
    q_order, q_chunk = order_and_chunk(q_code)
    k_order, k_chunk = order_and_chunk(k_code)
    if repeats > 1:
        q_order, k_order, q_chunk, k_chunk, q_bucket, k_bucket = (
            t.repeat(repeats, *(1,) * (t.dim() - 1)) for t in (q_order, k_order, q_chunk, k_chunk, q_bucket, k_bucket)
        )
    return HashPlan(q_order, k_order, q_chunk, k_chunk, q_bucket, k_bucket, chunk, chunks)


@dataclass
class ChunkBlock:
    """One round's gathered chunks: C chunks of c queries and c keys."""

    round: int
    q_pos: torch.Tensor  # (B, C, c) query positions (n = dummy)
    k_pos: torch.Tensor  # (B, C, c)
    q: torch.Tensor  # (B, C, c, d)
    k: torch.Tensor  # (B, C, c, d)
    v: torch.Tensor  # (B, C, c, dv)
    valid: torch.Tensor  # (B, C, 1 or c, c) bool: a real key, not already attended in an earlier round


def chunk_blocks(inputs: AttentionInputs, plan: HashPlan) -> Iterator[ChunkBlock]:
    """Gather each round's chunks; one round at a time keeps the peak at O(n c)."""
    b, n = inputs.batch, inputs.n
    q_flat = _with_dummy_row(inputs.q)
    k_flat = _with_dummy_row(inputs.k)
    v_flat = _with_dummy_row(inputs.v)
    offsets = (torch.arange(b, device=inputs.device) * (n + 1)).unsqueeze(-1)
    shape = (b, plan.chunks, plan.chunk)
    for r in range(plan.rounds):
        q_pos, k_pos = plan.q_order[:, r], plan.k_order[:, r]
        q_rows, k_rows = (q_pos + offsets).reshape(-1), (k_pos + offsets).reshape(-1)
        q = q_flat.index_select(0, q_rows).reshape(*shape, inputs.d)
        k = k_flat.index_select(0, k_rows).reshape(*shape, inputs.d)
        v = v_flat.index_select(0, k_rows).reshape(*shape, inputs.dv)
        q_pos, k_pos = q_pos.reshape(shape), k_pos.reshape(shape)
        valid = (k_pos < n).unsqueeze(-2)
        seen = plan.seen_before(r, q_pos, k_pos)
        if seen is not None:
            valid = valid & ~seen
        yield ChunkBlock(r, q_pos, k_pos, q, k, v, valid)


def _with_dummy_row(x: torch.Tensor) -> torch.Tensor:
    """(B, n, d) -> (B * (n + 1), d) with a zero row after each batch element's rows (the dummy position n)."""
    padded = torch.cat([x, torch.zeros_like(x[:, :1])], dim=1)
    return padded.reshape(-1, x.shape[-1])


def scatter_rows(values: torch.Tensor, positions: torch.Tensor, n: int) -> torch.Tensor:
    """Put (B, C, c, ...) chunk rows back at their sequence positions; dummies are dropped."""
    b = values.shape[0]
    flat = values.reshape(b, -1, *values.shape[3:])
    out = torch.zeros(b, n + 1, *values.shape[3:], dtype=values.dtype, device=values.device)
    index = positions.reshape(b, -1)
    index = index.view(b, -1, *([1] * (flat.dim() - 2))).expand_as(flat)
    out.scatter_(1, index, flat)
    return out[:, :n]


def _run(inputs: AttentionInputs, params: dict[str, Any]) -> Approximation:
    plan = hash_plan(inputs, params["rounds"], params["buckets"])
    n = inputs.n
    outputs, lses = [], []
    lowest = torch.finfo(inputs.dtype).min
    for block in chunk_blocks(inputs, plan):
        scores = block.q @ block.k.transpose(-1, -2)
        scores.mul_(inputs.scale.unsqueeze(1)).masked_fill_(~block.valid, lowest)
        # A row whose pairs were all attended earlier gets lse ~ lowest, so its round weight is 0.
        lse = torch.logsumexp(scores, dim=-1, keepdim=True)
        out = torch.exp_(scores.sub_(lse)) @ block.v
        outputs.append(scatter_rows(out, block.q_pos, n))
        lses.append(scatter_rows(lse, block.q_pos, n))
    weights = torch.softmax(torch.stack(lses), dim=0)  # (R, B, n, 1)
    output = (weights * torch.stack(outputs)).sum(0)

    def dense() -> torch.Tensor:
        return masked_softmax(inputs.logits(), plan.support())

    parts = {
        "support": plan.support,
        "support_rounds": plan.support_rounds,
        "buckets": lambda: torch.stack([plan.q_bucket, plan.k_bucket], dim=2),
        "chunks": lambda: torch.stack([plan.q_chunk, plan.k_chunk], dim=2),
    }
    return make_result(inputs, "lsh", output, dense=dense, parts=parts, info={"chunk": plan.chunk})


def lsh_cost(inputs: AttentionInputs, params: dict[str, Any]) -> Cost:
    n, d, dv, b = inputs.n, inputs.d, inputs.dv, inputs.batch
    rounds, buckets = params["rounds"], min(params["buckets"], n)
    chunk = ceil_div(n, buckets)
    padded = ceil_div(n, chunk) * chunk
    pairs = padded * chunk  # scores per round
    hashing = 2 * 2 * n * d * sum(hash_directions(buckets))
    flops = rounds * (hashing + 2 * pairs * d + 2 * pairs * dv + 4 * pairs + 2 * n * math.log2(max(n, 2)))
    return Cost(memory=b * rounds * pairs, flops=b * int(flops))


def lsh_params() -> tuple[ParamSpec, ...]:
    return (
        ParamSpec(
            "rounds",
            "int",
            2,
            "Hash rounds. Each round finds more of the large entries; cost grows linearly.",
            low=1,
            high=MAX_ROUNDS,
        ),
        ParamSpec(
            "buckets",
            "int",
            16,
            "Buckets (balanced chunks) per round; each query attends to about n / buckets keys per round.",
            low=1,
            high=lambda n, d: float(n),
            log=True,
            budgeted=True,
        ),
    )


def lsh_budget(n: int, d: int, fraction: float, rounds: int = 2) -> dict[str, Any]:
    # memory = rounds * n * c with c = n / buckets
    return {"buckets": max(1, math.ceil(rounds / fraction))}


register(
    MethodSpec(
        name="lsh",
        title="LSH sparse (Reformer/SMYRF)",
        family="sparse",
        description="Angular LSH puts similar queries and keys in the same balanced chunk; exact attention within "
        "chunks, rounds combined over the union of their supports.",
        params=lsh_params(),
        fn=_run,
        budget=lsh_budget,
        cost=lsh_cost,
        randomized=True,
    )
)
