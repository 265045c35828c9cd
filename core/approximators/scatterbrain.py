"""Scatterbrain: sparse + low-rank attention with the sparse part correcting the low-rank part.

Low rank: Performer features, A_lr = phi(Q) phi(K)^T (never materialised).
Sparse: on a support Omega (LSH chunks, the paper's choice, or a local band, the released "SBLocal"),
S_ij = exp(beta q_i.k_j) - phi(q_i).phi(k_j), so A_lr + S equals exp(beta q.k) exactly on Omega and the
Performer estimate elsewhere. Output = (A_lr + S) V / ((A_lr + S) 1), accumulated block by block with a
running per-row log reference, so nothing overflows or underflows and no n x n tensor is built.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from core.approximation import Approximation, AttentionInputs, Cost, make_result
from core.approximators.common import row_normalise
from core.approximators.local import band_blocks, band_mask, local_cost, window_param
from core.approximators.lsh import chunk_blocks, hash_plan, lsh_cost, lsh_params
from core.approximators.performer import (
    LogFeatures,
    feature_pair,
    linear_attention,
    performer_cost,
    performer_params,
    safe_denominator,
    unnormalized_estimate,
)
from core.cancel import check
from core.registry import MethodSpec, ParamSpec, register

SUPPORTS = ("lsh", "local", "none")
# Share of the memory budget given to the sparse part (the paper trains with a 3:1 sparse : low-rank split).
SPARSE_SHARE = 0.75


@dataclass
class SupportBlock:
    """A block of query rows with the keys of their support."""

    q_pos: torch.Tensor  # (B, C, c) query positions; n marks a dummy row
    k_pos: torch.Tensor  # (B, C, ck) key positions; masked where invalid
    q: torch.Tensor  # (B, C, c, d)
    k: torch.Tensor  # (B, C, ck, d)
    v: torch.Tensor  # (B, C, ck, dv)
    valid: torch.Tensor  # broadcastable to (B, C, c, ck); a pair found in several LSH rounds is valid once


def support_blocks(inputs: AttentionInputs, params: dict[str, Any]) -> Iterator[SupportBlock]:
    n = inputs.n
    if params["support"] == "lsh":
        plan = hash_plan(inputs, params["rounds"], params["buckets"])
        for block in chunk_blocks(inputs, plan):
            yield SupportBlock(block.q_pos, block.k_pos, block.q, block.k, block.v, block.valid)
    elif params["support"] == "local":
        band = band_blocks(inputs, params["window"])
        q_pos = band.q_pos.clamp_max(n).masked_fill(band.q_pos >= n, n).expand(inputs.batch, -1, -1)
        k_pos = band.key_pos.clamp(0, n - 1).expand(inputs.batch, -1, -1)
        yield SupportBlock(q_pos, k_pos, band.q, band.k, band.v, band.in_band.unsqueeze(0))


def support_mask(inputs: AttentionInputs, params: dict[str, Any]) -> torch.Tensor:
    """Omega as a dense (B, n, n) bool matrix."""
    n = inputs.n
    if params["support"] == "lsh":
        return hash_plan(inputs, params["rounds"], params["buckets"]).support()
    if params["support"] == "local":
        return band_mask(n, params["window"], inputs.device).expand(inputs.batch, n, n)
    return torch.zeros(inputs.batch, n, n, dtype=torch.bool, device=inputs.device)


def support_rounds(inputs: AttentionInputs, params: dict[str, Any]) -> torch.Tensor:
    if params["support"] == "lsh":
        return hash_plan(inputs, params["rounds"], params["buckets"]).support_rounds()
    return support_mask(inputs, params).unsqueeze(1)


def _gather(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """x (B, n + 1, m) rows at positions (B, C, c) -> (B, C, c, m)."""
    b = x.shape[0]
    flat = positions.reshape(b, -1)
    rows = torch.gather(x, 1, flat.unsqueeze(-1).expand(-1, -1, x.shape[-1]))
    return rows.reshape(*positions.shape, x.shape[-1])


def _scatter(values: torch.Tensor, positions: torch.Tensor, n: int, fill: float = 0.0) -> torch.Tensor:
    """(B, C, c, k) rows to (B, n, k) at their positions; each real position occurs at most once per block."""
    b = values.shape[0]
    out = torch.full((b, n + 1, values.shape[-1]), fill, dtype=values.dtype, device=values.device)
    flat = values.reshape(b, -1, values.shape[-1])
    out.scatter_(1, positions.reshape(b, -1, 1).expand_as(flat), flat)
    return out[:, :n]


def _with_dummy(x: torch.Tensor) -> torch.Tensor:
    return torch.cat([x, torch.zeros_like(x[:, :1])], dim=1)


def _run(inputs: AttentionInputs, params: dict[str, Any]) -> Approximation:
    n = inputs.n
    phi_q, phi_k = feature_pair(inputs, params["features"], params["kernel"], params["orthogonal"], params["eps"])
    numerator, denominator = linear_attention(phi_q, phi_k, inputs.v)
    # Everything below is held in units of exp(reference), one reference per query row.
    low_rank_log = phi_q.log_shift + phi_k.log_shift  # (B, n, 1): log of the low-rank features' scale
    reference = low_rank_log
    denominator = denominator.unsqueeze(-1)
    psi_q, psi_k = _with_dummy(phi_q.psi), _with_dummy(phi_k.psi)
    low_rank_log_pad = _with_dummy(low_rank_log)
    neg_inf = float("-inf")
    for block in support_blocks(inputs, params):
        scores = block.q @ block.k.transpose(-1, -2)
        scores.mul_(inputs.scale.unsqueeze(1)).masked_fill_(~block.valid, neg_inf)
        block_max = _scatter(scores.amax(-1, keepdim=True), block.q_pos, n, fill=neg_inf)
        new_reference = torch.maximum(reference, block_max)
        rescale = torch.exp(reference - new_reference)
        numerator, denominator = numerator * rescale, denominator * rescale
        reference = new_reference
        ref_rows = _gather(_with_dummy(reference), block.q_pos)  # (B, C, c, 1)
        lr_rows = _gather(low_rank_log_pad, block.q_pos)
        estimate = _gather(psi_q, block.q_pos) @ _gather(psi_k, block.k_pos).transpose(-1, -2)
        estimate.mul_(torch.exp(lr_rows - ref_rows))
        # S_ij = exp(beta q.k) - phi(q).phi(k) on the support, in units of exp(reference)
        correction = torch.exp_(scores.sub_(ref_rows)).sub_(estimate).masked_fill_(~block.valid, 0.0)
        numerator = numerator + _scatter(correction @ block.v, block.q_pos, n)
        denominator = denominator + _scatter(correction.sum(-1, keepdim=True), block.q_pos, n)
    output = numerator / safe_denominator(denominator)

    cache: dict[str, DenseSplit] = {}

    def dense_split() -> DenseSplit:
        if "split" not in cache:
            cache["split"] = DenseSplit.build(inputs, params, phi_q, phi_k)
        return cache["split"]

    parts = {
        "support": lambda: dense_split().omega,
        "support_rounds": lambda: support_rounds(inputs, params),
        "sparse": lambda: dense_split().sparse(),
        "low_rank": lambda: dense_split().low_rank / dense_split().denominator,
        "naive_sum": lambda: dense_split().naive_sum(),
        "unnormalized_sparse": lambda: dense_split().unnormalized_sparse(),
        "unnormalized_low_rank": lambda: unnormalized_estimate(phi_q, phi_k),
    }
    return make_result(inputs, "scatterbrain", output, dense=lambda: dense_split().attention(), parts=parts)


@dataclass
class DenseSplit:
    """The implied dense matrices, in units of a per-row reference exp(reference) so nothing overflows.

    exact_part = exp(beta q.k) on Omega (0 elsewhere); low_rank = phi(q).phi(k) everywhere; the method's
    matrix is exact_part on Omega and low_rank off it, normalised by its row sums (the output's normaliser).
    """

    omega: torch.Tensor
    exact_part: torch.Tensor
    low_rank: torch.Tensor
    denominator: torch.Tensor
    reference: torch.Tensor
    logits: torch.Tensor
    phi_q: LogFeatures
    phi_k: LogFeatures

    @classmethod
    def build(
        cls, inputs: AttentionInputs, params: dict[str, Any], phi_q: LogFeatures, phi_k: LogFeatures
    ) -> DenseSplit:
        # Each pass below goes over every n x n entry (seconds at large n): a cancelled job stops between them.
        omega = support_mask(inputs, params)
        check()
        logits = inputs.logits()
        low_rank_log = phi_q.log_shift + phi_k.log_shift
        on_support_max = logits.masked_fill(~omega, float("-inf")).amax(-1, keepdim=True)
        reference = torch.maximum(low_rank_log, on_support_max)
        check()
        exact_part = torch.exp(logits - reference).masked_fill_(~omega, 0.0)
        check()
        low_rank = (phi_q.psi @ phi_k.psi.transpose(-1, -2)).mul_(torch.exp(low_rank_log - reference))
        check()
        denominator = safe_denominator(torch.where(omega, exact_part, low_rank).sum(-1, keepdim=True))
        return cls(omega, exact_part, low_rank, denominator, reference, logits, phi_q, phi_k)

    def attention(self) -> torch.Tensor:
        return torch.where(self.omega, self.exact_part, self.low_rank).div_(self.denominator)

    def sparse(self) -> torch.Tensor:
        return (self.exact_part - self.low_rank).masked_fill_(~self.omega, 0.0).div_(self.denominator)

    def naive_sum(self) -> torch.Tensor:
        return row_normalise(self.exact_part + self.low_rank)

    def unnormalized_sparse(self) -> torch.Tensor:
        raw_low_rank = unnormalized_estimate(self.phi_q, self.phi_k)
        return (torch.exp(self.logits) - raw_low_rank).masked_fill_(~self.omega, 0.0)


def scatterbrain_cost(inputs: AttentionInputs, params: dict[str, Any]) -> Cost:
    cost = performer_cost(inputs, params)
    if params["support"] == "lsh":
        sparse = lsh_cost(inputs, params)
    elif params["support"] == "local":
        sparse = local_cost(inputs, params)
    else:
        return cost
    # The correction also needs phi(q).phi(k) on every support pair.
    extra_flops = sparse.memory * 2 * params["features"]
    return Cost(cost.memory + sparse.memory, cost.flops + sparse.flops + extra_flops)


def scatterbrain_budget(n: int, d: int, fraction: float) -> dict[str, Any]:
    sparse_fraction = SPARSE_SHARE * fraction
    low_rank_fraction = (1 - SPARSE_SHARE) * fraction
    rounds = 2
    return {
        "features": max(1, round(low_rank_fraction * n / 2)),
        "buckets": max(1, round(rounds / sparse_fraction)),
        "window": max(0, round(sparse_fraction * n / 3)),
    }


register(
    MethodSpec(
        name="scatterbrain",
        title="Scatterbrain (sparse + low-rank)",
        family="sparse+low-rank",
        description="Performer low-rank part plus a sparse correction on an LSH (or local) support that makes the "
        "sum exact there; normalised over both parts.",
        params=(
            *performer_params(),
            ParamSpec(
                "support",
                "choice",
                "lsh",
                "Where the sparse part lives: lsh (the paper), local (a band, the released SBLocal), or none "
                "(then it is Performer).",
                choices=SUPPORTS,
            ),
            *lsh_params(),
            window_param(16),
        ),
        fn=_run,
        budget=scatterbrain_budget,
        cost=scatterbrain_cost,
        randomized=True,
    )
)
