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

Causal (FAVOR+ unidirectional): out_i = sum_{l <= i} phi(q_i).phi(k_l) v_l / sum_{l <= i} phi(q_i).phi(k_l), by
prefix sums of phi(k_l) v_l^T and phi(k_l) carried from block to block of CAUSAL_BLOCK positions (within a block, a
masked block x block product): O(n m dv) time and O(m dv + block^2) memory beyond the features. Keys are shifted per
row there (as queries are), and the running state is kept in units of the running maximum of those shifts, so no
key's features depend on a later key: not even eps, which is then relative to each key's own largest Wk (the
reference's causal mode keeps the global key maximum, so with eps > 0 its row i moves with later keys).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import torch

from core.approximation import Approximation, AttentionInputs, Cost, make_result
from core.approximators.common import FEATURE_STREAM, is_half
from core.device import row_blocks
from core.errors import ParameterError
from core.registry import MethodSpec, ParamSpec, register

MAX_FEATURES = 8192
KERNELS = ("positive", "trig", "hyperbolic")
MAX_EPS = 0.01  # the UI slider then steps by 1e-4, performer-pytorch's default
# Positions per block of the causal prefix sums: the masked in-block products cost n * block * (m + dv).
CAUSAL_BLOCK = 64


def draw_projection(m: int, d: int, orthogonal: bool, generator: torch.Generator) -> torch.Tensor:
    """Random projection W (m, d) in float64 on the CPU.

    Orthogonal: stacked d x d blocks with orthonormal rows (QR of a Gaussian block, sign-fixed so the
    distribution is Haar), each row rescaled by an independent chi(d) norm, so every row is marginally
    N(0, I) but rows within a block are exactly orthogonal.
    """
    if not orthogonal:
        return torch.randn(m, d, generator=generator, dtype=torch.float64, device="cpu")
    blocks = []
    for _ in range(math.ceil(m / d)):
        gaussian = torch.randn(d, d, generator=generator, dtype=torch.float64, device="cpu")
        q, r = torch.linalg.qr(gaussian)
        q = q * torch.sign(torch.diagonal(r)).where(
            torch.diagonal(r) != 0, torch.ones(d, dtype=torch.float64, device="cpu")
        )
        blocks.append(q.T)
    rows = torch.cat(blocks, dim=0)[:m]
    norms = torch.randn(m, d, generator=generator, dtype=torch.float64, device="cpu").norm(dim=1, keepdim=True)
    return rows * norms


@functools.lru_cache(maxsize=64)
def _cached_projection(m: int, d: int, orthogonal: bool, seed_key: int) -> torch.Tensor:
    return draw_projection(m, d, orthogonal, torch.Generator().manual_seed(seed_key))


def projection_for(inputs: AttentionInputs, m: int, orthogonal: bool) -> torch.Tensor:
    """The call's projection (m, d), cached on (m, d, kind, seed) and moved to the input's device/dtype."""
    seed_key = int(inputs.generator(FEATURE_STREAM).initial_seed())
    w = _cached_projection(m, inputs.d, orthogonal, seed_key)
    # Half-precision inputs get a float32 projection: the feature map (Wx, its shifts and exp) runs in float32.
    return _to_device(w, inputs.device, inputs.statistics_dtype)


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
    phi(x) = exp(log_shift) * psi exactly. Half-precision x (with a float32 projection and scale): the feature
    map runs in float32 and psi is stored in x's dtype (it lies in [0, 1]; trig's stays float32); log_shift is
    float32.
    """
    if kernel == "trig":
        # The data-dependent factor exp(|x|^2/2) carries the scale.
        xs = x * scale.sqrt()
        proj = xs @ projection.T  # (B, n, rows)
        half_sq_norm = 0.5 * (xs * xs).sum(-1, keepdim=True)
        shift = half_sq_norm if per_row_shift else half_sq_norm.amax(dim=(-2, -1), keepdim=True)
        weight = torch.exp(half_sq_norm - shift)
        half_width = proj.shape[-1]
        psi = proj.new_empty(*proj.shape[:-1], 2 * half_width)
        torch.sin(proj, out=psi[..., :half_width])
        torch.cos(proj, out=psi[..., half_width:])
        psi.mul_(weight)
        # Kept in float32 for half x: trig features change sign, and their normalisers cancel (24% off in bfloat16).
        return LogFeatures(psi, shift - 0.5 * math.log(projection.shape[0]))
    # Positive and hyperbolic features are built block by block of rows in one (B n, m) buffer, in place: every
    # pass over a block happens while it is in cache, and no other n x m or n x d temporary is allocated (each was
    # a fresh allocation, page faults, and another pass through memory, so the time grew faster than n).
    batch, n, d = x.shape
    frequencies_used = projection.shape[0]
    width = frequencies_used if kernel == "positive" else 2 * frequencies_used
    x_rows = x.reshape(batch * n, d)
    sqrt_scale = scale.sqrt().expand(batch, n, 1).reshape(batch * n, 1)
    w_t = projection.T
    psi = x.new_empty(batch * n, width)  # the logits Wx - |x|^2/2 first, then psi (in place)
    # Half precision: each block's logits live in a float32 block instead (recomputed for the keys' second pass).
    in_place = not is_half(x.dtype)
    row_max = scale.new_empty(batch * n, 1)
    proj_max = scale.new_empty(batch * n, 1) if eps > 0 else None
    blocks = row_blocks(batch * n, width, x.device)
    fused = per_row_shift and proj_max is None  # the shift is the row's own max: finish each block at once

    def logits(rows: slice) -> torch.Tensor:
        xs = x_rows[rows] * sqrt_scale[rows]  # float32 for half x (the scale is float32)
        block = psi[rows] if in_place else None
        if kernel == "positive":
            block = torch.matmul(xs, w_t, out=block)
        else:
            proj = xs @ w_t
            block = proj.new_empty(proj.shape[0], width) if block is None else block
            block[:, :frequencies_used] = proj
            torch.neg(proj, out=block[:, frequencies_used:])
        if proj_max is not None:
            torch.amax(block, -1, keepdim=True, out=proj_max[rows])
        return block.sub_(0.5 * (xs * xs).sum(-1, keepdim=True))

    for rows in blocks:
        block = logits(rows)
        torch.amax(block, -1, keepdim=True, out=row_max[rows])
        if fused:
            block.sub_(row_max[rows]).exp_()
            if not in_place:
                psi[rows] = block

    def reduce_max(t: torch.Tensor) -> torch.Tensor:
        t = t.view(batch, n, 1)
        return t if per_row_shift else t.amax(dim=(-2, -1), keepdim=True)

    shift = reduce_max(row_max)
    if not fused:
        eps_term = None
        if proj_max is not None:
            # eps * exp(max Wx) in absolute units, as in the reference; the shift keeps both terms <= 1.
            eps_log = math.log(eps) + reduce_max(proj_max)
            shift = torch.maximum(shift, eps_log)
            eps_term = torch.exp(eps_log - shift).expand(batch, n, 1).reshape(batch * n, 1)
        shift_rows = shift.expand(batch, n, 1).reshape(batch * n, 1)
        for rows in blocks:
            block = (psi[rows] if in_place else logits(rows)).sub_(shift_rows[rows]).exp_()
            if eps_term is not None:
                block.add_(eps_term[rows])
            if not in_place:
                psi[rows] = block
    return LogFeatures(psi.view(batch, n, width), shift - 0.5 * math.log(width))


def feature_pair(
    inputs: AttentionInputs, m: int, kernel: str, orthogonal: bool, eps: float = 0.0, causal: bool = False
) -> tuple[LogFeatures, LogFeatures]:
    """Query and key features; causal: the keys shifted per row too (``causal_linear_attention``)."""
    if eps > 0 and kernel == "trig":
        raise ParameterError("eps", "the stabiliser applies to the positive and hyperbolic kernels only; use eps = 0")
    w = projection_for(inputs, frequencies(m, kernel), orthogonal)
    phi_q = performer_features(inputs.q, w, kernel, inputs.scale, per_row_shift=True, eps=eps)
    phi_k = performer_features(inputs.k, w, kernel, inputs.scale, per_row_shift=causal, eps=eps)
    return phi_q, phi_k


def _statistics(psi: torch.Tensor, log_shift: torch.Tensor) -> torch.Tensor:
    """psi in the dtype of the statistics (float32 for half-precision psi): the dense views are computed there."""
    return psi.to(log_shift.dtype)


def unnormalized_estimate(phi_q: LogFeatures, phi_k: LogFeatures) -> torch.Tensor:
    """phi(Q) phi(K)^T, the raw estimate of exp(beta q.k): (B, n, n). May overflow at extreme beta."""
    psi_q, psi_k = _statistics(phi_q.psi, phi_q.log_shift), _statistics(phi_k.psi, phi_k.log_shift)
    return (psi_q @ psi_k.transpose(-1, -2)) * torch.exp(phi_q.log_shift + phi_k.log_shift)


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
    """Q~ (K~^T V) and Q~ (K~^T 1) in the query's shifted units: never an n x n tensor.

    bfloat16 psi and v: both products in bfloat16 with float32 accumulation (the numerator comes back in bfloat16),
    the normaliser K~^T 1 and the denominator in float32. float16 is computed in float32: K~^T V sums n keys and
    can pass float16's largest value (65504).
    """
    kv, k_sum = key_summary(phi_k, v)
    return query_products(phi_q.psi, kv, k_sum)


def key_summary(phi_k: LogFeatures, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """K~^T V (B, m, dv) and K~^T 1 (B, m, 1) (see ``linear_attention`` for the precisions)."""
    psi_k = phi_k.psi
    if psi_k.dtype == torch.bfloat16:
        return psi_k.transpose(-1, -2) @ v.to(psi_k.dtype), psi_k.sum(-2, dtype=torch.float32).unsqueeze(-1)
    if psi_k.dtype == torch.float16:
        psi_k = psi_k.float()
    v = v.to(psi_k.dtype)  # half v beside float32 features (float16, trig)
    return psi_k.transpose(-1, -2) @ v, psi_k.sum(-2).unsqueeze(-1)


def query_products(psi_q: torch.Tensor, kv: torch.Tensor, k_sum: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Q~ (K~^T V) and Q~ (K~^T 1) from ``key_summary``'s products."""
    if psi_q.dtype != torch.bfloat16:
        psi_q = psi_q.to(kv.dtype)
        return psi_q @ kv, (psi_q @ k_sum).squeeze(-1)
    numerator = psi_q @ kv
    batch, n, m = psi_q.shape
    denominator = k_sum.new_empty(batch, n)
    for rows in row_blocks(n, batch * m, psi_q.device):  # float32 copies of psi_q, one block at a time
        denominator[:, rows] = (psi_q[:, rows].float() @ k_sum).squeeze(-1)
    return numerator, denominator


def causal_linear_attention(
    phi_q: LogFeatures, phi_k: LogFeatures, v: torch.Tensor, block: int = CAUSAL_BLOCK
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """FAVOR+ unidirectional: sum_{l <= i} phi(q_i).phi(k_l) v_l (B, n, dv) and sum_{l <= i} phi(q_i).phi(k_l)
    (B, n), never an n x n tensor, and the log reference (B, n, 1) of key units they are in.

    phi_k must be shifted per row (``per_row_shift=True``): key l is exp(s_l) psi_l. Both sums are in units of
    exp(a_i + M_i) with a_i the query's shift and M_i = max_{l <= i} s_l, so every key weight exp(s_l - M_i) <= 1.
    Blocks of ``block`` positions: the keys of earlier blocks come from the running state (sum of phi(k) v^T and
    phi(k), in units of its own running maximum), those of the query's block from a masked block x block product.
    Computed in the features' statistics dtype (float32 for half precision).
    """
    stats = phi_k.log_shift.dtype
    psi_q, psi_k, key_log = phi_q.psi.to(stats), phi_k.psi.to(stats), phi_k.log_shift
    v = v.to(stats)
    batch, n, width = psi_k.shape
    dv = v.shape[-1]
    numerator = v.new_empty(batch, n, dv)
    denominator = v.new_empty(batch, n)
    reference = key_log.new_empty(batch, n, 1)
    state = v.new_zeros(batch, width, dv)
    state_sum = v.new_zeros(batch, width, 1)
    state_log = key_log.new_full((batch, 1, 1), float("-inf"))
    lower = torch.ones(block, block, dtype=torch.bool, device=v.device).tril_()
    for start in range(0, n, block):
        rows = slice(start, min(start + block, n))
        size = rows.stop - start
        shifts = key_log[:, rows]  # (B, c, 1)
        running = torch.maximum(shifts.cummax(dim=1).values, state_log)  # M_i
        weights = (shifts.transpose(1, 2) - running).masked_fill_(~lower[:size, :size], float("-inf")).exp_()
        scores = torch.bmm(psi_q[:, rows], psi_k[:, rows].transpose(1, 2)).mul_(weights)
        earlier = torch.exp(state_log - running)  # (B, c, 1): the state's units in the query's; 0 before any key
        numerator[:, rows] = torch.bmm(scores, v[:, rows]).addcmul_(torch.bmm(psi_q[:, rows], state), earlier)
        from_state = torch.bmm(psi_q[:, rows], state_sum).squeeze(-1)
        denominator[:, rows] = scores.sum(-1).addcmul_(from_state, earlier[..., 0])
        reference[:, rows] = running
        block_log = running[:, -1:]  # the running maximum after this block
        keys = psi_k[:, rows] * torch.exp(shifts - block_log)
        decay = torch.exp(state_log - block_log)
        state = torch.baddbmm(state * decay, keys.transpose(1, 2), v[:, rows])
        state_sum = state_sum.mul_(decay).add_(keys.sum(1).unsqueeze(-1))
        state_log = block_log
    return numerator, denominator, reference


def causal_estimate(phi_q: LogFeatures, phi_k: LogFeatures) -> tuple[torch.Tensor, torch.Tensor]:
    """The dense phi(q_i).phi(k_l) for l <= i (0 above the diagonal), (B, n, n), in units of exp(reference) per row,
    and that log reference (B, n, 1), the one ``causal_linear_attention`` uses. phi_k shifted per row."""
    stats = phi_k.log_shift.dtype
    key_log = phi_k.log_shift
    running = key_log.cummax(dim=1).values
    n = key_log.shape[1]
    lower = torch.ones(n, n, dtype=torch.bool, device=key_log.device).tril_()
    weights = (key_log.transpose(1, 2) - running).masked_fill_(~lower, float("-inf")).exp_()
    scores = (phi_q.psi.to(stats) @ phi_k.psi.to(stats).transpose(-1, -2)).mul_(weights)
    return scores, phi_q.log_shift + running


def performer_cost(inputs: AttentionInputs, params: dict[str, Any]) -> Cost:
    n, d, dv, b, m = inputs.n, inputs.d, inputs.dv, inputs.batch, params["features"]
    if params.get("causal"):
        return causal_performer_cost(n, d, dv, m).scaled(b)
    memory = 2 * n * m + m * dv + m
    flops = 2 * (2 * n * m * d) + 2 * n * m * dv * 2 + 2 * n * m + 6 * n * m
    return Cost(memory=b * memory, flops=b * flops)


def causal_performer_cost(n: int, d: int, dv: int, m: int) -> Cost:
    """One batch element of the prefix-sum path: both feature maps, the running state, one block's scores; the
    in-block products (block x block x (m + dv) per block, half of them masked), the queries' products with the
    state and the state's updates (each 2 n m dv)."""
    block = min(CAUSAL_BLOCK, n)
    blocks = -(-n // block)
    memory = 2 * n * m + m * dv + m + block * block
    in_block = blocks * block * block * (2 * m + 2 * dv + 3)
    flops = 2 * (2 * n * m * d) + in_block + 2 * (2 * n * m * dv) + 4 * n * m + 6 * n * m
    return Cost(memory=memory, flops=flops)


def _run(inputs: AttentionInputs, params: dict[str, Any]) -> Approximation:
    m, kernel, orthogonal, eps = params["features"], params["kernel"], params["orthogonal"], params["eps"]
    if eps > 0 and kernel == "trig":
        raise ParameterError("eps", "the stabiliser applies to the positive and hyperbolic kernels only; use eps = 0")
    w = projection_for(inputs, frequencies(m, kernel), orthogonal)
    scale = inputs.scale
    if params.get("causal"):
        return _run_causal(inputs, w, kernel, eps)
    phi_k = performer_features(inputs.k, w, kernel, scale, per_row_shift=False, eps=eps)
    kv, k_sum = key_summary(phi_k, inputs.v)
    # Query features are made and used a block of rows at a time (each row's shift is its own), so the n x m query
    # features never exist as a whole: one allocation and one pass through memory fewer, the same numbers.
    batch, n, width = phi_k.psi.shape
    numerator = kv.new_empty(batch, n, kv.shape[-1])
    denominator = k_sum.new_empty(batch, n)
    for rows in row_blocks(n, batch * width, inputs.device):  # blocks span the batch
        phi = performer_features(inputs.q[:, rows], w, kernel, scale, per_row_shift=True, eps=eps)
        numerator[:, rows], denominator[:, rows] = query_products(phi.psi, kv, k_sum)
    output = numerator.div_(safe_denominator(denominator).unsqueeze(-1))

    @functools.cache
    def query_features() -> LogFeatures:
        return performer_features(inputs.q, w, kernel, scale, per_row_shift=True, eps=eps)

    def dense() -> torch.Tensor:
        phi_q = query_features()
        psi_q, psi_k = _statistics(phi_q.psi, phi_q.log_shift), _statistics(phi_k.psi, phi_k.log_shift)
        scores = psi_q @ psi_k.transpose(-1, -2)
        return scores / safe_denominator(scores.sum(-1, keepdim=True))

    return make_result(
        inputs,
        "performer",
        output,
        dense=dense,
        parts={"unnormalized": lambda: unnormalized_estimate(query_features(), phi_k)},
        info={"features_used": width},
    )


def _run_causal(inputs: AttentionInputs, w: torch.Tensor, kernel: str, eps: float) -> Approximation:
    phi_q = performer_features(inputs.q, w, kernel, inputs.scale, per_row_shift=True, eps=eps)
    phi_k = performer_features(inputs.k, w, kernel, inputs.scale, per_row_shift=True, eps=eps)
    numerator, denominator, _ = causal_linear_attention(phi_q, phi_k, inputs.v)
    output = numerator.div_(safe_denominator(denominator).unsqueeze(-1)).to(inputs.dtype)

    def dense() -> torch.Tensor:
        scores, _ = causal_estimate(phi_q, phi_k)
        return scores / safe_denominator(scores.sum(-1, keepdim=True))

    def unnormalized() -> torch.Tensor:
        scores, log_reference = causal_estimate(phi_q, phi_k)
        return scores.mul_(torch.exp(log_reference))

    return make_result(
        inputs,
        "performer",
        output,
        dense=dense,
        parts={"unnormalized": unnormalized},
        info={"features_used": phi_k.psi.shape[-1]},
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
        half_native=True,
        causal_form=True,
    )
)
