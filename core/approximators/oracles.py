"""Oracles: the best sparse, low-rank and sparse + low-rank approximations of the attention matrix itself.

They see the exact n x n matrix, so they are slow and cap n; they show what a budget could buy at best.
topk keeps the k largest logits of each row and renormalises. svd is the best rank-r approximation
(Eckart-Young). rpca is robust PCA by inexact ALM (Lin, Chen & Ma), optionally projected onto a budget of
k entries per row plus rank r by alternating projections.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from core.approximation import Approximation, AttentionInputs, Cost, make_result
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
    values, index = logits.topk(k, dim=-1)
    probs = torch.softmax(values, dim=-1)
    return torch.zeros_like(logits).scatter_(-1, index, probs)


def _run_topk(inputs: AttentionInputs, params: dict[str, Any]) -> Approximation:
    attention = top_k_attention(inputs.logits(), min(params["top_k"], inputs.n))
    return make_result(
        inputs, "topk", attention @ inputs.v, dense=lambda: attention, parts={"support": lambda: attention > 0}
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


register(
    MethodSpec(
        name="topk",
        title="Top-k (sparse oracle)",
        family="oracle",
        description="Keeps each row's k largest scores of the exact matrix and renormalises: the ideal sparse "
        "approximation.",
        params=(
            ParamSpec(
                "top_k",
                "int",
                32,
                "Entries kept per row (k).",
                low=1,
                high=lambda n, d: float(n),
                log=True,
                budgeted=True,
            ),
        ),
        fn=_run_topk,
        budget=lambda n, d, f: {"top_k": max(1, round(f * n))},
        cost=lambda inputs, p: _dense_cost(inputs, inputs.n * inputs.n * 2, min(p["top_k"], inputs.n)),
        max_n=ORACLE_MAX_N,
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
    )
)
