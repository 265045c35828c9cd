"""Performer FAVOR+: random features whose inner products estimate exp(beta q.k) without bias.

positive:    phi(x) = exp(W x - |x|^2 / 2) / sqrt(m)                   (Choromanski et al., "SM+")
trig:        phi(x) = exp(|x|^2 / 2) [sin(W x), cos(W x)] / sqrt(m)    ("SM trig", m/2 rows; can go negative)
hyperbolic:  phi(x) = exp(-|x|^2 / 2) [exp(W x), exp(-W x)] / sqrt(m)  ("SM hyp+", m/2 rows; the released
             Scatterbrain's "cosh" features)
with x = sqrt(beta) q (or k). Rows of W are iid N(0, I) or block-orthogonal with chi-distributed norms.

The efficient path works with max-shifted features (a per-row shift for queries and one global shift
per batch element for keys); both shifts cancel in the row normalisation, so nothing overflows at low
temperature. Q~ (K~^T V) is never an n x n matrix.

eps > 0 is the reference codes' stabiliser (performer-pytorch's softmax_kernel): each positive/hyperbolic
feature becomes ratio * (exp(Wx - |x|^2/2 - M) + eps) with M the max of Wx (per row for queries, over all
keys and rows for keys), so eps is relative to the largest feature of that row / of all keys. Default 0.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import torch

from core.approximation import Approximation, AttentionInputs, Cost, make_result
from core.approximators.common import FEATURE_STREAM
from core.errors import ParameterError
from core.registry import MethodSpec, ParamSpec, register

MAX_FEATURES = 8192
KERNELS = ("positive", "trig", "hyperbolic")
MAX_EPS = 0.01  # the UI slider then steps by 1e-4, performer-pytorch's default


def draw_projection(m: int, d: int, orthogonal: bool, generator: torch.Generator) -> torch.Tensor:
    """Random projection W (m, d) in float64 on the CPU.

    Orthogonal: stacked d x d blocks with orthonormal rows (QR of a Gaussian block, sign-fixed so the
    distribution is Haar), each row rescaled by an independent chi(d) norm, so every row is marginally
    N(0, I) but rows within a block are exactly orthogonal.
    """
    if not orthogonal:
        return torch.randn(m, d, generator=generator, dtype=torch.float64)
    blocks = []
    for _ in range(math.ceil(m / d)):
        gaussian = torch.randn(d, d, generator=generator, dtype=torch.float64)
        q, r = torch.linalg.qr(gaussian)
        q = q * torch.sign(torch.diagonal(r)).where(torch.diagonal(r) != 0, torch.ones(d, dtype=torch.float64))
        blocks.append(q.T)
    rows = torch.cat(blocks, dim=0)[:m]
    norms = torch.randn(m, d, generator=generator, dtype=torch.float64).norm(dim=1, keepdim=True)
    return rows * norms


@functools.lru_cache(maxsize=64)
def _cached_projection(m: int, d: int, orthogonal: bool, seed_key: int) -> torch.Tensor:
    return draw_projection(m, d, orthogonal, torch.Generator().manual_seed(seed_key))


def projection_for(inputs: AttentionInputs, m: int, orthogonal: bool) -> torch.Tensor:
    """The call's projection (m, d), cached on (m, d, kind, seed) and moved to the input's device/dtype."""
    seed_key = int(inputs.generator(FEATURE_STREAM).initial_seed())
    w = _cached_projection(m, inputs.d, orthogonal, seed_key)
    return _to_device(w, inputs.device, inputs.dtype)


@functools.lru_cache(maxsize=64)
def _device_copy(w: torch.Tensor, device: str, dtype: torch.dtype) -> torch.Tensor:
    return w.to(device=device, dtype=dtype)


def _to_device(w: torch.Tensor, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    return _device_copy(w, str(device), dtype)


def frequencies(m: int, kernel: str) -> int:
    """Rows of W: m for positive features, m // 2 sin/cos (trig) or exp(+-Wx) (hyperbolic) pairs otherwise."""
    return m if kernel == "positive" else max(m // 2, 1)


@dataclass
class LogFeatures:
    """Features in log/shifted form: phi = exp(shift) * psi, with psi <= 1 (positive kernel)."""

    psi: torch.Tensor  # (B, n, m) shifted features
    log_shift: torch.Tensor  # (B, n, 1) for queries (per row) or (B, 1, 1) for keys (global)


def performer_features(
    x: torch.Tensor,
    projection: torch.Tensor,
    kernel: str,
    scale: torch.Tensor,
    *,
    per_row_shift: bool,
    eps: float = 0.0,
) -> LogFeatures:
    """FAVOR+ features of x (B, n, d) at inverse temperature scale (B, 1, 1), max-shifted.

    per_row_shift=True (queries) subtracts each row's max; False (keys) one max per batch element.
    phi(x) = exp(log_shift) * psi exactly.
    """
    xs = x * scale.sqrt()
    proj = xs @ projection.T  # (B, n, rows)
    half_sq_norm = 0.5 * (xs * xs).sum(-1, keepdim=True)

    def reduce_max(t: torch.Tensor) -> torch.Tensor:
        return t.amax(-1, keepdim=True) if per_row_shift else t.amax(dim=(-2, -1), keepdim=True)

    if kernel in ("positive", "hyperbolic"):
        if kernel == "hyperbolic":
            proj = torch.cat([proj, -proj], dim=-1)
        logits = proj - half_sq_norm
        shift = reduce_max(logits)
        if eps > 0:
            # eps * exp(max Wx) in absolute units, as in the reference; the shift keeps both terms <= 1.
            eps_log = math.log(eps) + reduce_max(proj)
            shift = torch.maximum(shift, eps_log)
            psi = torch.exp(logits - shift) + torch.exp(eps_log - shift)
        else:
            psi = torch.exp(logits - shift)
        log_shift = shift - 0.5 * math.log(proj.shape[-1])
        return LogFeatures(psi, log_shift)
    # trig: the data-dependent factor exp(|x|^2/2) carries the scale.
    shift = half_sq_norm if per_row_shift else half_sq_norm.amax(dim=(-2, -1), keepdim=True)
    weight = torch.exp(half_sq_norm - shift)
    psi = torch.cat([torch.sin(proj), torch.cos(proj)], dim=-1) * weight
    log_shift = shift - 0.5 * math.log(projection.shape[0])
    return LogFeatures(psi, log_shift)


def feature_pair(
    inputs: AttentionInputs, m: int, kernel: str, orthogonal: bool, eps: float = 0.0
) -> tuple[LogFeatures, LogFeatures]:
    if eps > 0 and kernel == "trig":
        raise ParameterError("eps", "the stabiliser applies to the positive and hyperbolic kernels only; use eps = 0")
    w = projection_for(inputs, frequencies(m, kernel), orthogonal)
    phi_q = performer_features(inputs.q, w, kernel, inputs.scale, per_row_shift=True, eps=eps)
    phi_k = performer_features(inputs.k, w, kernel, inputs.scale, per_row_shift=False, eps=eps)
    return phi_q, phi_k


def unnormalized_estimate(phi_q: LogFeatures, phi_k: LogFeatures) -> torch.Tensor:
    """phi(Q) phi(K)^T, the raw estimate of exp(beta q.k): (B, n, n). May overflow at extreme beta."""
    return (phi_q.psi @ phi_k.psi.transpose(-1, -2)) * torch.exp(phi_q.log_shift + phi_k.log_shift)


def kernel_estimate(
    q: torch.Tensor,
    k: torch.Tensor,
    scale: float,
    features: int,
    kernel: str = "positive",
    orthogonal: bool = True,
    seed: int = 0,
) -> torch.Tensor:
    """The raw Performer estimate of exp(scale q.k) for q (..., n, d), k (..., n, d): (..., n, n).

    Uses the same projection as ``approximate("performer", ..., seed=seed)``.
    """
    from core.approximation import prepare_inputs

    inputs = prepare_inputs(q, k, k[..., :1], scale, seed)
    phi_q, phi_k = feature_pair(inputs, features, kernel, orthogonal)
    return unnormalized_estimate(phi_q, phi_k).reshape(*inputs.batch_shape, inputs.n, inputs.n)


def safe_denominator(den: torch.Tensor) -> torch.Tensor:
    """Keep |den| away from 0 with its sign (trig normalisers can be <= 0; positive ones underflow)."""
    tiny = torch.finfo(den.dtype).tiny
    return torch.where(den >= 0, den.clamp_min(tiny), den.clamp_max(-tiny))


def linear_attention(phi_q: LogFeatures, phi_k: LogFeatures, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Q~ (K~^T V) and Q~ (K~^T 1) in the query's shifted units: never an n x n tensor."""
    kv = phi_k.psi.transpose(-1, -2) @ v  # (B, m, dv)
    k_sum = phi_k.psi.sum(-2)  # (B, m)
    numerator = phi_q.psi @ kv
    denominator = (phi_q.psi @ k_sum.unsqueeze(-1)).squeeze(-1)
    return numerator, denominator


def performer_cost(inputs: AttentionInputs, params: dict[str, Any]) -> Cost:
    n, d, dv, b, m = inputs.n, inputs.d, inputs.dv, inputs.batch, params["features"]
    memory = 2 * n * m + m * dv + m
    flops = 2 * (2 * n * m * d) + 2 * n * m * dv * 2 + 2 * n * m + 6 * n * m
    return Cost(memory=b * memory, flops=b * flops)


def _run(inputs: AttentionInputs, params: dict[str, Any]) -> Approximation:
    m, kernel, orthogonal = params["features"], params["kernel"], params["orthogonal"]
    phi_q, phi_k = feature_pair(inputs, m, kernel, orthogonal, params["eps"])
    numerator, denominator = linear_attention(phi_q, phi_k, inputs.v)
    output = numerator / safe_denominator(denominator).unsqueeze(-1)

    def dense() -> torch.Tensor:
        scores = phi_q.psi @ phi_k.psi.transpose(-1, -2)
        return scores / safe_denominator(scores.sum(-1, keepdim=True))

    return make_result(
        inputs,
        "performer",
        output,
        dense=dense,
        parts={"unnormalized": lambda: unnormalized_estimate(phi_q, phi_k)},
        info={"features_used": phi_q.psi.shape[-1]},
    )


def performer_params(prefix_help: str = "") -> tuple[ParamSpec, ...]:
    return (
        ParamSpec(
            "features",
            "int",
            64,
            prefix_help + "Number of random features m. The kernel estimate's variance falls as 1/m.",
            low=1,
            high=MAX_FEATURES,
            log=True,
            budgeted=True,
        ),
        ParamSpec(
            "kernel",
            "choice",
            "positive",
            "positive: exp(Wx - |x|^2/2), always > 0 (FAVOR+). trig: sin/cos features, unbiased but can give "
            "negative normalisers at low temperature. hyperbolic: exp(-|x|^2/2) [exp(Wx), exp(-Wx)] (the released "
            "Scatterbrain's cosh features; m/2 rows of W).",
            choices=KERNELS,
        ),
        ParamSpec(
            "orthogonal",
            "bool",
            True,
            "Block-orthogonal projection rows (lower variance) instead of iid Gaussian rows.",
        ),
        ParamSpec(
            "eps",
            "float",
            0.0,
            "Stabiliser added inside positive/hyperbolic features, relative to the largest one (performer-pytorch "
            "uses 1e-4, Google's code 1e-6; 0 = none). Biases the estimate towards uniform attention.",
            low=0.0,
            high=MAX_EPS,
        ),
    )


def performer_budget(n: int, d: int, fraction: float) -> dict[str, Any]:
    # memory ~ 2 n m (query and key features)
    return {"features": max(1, round(fraction * n / 2))}


register(
    MethodSpec(
        name="performer",
        title="Performer (FAVOR+)",
        family="low-rank",
        description="Random-feature estimate of exp(beta q.k): Q~(K~^T V) in O(n m d) time, never an n x n matrix.",
        params=performer_params(),
        fn=_run,
        budget=performer_budget,
        cost=performer_cost,
        randomized=True,
    )
)
