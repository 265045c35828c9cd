"""Pieces shared by several methods: random streams, budget arithmetic, dense helpers."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from core.approximation import HALF_DTYPES

if TYPE_CHECKING:
    from core.approximation import AttentionInputs

# Independent random streams of one call; the same seed gives Performer and Scatterbrain the same
# projection and LSH and Scatterbrain the same hashing, so they can be compared draw for draw.
FEATURE_STREAM = 1
HASH_STREAM = 2
PROJECTION_STREAM = 3


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def masked_softmax(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension restricted to mask; rows with an empty mask give zeros."""
    neg = torch.finfo(logits.dtype).min
    filled = logits.masked_fill(~mask, neg)
    probs = torch.softmax(filled, dim=-1).mul_(mask)  # in place: the same numbers without two n x n temporaries
    return probs.div_(probs.sum(-1, keepdim=True).clamp_min(torch.finfo(logits.dtype).tiny))


def row_normalise(matrix: torch.Tensor) -> torch.Tensor:
    return matrix / matrix.sum(-1, keepdim=True).clamp_min(torch.finfo(matrix.dtype).tiny)


# ------------------------------------------------------------------ bucketed attention (lsh, local, scatterbrain)

# Blocks of a bucketed method are processed in groups whose temporaries stay within the larger of this and a
# quarter of the float32 bytes of all the method's scores: the peak stays within the cost model, and a few
# large batched calls (not one per round or head) do the work.
MIN_GROUP_BYTES = 2**21
GROUPS_PER_MODEL = 4


def blocks_per_group(blocks: int, bytes_per_block: int, total_pairs: int) -> int:
    """How many blocks (of ``bytes_per_block`` temporaries each) one group takes."""
    budget = max(MIN_GROUP_BYTES, 4 * total_pairs // GROUPS_PER_MODEL)
    return max(1, min(blocks, budget // max(1, bytes_per_block)))


def is_half(dtype: torch.dtype) -> bool:
    return dtype in HALF_DTYPES


def float32_copy(inputs: AttentionInputs) -> AttentionInputs:
    """Half-precision inputs as float32 (the dense views and hashing); other inputs as they are."""
    if not is_half(inputs.dtype):
        return inputs
    return dataclasses.replace(inputs, q=inputs.q.float(), k=inputs.k.float(), v=inputs.v.float())


def flat_rows(x: torch.Tensor) -> torch.Tensor:
    """(B, n, m) -> (B * n, m), the table that ``gather_rows`` reads (a view where x is contiguous)."""
    return x.reshape(-1, x.shape[-1])


def gather_rows(table: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Rows of a (rows, m) table at index (G, c) -> (G, c, m)."""
    return table.index_select(0, index.reshape(-1)).reshape(*index.shape, table.shape[-1])


@dataclass
class BlockGroup:
    """A group of G blocks: each block's queries attend to its keys where ``valid``."""

    q_pos: torch.Tensor  # (G, cq) query positions in the sequence; n marks a padding row
    q_index: torch.Tensor  # (G, cq) rows of the flattened (B * n) inputs (padding rows read a real row)
    k_index: torch.Tensor  # (G, ck)
    batch: torch.Tensor  # (G,) batch element of each block
    round: torch.Tensor  # (G,) hash round of each block (0 for a band)
    # (G, cq or 1, ck) bool: a real query, a real key, in the support (each pair once); None: every pair counts
    valid: torch.Tensor | None
    q: torch.Tensor  # (G, cq, d) in the input dtype
    k: torch.Tensor  # (G, ck, d)
    v: torch.Tensor  # (G, ck, dv)
    scale: torch.Tensor  # (G, 1, 1) float32 or the input dtype
    # For the fused kernel, in place of valid: (G, cq or 1, ck) additive, 0 for a valid pair and DROPPED otherwise
    bias: torch.Tensor | None = None

    def scores(self, dtype: torch.dtype) -> torch.Tensor:
        """scale * q k^T in ``dtype`` (the product in the input dtype, accumulated in float32 by torch)."""
        return torch.bmm(self.q, self.k.transpose(1, 2)).to(dtype).mul_(self.scale)

    def drop_invalid_(self, pairs: torch.Tensor, fill: float) -> torch.Tensor:
        """pairs (G, cq, ck) with every pair outside ``valid`` set to fill, in place (untouched when all count)."""
        return pairs if self.valid is None else pairs.masked_fill_(self.valid.logical_not(), fill)

    def valid_mask(self) -> torch.Tensor:
        """``valid`` as a tensor, (G, 1, 1) of True where every pair counts."""
        if self.valid is not None:
            return self.valid
        return torch.ones(self.q.shape[0], 1, 1, dtype=torch.bool, device=self.q.device)


# torch's fused CPU attention kernel (the one SDPA runs on a CPU), which also returns each row's log-sum-exp.
_CPU_FLASH = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)
# The fused kernel's additive mask for a dropped pair. Finite on purpose: exp gives exactly 0 for the pair, and a
# row with no pair left gets a log-sum-exp near -1e30, whose round weight is exactly 0 (with -inf the kernel gives
# such a row a log-sum-exp of 0).
DROPPED = -1e30


def fused_attention_available(inputs: AttentionInputs) -> bool:
    """Whether ``fused_attention`` serves these inputs: float32 or float64 on a CPU, values as wide as keys."""
    return fused_attention_serves(inputs.q, inputs.v)


def fused_attention_serves(q: torch.Tensor, v: torch.Tensor) -> bool:
    return (
        _CPU_FLASH is not None
        and q.device.type == "cpu"
        and q.dtype in (torch.float32, torch.float64)
        and v.shape[-1] == q.shape[-1]
    )


def fused_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor | None, scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(scale q k^T + bias) v for each of G blocks and each row's log-sum-exp, in one call of torch's fused
    CPU kernel: q (G, cq, d), k and v (G, ck, d), bias (G, cq or 1, ck) or None -> (G, cq, d) and (G, cq)."""
    assert _CPU_FLASH is not None
    mask = None if bias is None else bias[None]
    out, lse = _CPU_FLASH(q[None], k[None], v[None], 0.0, False, attn_mask=mask, scale=scale)
    return out[0], lse[0]


def dropped_bias(dropped: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The fused kernel's additive mask: DROPPED where dropped is True, else 0."""
    values = torch.tensor([0.0, DROPPED], dtype=dtype, device=dropped.device)
    return torch.where(dropped, values[1], values[0])


def fused_block_attention(group: BlockGroup, scale: float | None) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(scale q k^T + bias) v over each block and each row's log-sum-exp, in one fused call: (G, cq, dv) and
    (G, cq, 1). scale: the one scale of every block, or None to use each block's own.

    One kernel in place of a dozen element-wise passes per group: with idle OpenMP threads asleep (the app's
    setting), each pass paid a wake-up that cost more than its arithmetic.
    """
    q = group.q if scale is not None else group.q * group.scale
    out, lse = fused_attention(q, group.k, group.v, group.bias, 1.0 if scale is None else scale)
    return out, lse.unsqueeze(-1)


def index_add_in_order_(target: torch.Tensor, dim: int, index: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """``target.index_add_(dim, index, values)`` with repeated indices added in their order, on every device.

    A CPU adds them in index order. CUDA adds repeats in whatever order its threads run, so one call could differ
    from itself in the last bits; there the entries are split into levels (the first occurrence of each index,
    the second, ...), each free of repeats, and added level by level.
    """
    if target.device.type == "cpu" or index.numel() == 0:
        return target.index_add_(dim, index, values)
    return index_add_by_levels_(target, dim, index, values)


def index_add_by_levels_(target: torch.Tensor, dim: int, index: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """The device path of ``index_add_in_order_`` (on a CPU it equals index_add_ bit for bit: a test checks)."""
    order = torch.argsort(index, stable=True)
    ranks = torch.arange(index.numel(), device=index.device)
    starts = torch.ones_like(index, dtype=torch.bool)
    starts[1:] = index[order][1:] != index[order][:-1]
    run_start = torch.cummax(torch.where(starts, ranks, 0), dim=0).values
    level = torch.empty_like(ranks).scatter_(0, order, ranks - run_start)
    for occurrence in range(int(level.max()) + 1):
        picked = (level == occurrence).nonzero().squeeze(-1)
        target.index_add_(dim, index[picked], values.index_select(dim, picked))
    return target
