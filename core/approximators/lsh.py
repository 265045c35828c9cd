"""LSH sparse attention in the style of Reformer and SMYRF.

Each round draws a random rotation R and hashes queries and keys separately by angular LSH,
h(x) = argmax([x R, -x R]) (on unit-normalised x, so Q != K works), refined by a second angular hash.
As in SMYRF, queries and keys are then sorted by hash code (ties by position) and cut into ``buckets``
balanced chunks of c = ceil(n / buckets): query chunk t attends to key chunk t. That keeps the cost at
O(n c) per round whatever the bucket sizes, and with one bucket it is exact attention. ``hashing="xbox_e2lsh"``
sorts by SMYRF's hash instead (XBOX+ then E2LSH, one projection per round: core/approximators/smyrf_hashing.py),
which ranks keys by inner product rather than by cosine; the chunks are cut the same way.

Rounds are combined as attention over the union of their supports: a pair counts only in the first round
that finds it, and the rounds' outputs are mixed with log-sum-exp weights.

The efficient path is batched: every (head, round, chunk) block is one entry of a batch dimension, cut into a
few memory-bounded groups (``common.blocks_per_group``) so the peak stays within the cost model; each group is
one gather, one score product, one masked float32 softmax-statistics pass and one value product. Half-precision
inputs are hashed as their float32 copy (the same support), and keep their products in half precision.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from core.approximation import Approximation, AttentionInputs, Cost, make_result
from core.approximators import smyrf_hashing
from core.approximators.common import (
    HASH_STREAM,
    BlockGroup,
    blocks_per_group,
    ceil_div,
    dropped_bias,
    flat_rows,
    float32_copy,
    fused_attention_available,
    fused_block_attention,
    gather_rows,
    is_half,
    masked_softmax,
)
from core.errors import ParameterError
from core.registry import MethodSpec, ParamSpec, register

MAX_ROUNDS = 16
MAX_DIRECTIONS = 32
# How queries and keys are hashed before the sort: Reformer's angular LSH (cosine order), or SMYRF's XBOX+ then E2LSH
# (inner-product order; core/approximators/smyrf_hashing.py).
ANGULAR = "angular"
XBOX_E2LSH = "xbox_e2lsh"
HASHINGS = (ANGULAR, XBOX_E2LSH)
# Up to this many bytes, both angular hashes of a round come from one product of the rotations.
ONE_PRODUCT_BYTES = 2**24


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
    # Causal: a chunk's query attends only to its keys at positions <= its own (set by the caller).
    causal: bool = False
    # Queries and keys hold the same values (shared QK), so the keys' order and chunks are the queries'.
    shared: bool = False
    # The chunk ids with a padding column each, for seen_before (queries', keys')
    _chunk_tables: tuple[torch.Tensor, torch.Tensor] | None = field(default=None, repr=False)

    @property
    def rounds(self) -> int:
        return int(self.q_chunk.shape[1])

    def support_rounds(self) -> torch.Tensor:
        """(B, R, n, n) bool: (i, j) in round r's support."""
        same = self.q_chunk.unsqueeze(-1) == self.k_chunk.unsqueeze(-2)
        return same.logical_and_(self._causal_mask()) if self.causal else same

    def _causal_mask(self) -> torch.Tensor:
        n = self.q_chunk.shape[-1]
        return torch.ones(n, n, dtype=torch.bool, device=self.q_chunk.device).tril_()

    def support(self) -> torch.Tensor:
        """(B, n, n) bool: the union of the rounds' supports, built round by round (no (B, R, n, n) tensor)."""
        union = self.round_support(0)
        for r in range(1, self.rounds):
            union.logical_or_(self.round_support(r))
        return union

    def round_support(self, r: int) -> torch.Tensor:
        """(B, n, n) bool: round r's support (query and key in the same chunk; causal: key j <= query i)."""
        same = self.q_chunk[:, r].unsqueeze(-1) == self.k_chunk[:, r].unsqueeze(-2)
        return same.logical_and_(self._causal_mask()) if self.causal else same

    def seen_before(
        self,
        batch: torch.Tensor,
        rounds: torch.Tensor,
        latest: int,
        q_pos: torch.Tensor,
        k_pos: torch.Tensor,
        one_round: bool = False,
    ) -> torch.Tensor | None:
        """Pairs of the blocks' chunks that an earlier round already attended: (G, c, c) bool, or None.

        batch, rounds: (G,) of each block, latest: the largest of rounds (one_round: every block's round);
        q_pos, k_pos: (G, c) positions (n = padding). Counting each pair only in the first round that finds it
        makes the rounds together attend over the union of their supports, each pair exactly once. All rounds at
        once: the chunk ids of every earlier round are compared in one call.
        """
        if latest == 0:
            return None
        n = self.q_chunk.shape[-1]
        earlier = torch.arange(latest, device=q_pos.device)
        # Row of (batch, round) in the padded chunk tables; padding gets chunk ids that never match (-1 and -2).
        table_rows = (batch.unsqueeze(-1) * self.rounds + earlier).unsqueeze(-1) * (n + 1)  # (G, R', 1)
        if self._chunk_tables is None:  # made once per plan, not once per group
            self._chunk_tables = self._padded_chunks(self.q_chunk, -1), self._padded_chunks(self.k_chunk, -2)
        q_chunk = self._chunk_tables[0].take(table_rows + q_pos.unsqueeze(1))  # (G, R', c)
        k_chunk = self._chunk_tables[1].take(table_rows + k_pos.unsqueeze(1))
        same = q_chunk.unsqueeze(-1) == k_chunk.unsqueeze(-2)  # (G, R', c, c)
        if not one_round:
            same.logical_and_((earlier < rounds.unsqueeze(-1))[..., None, None])
        return same[:, 0] if latest == 1 else same.any(dim=1)

    @staticmethod
    def _padded_chunks(chunks: torch.Tensor, fill: int) -> torch.Tensor:
        return torch.cat([chunks, torch.full_like(chunks[..., :1], fill)], dim=-1)


def hash_directions(buckets: int, hashing: str = ANGULAR) -> tuple[int, int]:
    """Random directions of the primary and secondary hash of one round.

    The hash only fixes the sort order; the chunks come from cutting the sorted sequence. So one fixed-size
    code serves every bucket count and hashing costs O(n d) per round: a primary hash into 2 * MAX_DIRECTIONS
    buckets, and a secondary one that orders the points inside each primary bucket. One bucket needs none.
    SMYRF's E2LSH sorts by one projection per round (its n_hashes are rounds), which orders the points fully.
    """
    if buckets <= 1:
        return 0, 0
    if hashing == XBOX_E2LSH:
        return 1, 0
    return MAX_DIRECTIONS, MAX_DIRECTIONS


def _smyrf_order(
    inputs: AttentionInputs, q: torch.Tensor, k: torch.Tensor, rounds: int
) -> tuple[tuple[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
    """(bucket, sorted order) of queries and keys, (B, R, n) each, by XBOX+ then E2LSH (core/approximators/
    smyrf_hashing.py): sorted by the projection a.x + b, as SMYRF's released code does; ties keep position order."""
    q_wide, k_wide = smyrf_hashing.xbox_plus(q, k)
    directions, offsets = smyrf_hashing.e2lsh_draws(inputs.generator(HASH_STREAM), rounds, q_wide.shape[-1])
    directions, offsets = (t.to(device=inputs.device, dtype=q.dtype) for t in (directions, offsets))
    results = []
    for x in (q_wide, k_wide):
        projection = smyrf_hashing.e2lsh_projection(x, directions, offsets)
        results.append((smyrf_hashing.e2lsh_buckets(projection), projection.argsort(dim=-1, stable=True)))
    return results[0], results[1]


def concatenated_argmax_(rotated: torch.Tensor) -> torch.Tensor:
    """Reformer's angular hash ``torch.cat([x, -x], -1).argmax(-1)`` for finite x, without the concatenation and
    overwriting x (the product is not needed after its hash).

    The largest entry of [x, -x] is max(x) or -min(x); a tie goes to x's half, which comes first. Its index is
    the first where x equals that value. On a CPU, argmax over a short last dimension does not vectorise: over the
    32 directions it was about 3x slower than these element-wise passes, which also need no new tensor.
    """
    k = rotated.shape[-1]
    high, low = rotated.amax(-1, keepdim=True), rotated.amin(-1, keepdim=True)
    negative = low.neg() > high
    target = torch.where(negative, low, high)
    rank = torch.arange(k, 0, -1, dtype=rotated.dtype, device=rotated.device)  # k for the first index, 1 the last
    # |x - target| is 0 exactly at the target: 1 - sign(|x - target|) marks it, and the largest rank is its first.
    first = rotated.sub_(target).abs_().sign_().neg_().add_(1).mul_(rank).amax(-1)
    return first.neg_().add_(k).long().add_(negative.squeeze(-1) * k)


def same_values(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether a and b hold the same values (the same view, or equal entries)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.data_ptr() == b.data_ptr() and a.stride() == b.stride():
        return True
    return bool(torch.equal(a, b))


def hash_plan(inputs: AttentionInputs, rounds: int, buckets: int, hashing: str = ANGULAR) -> HashPlan:
    """LSH of queries and keys for every round, sorted into balanced chunks.

    hashing: ``ANGULAR`` (Reformer's angular LSH of unit vectors, cosine order) or ``XBOX_E2LSH`` (SMYRF's XBOX+
    transform then E2LSH, inner-product order). Hashes depend on q and k alone: when the batch repeats one q and k
    (``inputs.repeats``, a temperature sweep), the first copy is hashed and its plan repeated, which gives the same
    plan as hashing every copy.
    """
    if hashing not in HASHINGS:
        raise ParameterError("hashing", f"must be one of {', '.join(map(repr, HASHINGS))}, got {hashing!r}")
    repeats = inputs.repeats
    b, n, d = inputs.batch // repeats, inputs.n, inputs.d
    q_all, k_all = inputs.q[:b], inputs.k[:b]
    buckets = min(buckets, n)
    chunk = ceil_div(n, buckets)
    chunks = ceil_div(n, chunk)
    primary, secondary = hash_directions(buckets)
    # Hashing needs float32 at least: half-precision inputs are hashed as their float32 copy.
    hash_dtype = inputs.statistics_dtype
    positions = torch.arange(n, device=inputs.device)
    smyrf = hashing == XBOX_E2LSH and buckets > 1
    # XBOX+ hashes queries and keys by different transforms, so only the angular hash can share them.
    shared = not smyrf and same_values(q_all, k_all)

    def angular(rotated: torch.Tensor) -> torch.Tensor:
        return concatenated_argmax_(rotated)

    def hashes(x: torch.Tensor, rotations: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if not primary:
            zeros = torch.zeros(b, rounds, n, dtype=torch.long, device=inputs.device)
            return zeros, zeros
        x = x.to(hash_dtype)
        unit = x / x.norm(dim=-1, keepdim=True).clamp_min(torch.finfo(x.dtype).tiny)
        if primary == secondary and b * rounds * n * 2 * primary * unit.element_size() <= ONE_PRODUCT_BYTES:
            # Both hashes from one product: half the passes, each of which costs a thread wake-up at this size.
            product = unit.reshape(-1, d) @ rotations.permute(1, 0, 2).reshape(d, -1)  # (B n, R * 2 * directions)
            hashed = angular(product.view(b, n, rounds, 2, primary)).permute(0, 2, 1, 3)  # (B, R, n, 2)
            bucket = hashed[..., 0]
            return bucket, bucket * (2 * secondary) + hashed[..., 1]
        # One hash at a time keeps a single (B, R, n, directions) product alive.
        bucket = angular(torch.einsum("bnd,rdk->brnk", unit, rotations[..., :primary]))
        return bucket, bucket * (2 * secondary) + angular(torch.einsum("bnd,rdk->brnk", unit, rotations[..., primary:]))

    def angular_order(code: torch.Tensor) -> torch.Tensor:
        key = code * n + positions  # sort by hash code, ties by position (a stable, seed-free order)
        return key.argsort(dim=-1)

    def padded_and_chunked(order: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        rank = torch.empty_like(order)
        rank.scatter_(-1, order, positions.expand_as(order))
        pad = torch.full((b, rounds, chunks * chunk - n), n, dtype=order.dtype, device=order.device)
        return torch.cat([order, pad], dim=-1), torch.div(rank, chunk, rounding_mode="floor")

    if smyrf:
        q_hashed, k_hashed = _smyrf_order(inputs, q_all.to(hash_dtype), k_all.to(hash_dtype), rounds)
        (q_bucket, q_sorted), (k_bucket, k_sorted) = q_hashed, k_hashed
    else:
        rotations = inputs.randn(rounds, d, max(primary + secondary, 1), stream=HASH_STREAM).to(hash_dtype)
        q_bucket, q_code = hashes(q_all, rotations)
        q_sorted = angular_order(q_code)
        if shared:  # self-attention with shared queries and keys: the keys hash as the queries
            k_bucket, k_sorted = q_bucket, q_sorted
        else:
            k_bucket, k_code = hashes(k_all, rotations)
            k_sorted = angular_order(k_code)
    q_order, q_chunk = padded_and_chunked(q_sorted)
    k_order, k_chunk = padded_and_chunked(k_sorted)
    if repeats > 1:
        q_order, k_order, q_chunk, k_chunk, q_bucket, k_bucket = (
            t.repeat(repeats, *(1,) * (t.dim() - 1)) for t in (q_order, k_order, q_chunk, k_chunk, q_bucket, k_bucket)
        )
    if shared:
        k_order, k_chunk, k_bucket = q_order, q_chunk, q_bucket
    return HashPlan(q_order, k_order, q_chunk, k_chunk, q_bucket, k_bucket, chunk, chunks, shared=shared)


def chunk_blocks(
    inputs: AttentionInputs,
    plan: HashPlan,
    bytes_per_pair: int = 0,
    bytes_per_row: int = 0,
    as_bias: bool = False,
) -> Iterator[BlockGroup]:
    """Every round's chunks as blocks of c queries and c keys, gathered in memory-bounded groups.

    Blocks are ordered (batch, round, chunk): rounds and heads are one batch dimension. bytes_per_pair: what the
    caller's own temporaries add per score, bytes_per_row per query or key row, for the group size. as_bias: the
    blocks' pairs are given as the fused kernel's additive ``bias`` instead of ``valid`` (non-causal plans only;
    padding query rows are then computed against the real keys and must be dropped by the caller).
    """
    b, n, rounds, chunk = inputs.batch, inputs.n, plan.rounds, plan.chunk
    blocks = b * rounds * plan.chunks
    q_order = plan.q_order.reshape(blocks, chunk)
    k_order = plan.k_order.reshape(blocks, chunk)
    batch_of = torch.arange(b, device=inputs.device).repeat_interleave(rounds * plan.chunks)
    round_of = torch.arange(rounds, device=inputs.device).repeat_interleave(plan.chunks).repeat(b)
    tables = flat_rows(inputs.q), flat_rows(inputs.k), flat_rows(inputs.v)
    pair_bytes = 4 + rounds + 2 + bytes_per_pair  # float32 scores, the earlier rounds' comparison, the masks
    row_bytes = inputs.q.element_size() * (2 * inputs.d + inputs.dv) + 8 * 4 + 2 * bytes_per_row
    group = blocks_per_group(blocks, chunk * chunk * pair_bytes + chunk * row_bytes, blocks * chunk * chunk)
    per_batch = rounds * plan.chunks
    padded = plan.chunks * chunk > n
    for start in range(0, blocks, group):
        end = min(start + group, blocks)
        part = slice(start, end)
        batch, q_pos, k_pos = batch_of[part], q_order[part], k_order[part]
        # The group's latest round, and whether all its blocks are of one round, from the block order (no sync)
        latest = rounds - 1 if (end - 1) // per_batch != start // per_batch else (end - 1) // plan.chunks % rounds
        one_round = start // plan.chunks == (end - 1) // plan.chunks
        offset = batch.unsqueeze(-1) * n
        # Padding positions (n) read the batch element's last row; the mask drops them.
        q_index = offset + q_pos.clamp_max(n - 1)
        k_index = q_index if plan.shared else offset + k_pos.clamp_max(n - 1)
        seen = plan.seen_before(batch, round_of[part], latest, q_pos, k_pos, one_round)
        valid = bias = None  # None while every pair counts: a round's first blocks, unpadded and non-causal
        if as_bias:
            bias = dropped_bias(k_pos.unsqueeze(-2) >= n, inputs.dtype) if padded else None
            if seen is not None:
                seen_bias = dropped_bias(seen, inputs.dtype)
                bias = seen_bias if bias is None else seen_bias.add_(bias)
        else:
            valid = (q_pos < n).unsqueeze(-1) & (k_pos < n).unsqueeze(-2) if padded else None
            if plan.causal:  # padding (n) is already out of the keys: it is after every query
                order = k_pos.unsqueeze(-2) <= q_pos.unsqueeze(-1)
                valid = order if valid is None else valid.logical_and_(order)
            if seen is not None:
                unseen = seen.logical_not_()
                valid = unseen if valid is None else valid.logical_and_(unseen)
        q, v = gather_rows(tables[0], q_index), gather_rows(tables[2], k_index)
        k = q if plan.shared else gather_rows(tables[1], k_index)  # shared: the same rows of the same values
        yield BlockGroup(q_pos, q_index, k_index, batch, round_of[part], valid, q, k, v, inputs.scale[batch], bias)


def causal_self_rule(support: torch.Tensor) -> torch.Tensor:
    """Reformer's rule on a causal support (..., n, n): no pair (i, i), except that a query with no other key
    attends to itself alone (whether or not the hash put its own key with it)."""
    diagonal = torch.eye(support.shape[-1], dtype=torch.bool, device=support.device)
    others = support & ~diagonal
    return others | (diagonal & ~others.any(-1, keepdim=True))


def _lsh_output(inputs: AttentionInputs, plan: HashPlan) -> torch.Tensor:
    """Softmax over the union of the rounds' supports: each round's chunks give a log-sum-exp and a normalised
    output per query, and the rounds are mixed with softmax weights of their log-sum-exps.

    Causal plans follow Reformer's rule (``causal_self_rule``): the pair (i, i) is left out of every chunk, and a
    query that finds no other key in any round takes its own value."""
    b, n, rounds = inputs.batch, inputs.n, plan.rounds
    stats = inputs.statistics_dtype
    lowest = torch.finfo(stats).min
    # (round, batch, position) rows, with one padding row per (round, batch) for the padding queries. Every real
    # row is written: each position is in one chunk of each round (the padding rows are never read).
    outputs = torch.empty(rounds * b * (n + 1), inputs.dv, dtype=stats, device=inputs.device)
    lses = torch.empty((rounds * b * (n + 1), 1), dtype=stats, device=inputs.device)
    # Causal: how many keys other than itself each (batch, position) query found, over all rounds.
    other_keys = torch.zeros(b * (n + 1), dtype=torch.int32, device=inputs.device) if plan.causal else None
    half_bytes = 4 if is_half(inputs.dtype) else 0  # the half copies of the scores and probabilities
    # The fused CPU kernel where it serves (float32 and float64, non-causal): one call per group for the scores,
    # softmax statistics and values, to float precision of the passes below.
    fused = fused_attention_available(inputs) and not plan.causal
    scale = inputs.scale
    one_scale = float(scale.flatten()[0]) if fused and bool(scale.amin() == scale.amax()) else None
    for group in chunk_blocks(inputs, plan, half_bytes, as_bias=fused):
        if fused:
            out, lse = fused_block_attention(group, one_scale)
            rows = ((group.round * b + group.batch) * (n + 1)).unsqueeze(-1).add(group.q_pos).reshape(-1)
            outputs.index_copy_(0, rows, out.reshape(-1, inputs.dv))
            lses.index_copy_(0, rows, lse.reshape(-1, 1))
            continue
        if other_keys is not None and group.valid is not None:  # a causal plan always has a mask
            itself = group.q_pos.unsqueeze(-1) == group.k_index.remainder(n).unsqueeze(-2)
            group.valid.logical_and_(itself.logical_not_())
            found = group.valid.sum(-1, dtype=torch.int32).reshape(-1)
            other_keys.index_add_(0, (group.batch * (n + 1)).unsqueeze(-1).add(group.q_pos).reshape(-1), found)
        # Masked pairs are -inf (exp of -inf is fast, of the lowest float is not: 5x on a CPU). One pass of exp:
        # weights exp(s - peak) and their sum give the normalised output and lse = peak + log(sum). A row with no
        # pair left (all attended in an earlier round, padding, or causal) gets output 0 and lse = lowest, so its
        # round weight is 0.
        scores = group.drop_invalid_(group.scores(stats), -math.inf)
        peak = scores.amax(dim=-1, keepdim=True).clamp_min_(lowest)
        weights = torch.exp_(scores.sub_(peak))
        total = weights.sum(dim=-1, keepdim=True)
        divisor = total.clamp_min(torch.finfo(stats).tiny)
        if is_half(inputs.dtype):  # normalised before the half product, whose sums could leave float16's range
            out = torch.bmm(weights.div_(divisor).to(inputs.dtype), group.v).to(stats)
        else:  # normalised after it: c values per row instead of c * c
            out = torch.bmm(weights.to(inputs.dtype), group.v).to(stats).div_(divisor)
        lse = total.log_().add_(peak).clamp_min_(lowest)
        rows = ((group.round * b + group.batch) * (n + 1)).unsqueeze(-1).add(group.q_pos).reshape(-1)
        outputs.index_copy_(0, rows, out.reshape(-1, inputs.dv))
        lses.index_copy_(0, rows, lse.reshape(-1, 1))
    outputs, lses = outputs.view(rounds, b, n + 1, -1)[:, :, :n], lses.view(rounds, b, n + 1, 1)[:, :, :n]
    weights = torch.softmax(lses, dim=0)  # (R, B, n, 1)
    output = outputs.mul_(weights).sum(0).to(inputs.dtype)
    if other_keys is not None:
        alone = other_keys.view(b, n + 1, 1)[:, :n] == 0
        output = torch.where(alone, inputs.v, output)
    return output


def _run(inputs: AttentionInputs, params: dict[str, Any]) -> Approximation:
    plan = hash_plan(inputs, params["rounds"], params["buckets"], params["hashing"])
    plan.causal = bool(params.get("causal"))
    output = _lsh_output(inputs, plan)

    def support() -> torch.Tensor:
        return causal_self_rule(plan.support()) if plan.causal else plan.support()

    def dense() -> torch.Tensor:
        return masked_softmax(float32_copy(inputs).logits(), support())

    parts = {
        "support": support,
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
    hashing = 2 * 2 * n * d * sum(hash_directions(buckets, params["hashing"]))
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
        ParamSpec(
            "hashing",
            "choice",
            ANGULAR,
            "How queries and keys are hashed before they are sorted into chunks: angular (Reformer: the direction "
            "of q and k, so it ranks keys by cosine) or xbox_e2lsh (SMYRF: the XBOX+ transform then E2LSH, so it "
            "ranks keys by the inner product q.k, norms included).",
            choices=HASHINGS,
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
        half_native=True,
        causal_form=True,
    )
)
