"""Scatterbrain: sparse + low-rank attention with the sparse part correcting the low-rank part.

Low rank: Performer features, A_lr = phi(Q) phi(K)^T (never materialised).
Sparse: on a support Omega (LSH chunks, the paper's choice, or a local band, the released "SBLocal"),
S_ij = exp(beta q_i.k_j) - phi(q_i).phi(k_j), so A_lr + S equals exp(beta q.k) exactly on Omega and the
Performer estimate elsewhere. Output = (A_lr + S) V / ((A_lr + S) 1), accumulated block by block with a
running per-row log reference, so nothing overflows or underflows and no n x n tensor is built. The blocks of
the support (heads and LSH rounds in one batch dimension) are processed in memory-bounded groups; half-precision
inputs keep their score and value products in half precision, the corrections and references in float32.

Causal (the paper's App. C): the low-rank part is Performer's prefix sums (``causal_linear_attention``), and Omega
is the causal support (LSH chunks or the band, keys j <= i, the diagonal kept: off Omega the low-rank part covers
every earlier pair, so Reformer's rule against attending to oneself does not apply), the correction on it only.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from core.approximation import Approximation, AttentionInputs, Cost, make_result
from core.approximators.common import (
    BlockGroup,
    flat_rows,
    float32_copy,
    gather_rows,
    index_add_in_order_,
    is_half,
    row_normalise,
)
from core.approximators.local import band_groups, band_mask, local_cost, window_param
from core.approximators.lsh import HashPlan, chunk_blocks, hash_plan, lsh_cost, lsh_params
from core.approximators.performer import (
    LogFeatures,
    causal_estimate,
    causal_linear_attention,
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


def support_groups(
    inputs: AttentionInputs, params: dict[str, Any], plan: HashPlan | None, bytes_per_pair: int, bytes_per_row: int
) -> Iterator[BlockGroup]:
    """The support's blocks in memory-bounded groups (nothing for support "none"); plan: the LSH support's (a causal
    plan gives the causal chunks)."""
    if plan is not None:
        yield from chunk_blocks(inputs, plan, bytes_per_pair, bytes_per_row)
    elif params["support"] == "local":
        causal = bool(params.get("causal"))
        yield from band_groups(inputs, params["window"], bytes_per_pair, bytes_per_row, causal=causal)


def support_mask(inputs: AttentionInputs, params: dict[str, Any]) -> torch.Tensor:
    """Omega as a dense (B, n, n) bool matrix."""
    n = inputs.n
    causal = bool(params.get("causal"))
    if params["support"] == "lsh":
        plan = hash_plan(inputs, params["rounds"], params["buckets"], params["hashing"])
        plan.causal = causal
        return plan.support()
    if params["support"] == "local":
        return band_mask(n, params["window"], inputs.device, causal).expand(inputs.batch, n, n)
    return torch.zeros(inputs.batch, n, n, dtype=torch.bool, device=inputs.device)


def support_rounds(inputs: AttentionInputs, params: dict[str, Any]) -> torch.Tensor:
    if params["support"] == "lsh":
        plan = hash_plan(inputs, params["rounds"], params["buckets"], params["hashing"])
        plan.causal = bool(params.get("causal"))
        return plan.support_rounds()
    return support_mask(inputs, params).unsqueeze(1)


def _feature_pair(inputs: AttentionInputs, params: dict[str, Any]) -> tuple[LogFeatures, LogFeatures]:
    causal = bool(params.get("causal"))
    return feature_pair(inputs, params["features"], params["kernel"], params["orthogonal"], params["eps"], causal)


def _run(inputs: AttentionInputs, params: dict[str, Any]) -> Approximation:
    b, n, dv = inputs.batch, inputs.n, inputs.dv
    stats = inputs.statistics_dtype
    # Hashing first: its temporaries are gone before the features are made.
    plan = (
        hash_plan(inputs, params["rounds"], params["buckets"], params["hashing"])
        if params["support"] == "lsh"
        else None
    )
    causal = bool(params.get("causal"))
    if plan is not None:
        plan.causal = causal
    phi_q, phi_k = _feature_pair(inputs, params)
    key_log = key_running = None
    if causal:
        # The causal low-rank part by prefix sums, in units of exp(a_i + M_i) per row, M_i the running key shift.
        numerator, denominator, running = causal_linear_attention(phi_q, phi_k, inputs.v)
        low_rank_log = (phi_q.log_shift + running).to(stats).reshape(-1)
        key_log, key_running = phi_k.log_shift.to(stats).reshape(-1), running.to(stats).reshape(-1)
    else:
        numerator, denominator = linear_attention(phi_q, phi_k, inputs.v)
        low_rank_log = (phi_q.log_shift + phi_k.log_shift).to(stats).expand(b, n, 1).reshape(-1)
    # Everything below is held in units of exp(reference), one reference per query row (rows of B * n).
    numerator = flat_rows(numerator.to(stats))
    denominator = denominator.to(stats).reshape(-1, 1)
    reference = low_rank_log.clone()
    psi_q, psi_k = flat_rows(phi_q.psi), flat_rows(phi_k.psi)
    half_bytes = 4 if is_half(inputs.dtype) else 0  # half copies of the scores and of the correction
    half_bytes += 8 if causal else 0  # the estimate and its key weights, a second and third c x c tensor
    psi_bytes = 4 * psi_q.shape[-1] * 3  # float32 feature rows of queries and keys, and the scaled query rows
    neg_inf = float("-inf")
    for group in support_groups(inputs, params, plan, half_bytes, psi_bytes):
        scores = group.drop_invalid_(group.scores(stats), neg_inf)
        rows = group.q_index.reshape(-1)
        # A query can sit in several blocks of a group (one per round): scatter_reduce takes the largest.
        new_reference = reference.scatter_reduce(0, rows, scores.amax(-1).reshape(-1), "amax")
        rescale = torch.exp(reference - new_reference).unsqueeze(-1)
        numerator.mul_(rescale)
        denominator.mul_(rescale)
        reference = new_reference
        ref_rows = reference[group.q_index]  # (G, c)
        # S_ij = exp(beta q.k) - phi(q).phi(k) on the support, in units of exp(reference); the per-row scale of
        # phi(q) is folded into its rows, and the estimate is subtracted in place (no second c x c tensor).
        correction = torch.exp_(scores.sub_(ref_rows.unsqueeze(-1)))
        psi_q_rows = gather_rows(psi_q, group.q_index).to(stats)
        psi_q_rows = psi_q_rows.mul_(torch.exp(low_rank_log[group.q_index] - ref_rows).unsqueeze(-1))
        psi_k_rows = gather_rows(psi_k, group.k_index).to(stats)
        if key_log is None or key_running is None:
            correction.baddbmm_(psi_q_rows, psi_k_rows.transpose(1, 2), alpha=-1)
        else:
            # Keys have their own shifts s_j: the estimate's pair weight exp(s_j - M_i) is <= 1 on the causal support.
            key_weights = key_log[group.k_index].unsqueeze(-2) - key_running[group.q_index].unsqueeze(-1)
            key_weights = group.drop_invalid_(key_weights, neg_inf).exp_()
            correction.sub_(torch.bmm(psi_q_rows, psi_k_rows.transpose(1, 2)).mul_(key_weights))
            del key_weights
        del psi_q_rows, psi_k_rows
        group.drop_invalid_(correction, 0.0)
        values = torch.bmm(correction.to(inputs.dtype), group.v).reshape(-1, dv)
        # A query found in several rounds of one group is added in a fixed order (CUDA's index_add_ has none).
        index_add_in_order_(numerator, 0, rows, values.to(stats))
        index_add_in_order_(denominator, 0, rows, correction.sum(-1).reshape(-1, 1))
    output = (numerator / safe_denominator(denominator)).view(b, n, dv).to(inputs.dtype)

    cache: dict[str, Any] = {}
    # The dense views of half-precision inputs are built from their float32 copy (its features too).
    wide = float32_copy(inputs)

    def dense_features() -> tuple[LogFeatures, LogFeatures]:
        if "features" not in cache:
            cache["features"] = (phi_q, phi_k) if wide is inputs else _feature_pair(wide, params)
        return cache["features"]

    def dense_split() -> DenseSplit:
        if "split" not in cache:
            cache["split"] = DenseSplit.build(wide, params, *dense_features())
        return cache["split"]

    parts = {
        "support": lambda: dense_split().omega,
        "support_rounds": lambda: support_rounds(inputs, params),
        "sparse": lambda: dense_split().sparse(),
        "low_rank": lambda: dense_split().low_rank / dense_split().denominator,
        "naive_sum": lambda: dense_split().naive_sum(),
        "unnormalized_sparse": lambda: dense_split().unnormalized_sparse(),
        "unnormalized_low_rank": lambda: raw_low_rank(*dense_features(), causal),
    }
    return make_result(inputs, "scatterbrain", output, dense=lambda: dense_split().attention(), parts=parts)


def raw_low_rank(phi_q: LogFeatures, phi_k: LogFeatures, causal: bool) -> torch.Tensor:
    """phi(Q) phi(K)^T, the raw estimate of exp(beta q.k) (causal: 0 above the diagonal). May overflow."""
    if not causal:
        return unnormalized_estimate(phi_q, phi_k)
    scores, log_reference = causal_estimate(phi_q, phi_k)
    return scores.mul_(torch.exp(log_reference))


@dataclass
class DenseSplit:
    """The implied dense matrices, in units of a per-row reference exp(reference) so nothing overflows.

    exact_part = exp(beta q.k) on Omega (0 elsewhere); low_rank = phi(q).phi(k) everywhere (causal: on and below
    the diagonal, 0 above it); the method's matrix is exact_part on Omega and low_rank off it, normalised by its row
    sums (the output's normaliser).
    """

    omega: torch.Tensor
    exact_part: torch.Tensor
    low_rank: torch.Tensor
    denominator: torch.Tensor
    reference: torch.Tensor
    logits: torch.Tensor
    phi_q: LogFeatures
    phi_k: LogFeatures
    causal: bool = False

    @classmethod
    def build(
        cls, inputs: AttentionInputs, params: dict[str, Any], phi_q: LogFeatures, phi_k: LogFeatures
    ) -> DenseSplit:
        # Each pass below goes over every n x n entry (seconds at large n): a cancelled job stops between them.
        causal = bool(params.get("causal"))
        omega = support_mask(inputs, params)
        check()
        logits = inputs.logits()
        if causal:  # phi_k shifted per row: the estimate comes in units of its own per-row reference
            estimate, low_rank_log = causal_estimate(phi_q, phi_k)
        else:
            low_rank_log = phi_q.log_shift + phi_k.log_shift
        on_support_max = logits.masked_fill(~omega, float("-inf")).amax(-1, keepdim=True)
        reference = torch.maximum(low_rank_log, on_support_max)
        check()
        exact_part = torch.exp(logits - reference).masked_fill_(~omega, 0.0)
        check()
        if causal:
            low_rank = estimate.mul_(torch.exp(low_rank_log - reference))
        else:
            low_rank = (phi_q.psi @ phi_k.psi.transpose(-1, -2)).mul_(torch.exp(low_rank_log - reference))
        check()
        denominator = safe_denominator(torch.where(omega, exact_part, low_rank).sum(-1, keepdim=True))
        return cls(omega, exact_part, low_rank, denominator, reference, logits, phi_q, phi_k, causal)

    def attention(self) -> torch.Tensor:
        return torch.where(self.omega, self.exact_part, self.low_rank).div_(self.denominator)

    def sparse(self) -> torch.Tensor:
        return (self.exact_part - self.low_rank).masked_fill_(~self.omega, 0.0).div_(self.denominator)

    def naive_sum(self) -> torch.Tensor:
        return row_normalise(self.exact_part + self.low_rank)

    def unnormalized_sparse(self) -> torch.Tensor:
        raw = raw_low_rank(self.phi_q, self.phi_k, self.causal)
        return (torch.exp(self.logits) - raw).masked_fill_(~self.omega, 0.0)


def scatterbrain_cost(inputs: AttentionInputs, params: dict[str, Any]) -> Cost:
    cost = performer_cost(inputs, params)
    if params["support"] == "lsh":
        sparse = lsh_cost(inputs, params)
    elif params["support"] == "local":
        sparse = local_cost(inputs, params)
    else:
        return cost
    # The correction also needs phi(q).phi(k) on every support pair (causal: times a key weight, an exp and a product).
    extra_flops = sparse.memory * (2 * params["features"] + (2 if params.get("causal") else 0))
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
        half_native=True,
        causal_form=True,
    )
)
