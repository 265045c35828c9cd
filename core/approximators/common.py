"""Pieces shared by several methods: random streams, budget arithmetic, dense helpers."""

from __future__ import annotations

import math

import torch

# Independent random streams of one call; the same seed gives Performer and Scatterbrain the same
# projection and LSH and Scatterbrain the same hashing, so they can be compared draw for draw.
FEATURE_STREAM = 1
HASH_STREAM = 2
PROJECTION_STREAM = 3


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def at_most_n(n: int, d: int) -> float:
    return float(n)


def masked_softmax(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension restricted to mask; rows with an empty mask give zeros."""
    neg = torch.finfo(logits.dtype).min
    filled = logits.masked_fill(~mask, neg)
    probs = torch.softmax(filled, dim=-1).mul_(mask)  # in place: the same numbers without two n x n temporaries
    return probs.div_(probs.sum(-1, keepdim=True).clamp_min(torch.finfo(logits.dtype).tiny))


def row_normalise(matrix: torch.Tensor) -> torch.Tensor:
    return matrix / matrix.sum(-1, keepdim=True).clamp_min(torch.finfo(matrix.dtype).tiny)


def log_scale_count(n: int) -> float:
    return math.log(max(n, 1))
