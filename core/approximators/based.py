"""Based (Arora et al. 2024, arXiv 2402.18668): a second-order Taylor feature map plus a small exact window.

The Taylor map phi(x) = [1, x, x (x) x / sqrt(2)] gives phi(q) . phi(k) = kappa = 1 + t + t^2 / 2 with t = q~ . k~,
the second-order expansion of exp(t); its triangular form has m = 1 + d' + d'(d' + 1) / 2 features (fla's
``TaylorFeatureMap``). q~ = sqrt(beta) q P and k~ = sqrt(beta) k P: with d' = d, P is the identity and t = beta q . k
exactly; with d' < d (the paper projects q and k to d' = 16), P is a seeded Gaussian d x d' with N(0, 1/d') entries,
so that t is beta q . k in expectation.

The paper stacks linear-attention layers and sliding-window layers; one call here has to combine them. This uses
one normaliser per row: exp(s_ij) inside the window (|i - j| <= w, causal: i - w <= j <= i), kappa_ij outside it,
both in units of exp(c_i) with c_i = max(0, the row's largest window score):

    o_i = [sum_W e^{s - c} v_j + e^{-c} sum_{V \\ W} kappa v_j] / [sum_W e^{s - c} + e^{-c} sum_{V \\ W} kappa]

The sums over V \\ W are the linear attention over V(i) (all keys, or prefix sums when causal) less the window's
kappa terms, so memory stays O(n m + n w). kappa = ((t + 1)^2 + 1) / 2 >= 1/2, so no epsilon is needed; but kappa
grows again for t < -1, where exp falls: Taylor tracks softmax only for bounded t.

Reference: fla ``fla/ops/based/naive.py`` (the quadratic and chunked forms), ``fla/layers/based.py``; HazyResearch
``based/models/mixers/linear_attention.py`` (TaylorExp). What it is not: trained Based layers (their q and k
projections are learned, and the window and linear parts are separate layers).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from core.approximation import Approximation, AttentionInputs, Cost, make_result
from core.approximators.common import flat_rows
from core.approximators.local import band_groups, band_mask, local_cost, window_param
from core.approximators.performer import LogFeatures, causal_linear_attention, causal_performer_cost
from core.registry import MethodSpec, ParamSpec, register

PROJECTION_STREAM = 31


def taylor_features(x: torch.Tensor) -> torch.Tensor:
    """[1, x, x_r^2 / sqrt(2), x_r x_s (r < s)]: phi(x) . phi(y) = 1 + x.y + (x.y)^2 / 2. (..., d) -> (..., m)."""
    rows, cols = torch.triu_indices(x.shape[-1], x.shape[-1], device=x.device)
    pairs = x[..., rows] * x[..., cols]
    pairs = torch.where(rows == cols, pairs / math.sqrt(2.0), pairs)
    return torch.cat([torch.ones_like(x[..., :1]), x, pairs], dim=-1)


def feature_count(width: int) -> int:
    return 1 + width + width * (width + 1) // 2


def projection_for(inputs: AttentionInputs, width: int) -> torch.Tensor:
    """P (d, d'): the identity at d' = d, else seeded N(0, 1/d')."""
    if width >= inputs.d:
        return torch.eye(inputs.d, dtype=inputs.statistics_dtype, device=inputs.device)
    return inputs.randn(inputs.d, width, stream=PROJECTION_STREAM) / math.sqrt(width)


def _run(inputs: AttentionInputs, params: dict[str, Any]) -> Approximation:
    width, window, causal = min(params["features"], inputs.d), params["window"], bool(params.get("causal"))
    stats = inputs.statistics_dtype
    p = projection_for(inputs, width)
    sqrt_scale = inputs.scale.to(stats).sqrt()
    x_q, x_k = (inputs.q.to(stats) * sqrt_scale) @ p, (inputs.k.to(stats) * sqrt_scale) @ p
    phi_q, phi_k = taylor_features(x_q), taylor_features(x_k)
    v = inputs.v.to(stats)
    # linear attention over V(i): numerator (B, n, dv) and denominator (B, n)
    if causal:
        zeros = torch.zeros(inputs.batch, inputs.n, 1, dtype=stats, device=inputs.device)
        lin_num, lin_den, _ = causal_linear_attention(LogFeatures(phi_q, zeros), LogFeatures(phi_k, zeros), v)
    else:
        lin_num = phi_q @ (phi_k.transpose(-1, -2) @ v)
        lin_den = (phi_q @ phi_k.sum(-2).unsqueeze(-1)).squeeze(-1)
    rows = inputs.batch * inputs.n
    win_num, kap_num = v.new_zeros(rows, inputs.dv), v.new_zeros(rows, inputs.dv)
    win_den, kap_den, shift = v.new_zeros(rows), v.new_zeros(rows), v.new_zeros(rows)
    table_q, table_k = flat_rows(x_q), flat_rows(x_k)
    for group in band_groups(inputs, window, 24, causal=causal):
        s = group.scores(stats)  # (G, cq, ck)
        t = torch.bmm(table_q.index_select(0, group.q_index.reshape(-1)).view(*group.q_index.shape, width),
                      table_k.index_select(0, group.k_index.reshape(-1)).view(*group.k_index.shape, width)
                      .transpose(1, 2))  # fmt: skip
        valid = group.valid_mask().expand_as(s)
        c = s.masked_fill(~valid, float("-inf")).amax(-1).clamp_min(0.0)  # (G, cq)
        weights = torch.exp(s - c[..., None]).mul_(valid)
        kappa = (1.0 + t + 0.5 * t * t).mul_(valid)
        values = group.v.to(stats)
        real = group.q_pos < inputs.n
        index = group.q_index[real]
        win_num[index], win_den[index] = torch.bmm(weights, values)[real], weights.sum(-1)[real]
        kap_num[index], kap_den[index] = torch.bmm(kappa, values)[real], kappa.sum(-1)[real]
        shift[index] = c[real]
    outside = torch.exp(-shift)
    numerator = win_num + outside[:, None] * (flat_rows(lin_num) - kap_num)
    denominator = win_den + outside * (lin_den.reshape(-1) - kap_den)
    output = (numerator / denominator[:, None]).view(inputs.batch, inputs.n, inputs.dv).to(inputs.dtype)

    def window_support() -> torch.Tensor:
        return band_mask(inputs.n, window, inputs.device, causal)

    def kappa_matrix() -> torch.Tensor:
        t = x_q @ x_k.transpose(-1, -2)
        return 1.0 + t + 0.5 * t * t

    def dense() -> torch.Tensor:
        logits = inputs.scale.to(stats) * (inputs.q.to(stats) @ inputs.k.to(stats).transpose(-1, -2))
        inside = window_support()
        c = logits.masked_fill(~inside, float("-inf")).amax(-1, keepdim=True).clamp_min(0.0)
        matrix = torch.where(inside, torch.exp(logits - c), torch.exp(-c) * kappa_matrix())
        if causal:
            matrix = matrix.tril()
        return matrix / matrix.sum(-1, keepdim=True)

    return make_result(
        inputs,
        "based",
        output,
        dense=dense,
        parts={"support": window_support, "taylor_kernel": kappa_matrix, "projection": lambda: p},
        info={"features": feature_count(width), "projected_width": width},
    )


def based_memory(n: int, d: int, dv: int, width: int) -> int:
    m = feature_count(min(width, d))
    return 2 * n * m + m * dv + m  # query and key features, the state sum_j phi(k_j) v_j^T and its normaliser


def based_cost(inputs: AttentionInputs, params: dict[str, Any]) -> Cost:
    n, d, dv, b = inputs.n, inputs.d, inputs.dv, inputs.batch
    width = min(params["features"], d)
    m = feature_count(width)
    window = local_cost(inputs, {"window": params["window"], "causal": params.get("causal")})
    project = 4 * n * d * width + 2 * n * m  # q P, k P and the products of the map
    band = 2 * (window.memory // b) * width  # the window's kappa terms
    if params.get("causal"):
        linear = causal_performer_cost(n, d, dv, m)
    else:
        linear = Cost(based_memory(n, d, dv, width), 4 * n * m * dv + 2 * n * m)
    return linear.scaled(b) + window + Cost(0, b * (project + band))


def based_budget(n: int, d: int, fraction: float) -> dict[str, Any]:
    # Half the budget to the features (2 m per query: the largest d' that fits), the rest to the window (3 w).
    per_query = fraction * n
    width = 1
    while width < d and based_memory(n, d, d, width + 1) / n <= per_query / 2:
        width += 1
    rest = max(0.0, per_query - based_memory(n, d, d, width) / n)
    return {"features": width, "window": max(0, round(rest / 3))}


register(
    MethodSpec(
        name="based",
        title="Based (Taylor + window)",
        family="sparse+low-rank",
        description="Based: exact softmax in a small window plus a second-order Taylor kernel 1 + t + t^2/2 "
        "outside it, under one normaliser; q and k projected to d' by a seeded Gaussian when d' < d.",
        params=(
            ParamSpec(
                "features",
                "int",
                16,
                "Width d' of the projected q and k (the paper: 16); the map has 1 + d' + d'(d'+1)/2 features. "
                "d' = d uses no projection.",
                low=1,
                high=lambda n, d: float(max(d, 1)),
                budgeted=True,
            ),
            window_param(64),
        ),
        fn=_run,
        budget=based_budget,
        cost=based_cost,
        randomized=True,
        causal_form=True,
    )
)
