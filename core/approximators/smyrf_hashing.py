"""SMYRF's hashing (Daras et al., NeurIPS 2020): the XBOX+ asymmetric transform, then E2LSH.

XBOX+ appends two coordinates so that every transformed query and key of a head has the same norm
M = sqrt(M_Q^2 + M_K^2), where M_Q and M_K are the head's largest query and key norms:

    T(q) = [q, 0, sqrt(M^2 - |q|^2)],    T(k) = [k, sqrt(M^2 - |k|^2), 0].

The extra coordinates never meet, so T(q).T(k) = q.k exactly, and |T(q) - T(k)|^2 = 2 M^2 - 2 q.k: the nearer a
transformed pair, the larger its inner product. E2LSH hashes Euclidean distance: h(x) = floor((a.x + b) / r) with
a ~ N(0, I) and b ~ U(0, r), so pairs with large q.k tend to share a bucket. Angular hashing of unit vectors
(Reformer) ranks by cosine instead and ignores the norms.

As in SMYRF's released code (smyrf/torch/utils.py, ``XBOXPLUS``, ``E2LSH``, ``lsh_clustering``): the maxima are
taken per head over its sequence; each hash round is one projection (n_hashes = rounds); r = 1 (``SmyrfAttention``'s
default); queries and keys are each sorted by their projection a.x + b, which refines the bucket order floor((a.x +
b) / r) within a bucket, and cut into equal clusters. Ties in the projection keep position order here.
"""

from __future__ import annotations

import torch

# E2LSH's bucket width r: SmyrfAttention's default. It and the offset b fix the buckets, not the sorted order.
E2LSH_WIDTH = 1.0
# Coordinates XBOX+ appends: one that only keys use and one that only queries use.
XBOX_EXTRA = 2


def xbox_plus(q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """XBOX+ of queries and keys (..., n, d) -> (..., n, d + 2), with the maxima over each head's n rows."""
    q_norms_sq = q.square().sum(-1, keepdim=True)
    k_norms_sq = k.square().sum(-1, keepdim=True)
    common = q_norms_sq.amax(-2, keepdim=True) + k_norms_sq.amax(-2, keepdim=True)  # M^2 = M_Q^2 + M_K^2
    # clamp: the longest query or key gives common - |x|^2 = M_other^2 >= 0, up to rounding
    q_extra = (common - q_norms_sq).clamp_min(0).sqrt()
    k_extra = (common - k_norms_sq).clamp_min(0).sqrt()
    zeros = torch.zeros_like(q_extra)
    return torch.cat([q, zeros, q_extra], dim=-1), torch.cat([k, k_extra, zeros.expand_as(k_extra)], dim=-1)


def e2lsh_draws(generator: torch.Generator, rounds: int, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """One E2LSH function per round: directions a (rounds, dim) ~ N(0, I) and offsets b (rounds,) ~ U(0, r),
    drawn on the CPU in float64 from ``generator`` (move them where they are used)."""
    directions = torch.randn(rounds, dim, generator=generator, dtype=torch.float64, device="cpu")
    offsets = torch.rand(rounds, generator=generator, dtype=torch.float64, device="cpu") * E2LSH_WIDTH
    return directions, offsets


def e2lsh_projection(x: torch.Tensor, directions: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """a.x + b of every row of x (B, n, dim) for every round: (B, rounds, n)."""
    return torch.einsum("bnd,rd->brn", x, directions).add_(offsets.unsqueeze(-1))


def e2lsh_buckets(projection: torch.Tensor) -> torch.Tensor:
    """E2LSH's bucket floor((a.x + b) / r) of projections a.x + b, as int64."""
    return torch.floor(projection / E2LSH_WIDTH).long()
