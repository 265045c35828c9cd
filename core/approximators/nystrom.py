"""Nystromformer: softmax attention through m segment-mean landmarks.

F = softmax(beta Q K~^T) (n x m), A = softmax(beta Q~ K~^T) (m x m), B = softmax(beta Q~ K^T) (m x n),
output = F A^+ (B V). A^+ is the iterative Moore-Penrose pseudo-inverse of the paper (Razavi et al.),
or an exact SVD-based one. Memory O(n m).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from core.approximation import Approximation, AttentionInputs, Cost, make_result
from core.approximators.common import float32_copy, index_add_in_order_, is_half
from core.device import row_blocks
from core.registry import MethodSpec, ParamSpec, register


def segment_means(x: torch.Tensor, m: int) -> torch.Tensor:
    """Means of m contiguous, near-equal segments of x (B, n, d) -> (B, m, d); works for any n >= m."""
    n = x.shape[-2]
    segment = torch.div(torch.arange(n, device=x.device) * m, n, rounding_mode="floor")
    sums = torch.zeros(x.shape[0], m, x.shape[-1], dtype=x.dtype, device=x.device)
    index_add_in_order_(sums, 1, segment, x)
    counts = torch.bincount(segment, minlength=m).to(x.dtype).clamp_min(1)
    return sums / counts[None, :, None]


def iterative_pinv(a: torch.Tensor, iterations: int) -> torch.Tensor:
    """Razavi et al.'s iteration, as used by Nystromformer; initialised per batch element."""
    abs_a = a.abs()
    col = abs_a.sum(-2).amax(-1, keepdim=True).unsqueeze(-1)
    row = abs_a.sum(-1).amax(-1, keepdim=True).unsqueeze(-1)
    z = a.transpose(-1, -2) / (col * row)
    identity = torch.eye(a.shape[-1], dtype=a.dtype, device=a.device)
    for _ in range(iterations):
        az = a @ z
        z = 0.25 * z @ (13 * identity - az @ (15 * identity - az @ (7 * identity - az)))
    return z


def row_softmax(x: torch.Tensor, y: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """softmax(scale * (x @ y^T), dim=-1) for x (B, r, d), y (B, c, d), scale (B, 1, 1), filled block by block of
    rows: the result is the only r x c tensor allocated (the scores, their scaled copy and softmax's temporaries
    are block-sized), with the whole-matrix call's numbers."""
    y_t = y.transpose(-1, -2)

    def block_softmax(x_rows: torch.Tensor) -> torch.Tensor:
        scores = x_rows @ y_t
        # Half precision: the product in half (float32 accumulation), the scaling and softmax in float32.
        return torch.softmax((scores.float() if is_half(scores.dtype) else scores).mul_(scale), dim=-1)

    blocks = row_blocks(x.shape[-2], x.shape[0] * y.shape[-2], x.device)  # blocks span the batch
    if len(blocks) == 1:
        return block_softmax(x).to(x.dtype)
    out = x.new_empty(x.shape[0], x.shape[-2], y.shape[-2])
    for block in blocks:
        out[:, block] = block_softmax(x[:, block])
    return out


def _landmark_kernel(inputs: AttentionInputs, m: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The landmarks Q~, K~ (B, m, d) and A = softmax(beta Q~ K~^T) (B, m, m); float32 for half inputs."""
    stat = inputs.statistics_dtype
    q_land, k_land = segment_means(inputs.q.to(stat), m), segment_means(inputs.k.to(stat), m)
    a = torch.softmax(inputs.scale * (q_land @ k_land.transpose(-1, -2)), dim=-1)
    return q_land, k_land, a


def _run(inputs: AttentionInputs, params: dict[str, Any]) -> Approximation:
    if params["pinv"] == "exact":
        # The SVD pseudo-inverse's large entries cancel in F A^+ B: half-precision F and B would lose that.
        inputs = float32_copy(inputs)
    dtype = inputs.dtype
    m = min(params["landmarks"], inputs.n)
    q_land, k_land, a = _landmark_kernel(inputs, m)
    if params["pinv"] == "iterative":
        # Before F and B exist, so that the iteration's m x m temporaries never sit beside them. In float32 for
        # half inputs, like A.
        a_pinv = iterative_pinv(a, params["pinv_iterations"])
    f = row_softmax(inputs.q, k_land.to(dtype), inputs.scale)
    b = row_softmax(q_land.to(dtype), inputs.k, inputs.scale)
    if params["pinv"] == "exact":
        # Near-uniform attention makes A nearly rank one: its pseudo-inverse has entries ~1e5 that cancel in
        # F A^+ B. Float32 loses that cancellation (2e-3 off), so the O(n m) products after A run in float64.
        f64, b64 = f.double(), b.double()
        a_pinv64 = torch.linalg.pinv(a.double())
        output = (f64 @ (a_pinv64 @ (b64 @ inputs.v.double()))).to(inputs.dtype)
        a_pinv = a_pinv64.to(inputs.dtype)

        def dense() -> torch.Tensor:
            return (f64 @ (a_pinv64 @ b64)).to(inputs.dtype)

    else:
        # Half precision: B V and the final product in half (float32 accumulation), A^+ (B V) in float32.
        output = f @ (a_pinv @ (b @ inputs.v).to(a_pinv.dtype)).to(dtype)

        def dense() -> torch.Tensor:
            return f.to(a_pinv.dtype) @ (a_pinv @ b.to(a_pinv.dtype))

    parts = {"kernel_f": lambda: f, "kernel_a_pinv": lambda: a_pinv, "kernel_b": lambda: b}
    return make_result(inputs, "nystrom", output, dense=dense, parts=parts, info={"landmarks": m})


def nystrom_cost(inputs: AttentionInputs, params: dict[str, Any]) -> Cost:
    n, d, dv, bsz = inputs.n, inputs.d, inputs.dv, inputs.batch
    m = min(params["landmarks"], n)
    iterations = params["pinv_iterations"] if params["pinv"] == "iterative" else 10
    memory = 2 * n * m + 2 * m * m
    flops = (
        2 * (2 * n * m * d) + 2 * m * m * d + iterations * 8 * m**3 + 2 * m * n * dv + 2 * m * m * dv + 2 * n * m * dv
    )
    return Cost(memory=bsz * memory, flops=bsz * flops)


def nystrom_budget(n: int, d: int, fraction: float) -> dict[str, Any]:
    # 2 n m + 2 m^2 = fraction n^2
    m = (-2 * n + math.sqrt(4 * n * n + 8 * fraction * n * n)) / 4
    return {"landmarks": max(1, round(m))}


register(
    MethodSpec(
        name="nystrom",
        title="Nystrom",
        family="low-rank",
        description="Segment-mean landmarks and an iterative pseudo-inverse: F A^+ (B V), O(n m) memory.",
        params=(
            ParamSpec(
                "landmarks",
                "int",
                64,
                "Number of landmarks m (segment means of queries and keys).",
                low=1,
                high=lambda n, d: float(n),
                log=True,
                budgeted=True,
            ),
            ParamSpec(
                "pinv_iterations", "int", 6, "Iterations of the pseudo-inverse (the paper uses 6).", low=1, high=50
            ),
            ParamSpec(
                "pinv",
                "choice",
                "iterative",
                "iterative (the paper's, GPU friendly) or exact (SVD).",
                choices=("iterative", "exact"),
            ),
        ),
        fn=_run,
        budget=nystrom_budget,
        cost=nystrom_cost,
        half_native=True,
        no_causal_reason="Nystrom's landmarks are segment means over the whole sequence, so they mix past and "
        "future keys; it has no causal form",
    )
)
