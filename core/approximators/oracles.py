"""Oracles: the best sparse, low-rank and sparse + low-rank approximations of the attention matrix itself.

They see the exact n x n matrix, so they are slow and cap n; they show what a budget could buy at best.
topk is the best k-sparse approximation of A = softmax(beta QK^T) per row (Frobenius): A's k largest entries,
NOT renormalised, as in the Scatterbrain paper. ``topk_renormalized`` (a method, not an oracle) renormalises
those k entries to sum to 1, i.e. softmax over the k largest logits. svd is the best rank-r approximation
(Eckart-Young). rpca is robust PCA by inexact ALM (Lin, Chen & Ma), optionally projected onto a budget of
k entries per row plus rank r by alternating projections.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from core.approximation import Approximation, AttentionInputs, Cost, make_result
from core.approximators.common import masked_softmax
from core.approximators.exact import causal_mask
from core.cancel import check
from core.registry import MethodSpec, ParamSpec, register

ORACLE_MAX_N = 2048
RPCA_MAX_N = 1024
RPCA_TOLERANCE = 1e-7
BUDGET_REFINE_STEPS = 10


def _dense_cost(inputs: AttentionInputs, extra_flops: int, memory_per_row: int) -> Cost:
    n, d, dv, b = inputs.n, inputs.d, inputs.dv, inputs.batch
    return Cost(memory=b * n * memory_per_row, flops=b * (2 * n * n * d + 2 * n * n * dv + extra_flops))


# ---------------------------------------------------------------- top-k


def top_k_attention(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Softmax over each row's k largest logits (rows sum to 1): the renormalised variant."""
    values, index = logits.topk(k, dim=-1)
    probs = torch.softmax(values, dim=-1)
    return torch.zeros_like(logits).scatter_(-1, index, probs)


def best_k_sparse(attention: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's k largest entries of ``attention``, unchanged (the best k-sparse approximation per row),
    and the boolean support they occupy (an entry can underflow to 0 and still be kept)."""
    values, index = attention.topk(k, dim=-1)
    sparse = torch.zeros_like(attention).scatter_(-1, index, values)
    support = torch.zeros_like(attention, dtype=torch.bool).scatter_(-1, index, True)
    return sparse, support


def _run_topk(inputs: AttentionInputs, params: dict[str, Any]) -> Approximation:
    if params.get("causal"):  # the best k-sparse approximation of the causal matrix, on its support
        lower = causal_mask(inputs.n, inputs.device)
        attention, support = best_k_sparse(masked_softmax(inputs.logits(), lower), min(params["top_k"], inputs.n))
        support.logical_and_(lower)  # rows i < k - 1 have fewer than k keys: the zeros picked above are not kept
    else:
        attention, support = best_k_sparse(inputs.exact_attention(), min(params["top_k"], inputs.n))
    return make_result(
        inputs, "topk", attention @ inputs.v, dense=lambda: attention, parts={"support": lambda: support}
    )


def _run_topk_renormalized(inputs: AttentionInputs, params: dict[str, Any]) -> Approximation:
    logits = inputs.logits()
    if params.get("causal"):  # later keys score -inf: a row with fewer than k keys keeps all of them
        logits = logits.masked_fill_(~causal_mask(inputs.n, inputs.device), float("-inf"))
    attention = top_k_attention(logits, min(params["top_k"], inputs.n))
    return make_result(
        inputs,
        "topk_renormalized",
        attention @ inputs.v,
        dense=lambda: attention,
        parts={"support": lambda: attention > 0},
    )


# ---------------------------------------------------------------- truncated SVD


def truncated_svd(matrix: torch.Tensor, rank: int) -> torch.Tensor:
    u, s, vh = torch.linalg.svd(matrix, full_matrices=False)
    return (u[..., :rank] * s[..., None, :rank]) @ vh[..., :rank, :]


def _run_svd(inputs: AttentionInputs, params: dict[str, Any]) -> Approximation:
    exact = inputs.exact_attention()
    u, s, vh = torch.linalg.svd(exact, full_matrices=False)
    r = min(params["rank"], inputs.n)
    approx = (u[..., :r] * s[..., None, :r]) @ vh[..., :r, :]
    return make_result(inputs, "svd", approx @ inputs.v, dense=lambda: approx, parts={"singular_values": lambda: s})


# ---------------------------------------------------------------- robust PCA


def _shrink(x: torch.Tensor, tau: float | torch.Tensor) -> torch.Tensor:
    return torch.sign(x) * (x.abs() - tau).clamp_min(0)


def _singular_value_threshold(x: torch.Tensor, tau: float) -> torch.Tensor:
    u, s, vh = torch.linalg.svd(x, full_matrices=False)
    return (u * _shrink(s, tau)[..., None, :]) @ vh


def robust_pca(
    matrix: torch.Tensor, lam: float, iterations: int, tol: float = RPCA_TOLERANCE
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Inexact ALM for min |L|_* + lam |S|_1 s.t. L + S = M, on one (n, n) matrix. Returns S, L, iterations."""
    norm_two = torch.linalg.matrix_norm(matrix, ord=2)
    norm_fro = torch.linalg.matrix_norm(matrix).clamp_min(1e-30)
    dual = matrix / torch.maximum(norm_two, matrix.abs().max() / lam)
    mu = 1.25 / float(norm_two)
    mu_max, rho = mu * 1e7, 1.5
    sparse = torch.zeros_like(matrix)
    low_rank = torch.zeros_like(matrix)
    done = 0
    for step in range(iterations):
        check()  # the job's ambient token: one iteration is an n x n SVD
        low_rank = _singular_value_threshold(matrix - sparse + dual / mu, 1.0 / mu)
        sparse = _shrink(matrix - low_rank + dual / mu, lam / mu)
        residual = matrix - low_rank - sparse
        dual = dual + mu * residual
        mu = min(mu * rho, mu_max)
        done = step + 1
        if float(torch.linalg.matrix_norm(residual) / norm_fro) < tol:
            break
    return sparse, low_rank, done


def _keep_top_per_row(x: torch.Tensor, k: int) -> torch.Tensor:
    index = x.abs().topk(k, dim=-1).indices
    return torch.zeros_like(x).scatter_(-1, index, x.gather(-1, index))


def project_to_budget(
    matrix: torch.Tensor, sparse: torch.Tensor, low_rank: torch.Tensor, k: int, rank: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Alternating projections onto k entries per row and rank r; each step cannot increase the error."""
    for _ in range(BUDGET_REFINE_STEPS):
        check()
        if k > 0:
            sparse = _keep_top_per_row(matrix - low_rank, k)
        if rank > 0:
            low_rank = truncated_svd(matrix - sparse, rank)
    return sparse, low_rank


def _run_rpca(inputs: AttentionInputs, params: dict[str, Any]) -> Approximation:
    exact = inputs.exact_attention()
    n = inputs.n
    lam = params["lam"] / math.sqrt(n)
    k, rank = min(params["top_k"], n), min(params["rank"], n)
    sparse_parts, low_rank_parts, steps = [], [], []
    for matrix in exact:
        sparse, low_rank, done = robust_pca(matrix, lam, params["iterations"])
        if k > 0 or rank > 0:
            sparse, low_rank = project_to_budget(matrix, sparse, low_rank, k, rank)
        sparse_parts.append(sparse)
        low_rank_parts.append(low_rank)
        steps.append(done)
    sparse_all, low_rank_all = torch.stack(sparse_parts), torch.stack(low_rank_parts)
    approx = sparse_all + low_rank_all
    return make_result(
        inputs,
        "rpca",
        approx @ inputs.v,
        dense=lambda: approx,
        parts={"sparse": lambda: sparse_all, "low_rank": lambda: low_rank_all},
        info={"alm_iterations": steps},
    )


def _rpca_cost(inputs: AttentionInputs, params: dict[str, Any]) -> Cost:
    n = inputs.n
    k = params["top_k"] or n
    rank = params["rank"] or n
    svd_flops = params["iterations"] * 10 * n**3
    return _dense_cost(inputs, svd_flops, min(n, k + 2 * rank))


def _top_k_param() -> ParamSpec:
    return ParamSpec(
        "top_k",
        "int",
        32,
        "Entries kept per row (k).",
        low=1,
        high=lambda n, d: float(n),
        log=True,
        budgeted=True,
    )


def _topk_cost(inputs: AttentionInputs, p: dict[str, Any]) -> Cost:
    return _dense_cost(inputs, inputs.n * inputs.n * 2, min(p["top_k"], inputs.n))


register(
    MethodSpec(
        name="topk",
        title="Top-k (sparse oracle)",
        family="oracle",
        description="The best k-sparse approximation of the exact attention matrix: each row's k largest "
        "probabilities, kept as they are (NOT renormalised), as the Scatterbrain paper defines its sparse oracle.",
        params=(_top_k_param(),),
        fn=_run_topk,
        budget=lambda n, d, f: {"top_k": max(1, round(f * n))},
        cost=_topk_cost,
        max_n=ORACLE_MAX_N,
        causal_form=True,
    )
)

register(
    MethodSpec(
        name="topk_renormalized",
        title="Top-k renormalised",
        family="sparse",
        description="Softmax over each row's k largest scores (the top-k entries renormalised to sum to 1). A "
        "sparse method that needs the exact scores to pick its support; not the paper's sparse oracle.",
        params=(_top_k_param(),),
        fn=_run_topk_renormalized,
        budget=lambda n, d, f: {"top_k": max(1, round(f * n))},
        cost=_topk_cost,
        max_n=ORACLE_MAX_N,
        causal_form=True,
    )
)

register(
    MethodSpec(
        name="svd",
        title="Truncated SVD (low-rank oracle)",
        family="oracle",
        description="The best rank-r approximation of the exact attention matrix (Eckart-Young).",
        params=(
            ParamSpec("rank", "int", 16, "Rank r kept.", low=1, high=lambda n, d: float(n), log=True, budgeted=True),
        ),
        fn=_run_svd,
        budget=lambda n, d, f: {"rank": max(1, round(f * n / 2))},
        cost=lambda inputs, p: _dense_cost(inputs, 10 * inputs.n**3, 2 * min(p["rank"], inputs.n)),
        max_n=ORACLE_MAX_N,
        no_causal_reason="the best rank-r approximation of a lower-triangular matrix is not lower-triangular, so "
        "row i would read later values; masking it afterwards is no longer the best rank-r approximation",
    )
)

register(
    MethodSpec(
        name="rpca",
        title="Robust PCA (sparse + low-rank oracle)",
        family="oracle",
        description="Splits the exact matrix into sparse S + low-rank L by inexact ALM; with top_k and rank set, "
        "projects the split onto that budget.",
        params=(
            ParamSpec(
                "lam",
                "float",
                1.0,
                "The sparsity weight lambda, in units of the standard 1/sqrt(n).",
                low=0.01,
                high=100.0,
                log=True,
            ),
            ParamSpec("iterations", "int", 60, "Maximum ALM iterations (each one is an SVD).", low=1, high=500),
            ParamSpec(
                "top_k",
                "int",
                0,
                "Entries per row kept in S after the split (0 = no truncation).",
                low=0,
                high=lambda n, d: float(n),
                budgeted=True,
            ),
            ParamSpec(
                "rank",
                "int",
                0,
                "Rank kept in L after the split (0 = no truncation).",
                low=0,
                high=lambda n, d: float(n),
                budgeted=True,
            ),
        ),
        fn=_run_rpca,
        budget=lambda n, d, f: {"top_k": max(1, round(f * n / 2)), "rank": max(1, round(f * n / 4))},
        cost=_rpca_cost,
        max_n=RPCA_MAX_N,
        no_causal_reason="its low-rank part of a lower-triangular matrix spreads above the diagonal, so row i would "
        "read later values; a masked split is no longer the robust-PCA optimum",
    )
)
