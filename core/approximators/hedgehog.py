"""Hedgehog (Zhang et al. 2024, arXiv 2402.04347): linear attention with a learned feature map that mimics softmax.

phi(x) = [exp(x W + b), exp(-x W - b)] in R^{2 d'}, one map for queries and one for keys (x = sqrt(beta) q or
sqrt(beta) k), and o_i = phi_q(q_i)^T sum_j phi_k(k_j) v_j^T / phi_q(q_i)^T sum_j phi_k(k_j) over j in V(i):
all keys, or j <= i by prefix sums when causal (the paper's GPT form). W starts as the identity (extra columns when
d' > d: seeded Gaussian), b at 0, as fla's ``HedgehogFeatureMap``; then Adam minimises the paper's distillation loss
-mean_i sum_j a_ij log a^_ij (= KL(a || a^) + H(a)) against this input's softmax (masked when causal), on a seeded
subsample of query rows, per head on its own, as ``learned_kernel`` fits its map (batch independent).

Reference: fla ``fla/modules/feature_map.py`` (HedgehogFeatureMap), lolcats ``src/model/feature_map.py``.
What it is not: the paper trains phi on a dataset, once, and then keeps it; here phi is FITTED to the one input it
then approximates, which flatters it. Causal: the attention given phi is causal (prefix sums with per-key shifts),
but the fit reads the whole input, so with steps > 0 an earlier row's phi has seen later tokens, as a trained
model's phi has seen its training data; steps = 0 (the identity map) is strictly causal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from core.approximation import Approximation, AttentionInputs, Cost, make_result
from core.approximators.learned_kernel import linear_attend, linear_weights
from core.approximators.performer import (
    LogFeatures,
    causal_estimate,
    causal_linear_attention,
    causal_performer_cost,
    safe_denominator,
)
from core.cancel import check
from core.device import cpu_threads
from core.errors import ParameterError
from core.registry import MethodSpec, ParamSpec, register

MAX_FEATURES = 1024
MAX_STEPS = 2000
# Query rows per training step (each needs its exact attention against all keys).
TRAIN_ROWS = 128
# Training works on at most this many scalars per step (batch x rows x n x max(2 d', d)); larger inputs are refused.
MAX_TRAIN_WORK = 2**27
INIT_STREAM = 21
ROW_STREAM = 22


@dataclass
class HedgehogMap:
    """W (B, d, d') and b (B, 1, d') of the query map and of the key map."""

    w_q: torch.Tensor
    b_q: torch.Tensor
    w_k: torch.Tensor
    b_k: torch.Tensor

    def parameters(self) -> list[torch.Tensor]:
        return [self.w_q, self.b_q, self.w_k, self.b_k]

    def to(self, device: torch.device, dtype: torch.dtype) -> HedgehogMap:
        return HedgehogMap(*(t.detach().to(device=device, dtype=dtype) for t in self.parameters()))


def init_map(batch: int, d: int, features: int, generator: torch.Generator) -> HedgehogMap:
    """W = identity in its first min(d, d') columns (fla's init), seeded N(0, 1/d) beyond; b = 0. float64, CPU."""

    def one() -> torch.Tensor:
        w = torch.randn(batch, d, features, generator=generator, dtype=torch.float64) / math.sqrt(d)
        eye = torch.eye(d, features, dtype=torch.float64)
        width = min(d, features)
        w[:, :, :width] = eye[:, :width]
        return w

    zeros = torch.zeros(batch, 1, features, dtype=torch.float64)
    return HedgehogMap(one(), zeros.clone(), one(), zeros.clone())


def log_features(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, *, shift: str) -> LogFeatures:
    """phi(x) = exp(shift) * psi with psi = [exp(u - shift), exp(-u - shift)], u = x W + b.

    shift "row": each row's max |u| (queries, and keys of the causal prefix sums); "global": one max over all rows
    (keys of the non-causal sums: a shared constant cancels in the normalisation, a per-key one would not)."""
    u = x @ w + b
    row = u.abs().amax(-1, keepdim=True)
    log_shift = row if shift == "row" else row.amax(-2, keepdim=True)
    psi = torch.cat([torch.exp(u - log_shift), torch.exp(-u - log_shift)], dim=-1)
    return LogFeatures(psi, log_shift)


def _row_loss(
    psi_rows: torch.Tensor, psi_k: torch.Tensor, log_exact: torch.Tensor, mask: torch.Tensor | None
) -> torch.Tensor:
    """Mean over rows of KL(a || a^) (the paper's cross-entropy less the constant H(a))."""
    scores = psi_rows @ psi_k.transpose(-1, -2)
    if mask is not None:
        scores = scores * mask
    scores = scores.clamp_min(torch.finfo(scores.dtype).tiny)
    log_approx = torch.log(scores) - torch.log(scores.sum(-1, keepdim=True))
    exact = log_exact.exp()
    return (exact * (log_exact - log_approx)).nan_to_num(0.0).sum(-1).mean()


def fit_map(inputs: AttentionInputs, features: int, steps: int, lr: float, causal: bool) -> tuple[HedgehogMap, list]:
    """Fit each head's maps on its own (same seeded draws alone or in a batch): (maps, mean loss per step)."""
    dtype = torch.float64 if inputs.dtype == torch.float64 else torch.float32
    n, rows = inputs.n, min(inputs.n, TRAIN_ROWS)
    fitted, curves = [], []
    with torch.inference_mode(False), torch.enable_grad(), cpu_threads(1, inputs.device):
        for head in range(inputs.batch):
            sqrt_scale = inputs.scale[head : head + 1].detach().to(dtype).sqrt()
            x_q = inputs.q[head : head + 1].detach().to(dtype) * sqrt_scale
            x_k = inputs.k[head : head + 1].detach().to(dtype) * sqrt_scale
            init = init_map(1, inputs.d, features, inputs.generator(INIT_STREAM))
            params = [t.to(device=inputs.device, dtype=dtype).requires_grad_(True) for t in init.parameters()]
            optimiser = torch.optim.Adam(params, lr=lr)
            row_gen = inputs.generator(ROW_STREAM)
            curve = []
            for _ in range(steps):
                check(None)
                index = torch.randperm(n, generator=row_gen)[:rows].sort().values.to(inputs.device)
                logits = x_q[:, index] @ x_k.transpose(-1, -2)
                mask = None
                if causal:
                    mask = index[:, None] >= torch.arange(n, device=inputs.device)[None, :]
                    logits = logits.masked_fill(~mask, float("-inf"))
                log_exact = torch.log_softmax(logits, dim=-1)
                psi_q = log_features(x_q[:, index], params[0], params[1], shift="row").psi
                psi_k = log_features(x_k, params[2], params[3], shift="global").psi
                loss = _row_loss(psi_q, psi_k, log_exact, mask)
                optimiser.zero_grad(set_to_none=True)
                loss.backward()
                optimiser.step()
                curve.append(float(loss.detach()))
            fitted.append(HedgehogMap(*(p.detach() for p in params)))
            curves.append(curve)
    stacked = HedgehogMap(*(torch.cat([getattr(f, name) for f in fitted]) for name in ("w_q", "b_q", "w_k", "b_k")))
    mean_curve = [sum(c[i] for c in curves) / len(curves) for i in range(steps)]
    return stacked, mean_curve


def check_train_size(inputs: AttentionInputs, features: int, steps: int) -> None:
    rows = min(inputs.n, TRAIN_ROWS)
    work = inputs.batch * rows * inputs.n * max(2 * features, inputs.d)
    if steps > 0 and work > MAX_TRAIN_WORK:
        raise ParameterError(
            "n",
            f"hedgehog fits on {rows} query rows against all n keys per head: batch x rows x n x 2 features = "
            f"{work} exceeds {MAX_TRAIN_WORK}; use a smaller n, fewer heads or fewer features (or steps = 0)",
        )


def _run(inputs: AttentionInputs, params: dict[str, Any]) -> Approximation:
    features, steps, causal = params["features"], params["steps"], bool(params.get("causal"))
    check_train_size(inputs, features, steps)
    if steps > 0:
        maps, curve = fit_map(inputs, features, steps, params["lr"], causal)
    else:
        maps, curve = init_map(inputs.batch, inputs.d, features, inputs.generator(INIT_STREAM)), []
    stats = inputs.statistics_dtype
    maps = maps.to(inputs.device, stats)
    sqrt_scale = inputs.scale.to(stats).sqrt()
    x_q, x_k = inputs.q.to(stats) * sqrt_scale, inputs.k.to(stats) * sqrt_scale
    with torch.no_grad():
        phi_q = log_features(x_q, maps.w_q, maps.b_q, shift="row")
        phi_k = log_features(x_k, maps.w_k, maps.b_k, shift="row" if causal else "global")
        if causal:
            numerator, denominator, _ = causal_linear_attention(phi_q, phi_k, inputs.v.to(stats))
            output = numerator.div_(safe_denominator(denominator).unsqueeze(-1))
        else:
            output = linear_attend(phi_q.psi, phi_k.psi, inputs.v.to(stats))

    def dense() -> torch.Tensor:
        if causal:
            scores, _ = causal_estimate(phi_q, phi_k)
            return scores / safe_denominator(scores.sum(-1, keepdim=True))
        return linear_weights(phi_q.psi, phi_k.psi)

    return make_result(
        inputs,
        "hedgehog",
        output.to(inputs.dtype),
        dense=dense,
        parts={"training_curve": lambda: list(curve), "features_q": lambda: phi_q.psi, "features_k": lambda: phi_k.psi},
        info={
            "features": 2 * features,
            "initial_loss": curve[0] if curve else float("nan"),
            "final_loss": curve[-1] if curve else float("nan"),
        },
    )


def hedgehog_cost(inputs: AttentionInputs, params: dict[str, Any]) -> Cost:
    n, d, dv, b = inputs.n, inputs.d, inputs.dv, inputs.batch
    half, m = params["features"], 2 * params["features"]
    map_flops = 2 * n * (2 * d * half + 2 * m)  # x W + b and the exponentials, queries and keys
    if params.get("causal"):
        return (causal_performer_cost(n, d, dv, m) + Cost(0, map_flops)).scaled(b)
    memory = 2 * n * m + m * dv + m  # query and key features, the state sum_j phi(k_j) v_j^T and its normaliser
    flops = map_flops + 2 * n * m * dv * 2 + 2 * n * m
    return Cost(memory=b * memory, flops=b * flops)


def hedgehog_budget(n: int, d: int, fraction: float) -> dict[str, Any]:
    # memory ~ 2 n m with m = 2 d' features (queries and keys)
    return {"features": max(1, min(MAX_FEATURES, round(fraction * n / 4)))}


register(
    MethodSpec(
        name="hedgehog",
        title="Hedgehog (learned map, fitted)",
        family="low-rank",
        description="Linear attention with Hedgehog's map phi(x) = [exp(xW + b), exp(-xW - b)], FITTED here to this "
        "input's softmax attention (the paper trains it once on data).",
        params=(
            ParamSpec(
                "features",
                "int",
                32,
                "Width d' of x W (phi has 2 d' features; the paper uses d' = head dimension d).",
                low=1,
                high=MAX_FEATURES,
                log=True,
                budgeted=True,
            ),
            ParamSpec(
                "steps",
                "int",
                100,
                "Adam steps fitting the maps to the exact attention (0: the identity map, unfitted).",
                low=0,
                high=MAX_STEPS,
            ),
            ParamSpec("lr", "float", 0.01, "Adam learning rate.", low=1e-4, high=1.0, log=True),
        ),
        fn=_run,
        budget=hedgehog_budget,
        cost=hedgehog_cost,
        randomized=True,
        causal_form=True,
    )
)
