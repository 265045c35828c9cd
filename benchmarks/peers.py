"""The implementations people already use, wrapped to run on our (heads, n, d) inputs at our settings.

Each wrapper returns a zero-argument callable (the timed call) giving the (heads, n, dv) output, so the
suite times exactly the attention computation: input reshapes and temperature pre-scaling happen once,
outside the timed call. Everything runs under ``torch.inference_mode``.

Temperature: our methods compute softmax(beta q.k). The peers hard-code 1/sqrt(d) (or d^-1/4 on both q and
k), so q (and k) are pre-scaled to give the same beta.

Pitfalls handled (see shared/notes/peer-implementations.md):
- performer-pytorch 1.1.4 ``FastAttention`` draws its projection at construction and keeps it (redrawing is
  the job of a model-level ``ProjectionUpdater`` we do not use); the global RNG is seeded before building it.
- reformer-pytorch ``LSHAttention`` shares queries and keys (the keys are L2-normalised copies of the
  queries), masks each token's attention to itself, attends one chunk back, draws fresh rotations from
  the global RNG every call (seeded before every call here) and needs n divisible by 2 * bucket_size. Its
  target is therefore not plain softmax attention: see ``reformer_target``.
- nystrom-attention ``NystromAttention`` is a full layer: its qkv/out projections are bypassed and its
  residual depthwise convolution is switched off, so only the Nystrom approximation is timed.
- local-attention ``LocalAttention`` works in blocks of ``window_size`` with one block back and one forward
  (3 w keys per query, like ours); exact_windowsize=True masks to |i - j| <= w, non-causal, no rotary.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

# Which peer implements which of our methods, and the packages (pinned in requirements-bench.txt).
PEER_OF = {
    "performer": "performer_pytorch",
    "lsh": "reformer_pytorch",
    "nystrom": "nystrom_attention",
    "local": "local_attention",
}


@dataclass
class Peer:
    name: str  # e.g. "performer_pytorch"
    method: str  # our method it is compared with
    call: Callable[[], torch.Tensor]  # the timed call -> (heads, n, dv)
    settings: dict[str, Any]  # what it was configured with
    target: str = "softmax"  # what it approximates: "softmax" or a note


def available() -> dict[str, str | None]:
    """Peer package -> version, or None when it cannot be imported."""
    out: dict[str, str | None] = {}
    import importlib.metadata as md

    for package in PEER_OF.values():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                __import__(package)
            out[package] = md.version(package.replace("_", "-"))
        except Exception:  # noqa: BLE001 - any import failure means "not available"
            out[package] = None
    return out


def sdpa_call(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, beta: float) -> Callable[[], torch.Tensor]:
    """torch's fused exact attention (FlashAttention / memory-efficient backends on GPU, flash-style on CPU).

    The inputs are passed as 4-D (1, heads, n, d): on the CPU, torch 2.13 only dispatches 4-D inputs to its
    flash kernel; 3-D (heads, n, d) inputs fall back to the math path, which stores n x n scores per head and
    was 3-4x slower here (and 4.6 GiB at n = 8192, 8 heads).
    """
    q4, k4, v4 = q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0)

    def call() -> torch.Tensor:
        with torch.inference_mode():
            return F.scaled_dot_product_attention(q4, k4, v4, scale=beta)[0]

    return call


def gemm_call(n: int, d: int, heads: int, device: torch.device, dtype: torch.dtype) -> Callable[[], torch.Tensor]:
    """The attention-shaped GEMM (heads, n, d) x (heads, d, n): exact attention's QK^T alone."""
    g = torch.Generator().manual_seed(0)
    a = torch.randn(heads, n, d, generator=g).to(device=device, dtype=dtype)
    b = torch.randn(heads, d, n, generator=g).to(device=device, dtype=dtype)

    def call() -> torch.Tensor:
        return a @ b

    return call


def performer_peer(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, beta: float, features: int, seed: int) -> Peer:
    from performer_pytorch import FastAttention

    d = q.shape[-1]
    torch.manual_seed(seed)
    # ortho_scaling=0: orthogonal blocks with chi-distributed row norms, as our orthogonal=True.
    module = FastAttention(dim_heads=d, nb_features=features, ortho_scaling=0).to(q.device, q.dtype).eval()
    # FastAttention applies d^-1/4 to q and k: exp(q.k / sqrt(d)). Pre-scale both by sqrt(beta sqrt(d)).
    factor = math.sqrt(beta * math.sqrt(d))
    q4, k4, v4 = (q * factor).unsqueeze(0), (k * factor).unsqueeze(0), v.unsqueeze(0)

    def call() -> torch.Tensor:
        with torch.inference_mode():
            return module(q4, k4, v4)[0]

    return Peer("performer_pytorch", "performer", call, {"nb_features": features, "ortho_scaling": 0})


def reformer_bucket_size(n: int, buckets: int) -> int | None:
    """Our ``buckets`` (chunks per round) as Reformer's bucket_size, or None if Reformer cannot run it."""
    if buckets < 2 or n % buckets:
        return None
    size = n // buckets
    return size if n % (2 * size) == 0 else None


def reformer_peer(q: torch.Tensor, v: torch.Tensor, beta: float, rounds: int, buckets: int, seed: int) -> Peer:
    from reformer_pytorch import LSHAttention

    n, d = q.shape[-2], q.shape[-1]
    bucket_size = reformer_bucket_size(n, buckets)
    if bucket_size is None:
        raise ValueError(f"reformer needs n divisible by 2 * bucket_size; n = {n}, buckets = {buckets}")
    module = LSHAttention(bucket_size=bucket_size, n_hashes=rounds, causal=False).to(q.device).eval()
    # dots = q . normalize(q) * d^-1/2: pre-scale the shared qk by beta sqrt(d) (the keys are renormalised).
    qk = q * (beta * math.sqrt(d))

    def call() -> torch.Tensor:
        torch.manual_seed(seed)  # LSHAttention draws its rotations from the global RNG on every call
        with torch.inference_mode():
            return module(qk, v)[0]

    return Peer(
        "reformer_pytorch",
        "lsh",
        call,
        {"bucket_size": bucket_size, "n_hashes": rounds, "n_buckets": n // bucket_size},
        target="shared-QK: softmax(beta q_i.q_j/|q_j|) with self-attention masked",
    )


def reformer_target(q: torch.Tensor, v: torch.Tensor, beta: float, block: int = 1024) -> torch.Tensor:
    """The exact attention Reformer approximates, computed in query blocks (never n x n at once)."""
    keys = F.normalize(q, dim=-1)
    out = torch.empty(*q.shape[:-1], v.shape[-1], dtype=v.dtype, device=v.device)
    n = q.shape[-2]
    for start in range(0, n, block):
        stop = min(n, start + block)
        scores = beta * (q[..., start:stop, :] @ keys.transpose(-1, -2))
        rows = torch.arange(start, stop, device=q.device)
        scores[..., torch.arange(stop - start, device=q.device), rows] = -5e4  # Reformer's TOKEN_SELF_ATTN_VALUE
        out[..., start:stop, :] = torch.softmax(scores, dim=-1) @ v
    return out


def nystrom_peer(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, beta: float, landmarks: int, pinv_iterations: int
) -> Peer:
    from nystrom_attention import NystromAttention

    heads, n, d = q.shape
    module = (
        NystromAttention(
            dim=heads * d,
            dim_head=d,
            heads=heads,
            num_landmarks=landmarks,
            pinv_iterations=pinv_iterations,
            residual=False,
        )
        .to(q.device, q.dtype)
        .eval()
    )
    # Bypass the layer's projections: to_qkv returns our q, k, v laid out as (1, n', 3 * heads * d).
    # It multiplies q by d^-1/2, so q is pre-scaled by beta sqrt(d).
    packed = torch.cat([t.transpose(0, 1).reshape(1, n, heads * d) for t in (q * (beta * math.sqrt(d)), k, v)], -1)
    pad = (-n) % landmarks
    # When m does not divide n the layer pads at the front; the documented mask keeps the padding out.
    mask = torch.ones(1, n, dtype=torch.bool, device=q.device) if pad else None
    module.to_qkv = _Constant(F.pad(packed, (0, 0, pad, 0)))
    module.to_out = torch.nn.Identity()
    dummy = torch.empty(1, n, heads * d, device=q.device, dtype=q.dtype)

    def call() -> torch.Tensor:
        with torch.inference_mode():
            out = module(dummy, mask=mask)  # (1, n, heads * d)
        return out.reshape(n, heads, d).transpose(0, 1)

    return Peer(
        "nystrom_attention",
        "nystrom",
        call,
        {"num_landmarks": landmarks, "pinv_iterations": pinv_iterations, "residual": False, "front_padding": pad},
    )


class _Constant(torch.nn.Module):
    def __init__(self, value: torch.Tensor) -> None:
        super().__init__()
        self.value = value

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.value


def local_peer(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, beta: float, window: int) -> Peer:
    """lucidrains LocalAttention in blocks of ``window`` with one block back and forward, masked to |i - j| <= w.

    exact_windowsize=True gives exactly our band, so the two should agree to rounding.
    """
    from local_attention import LocalAttention

    d = q.shape[-1]
    size = max(1, window)
    module = LocalAttention(
        window_size=size,
        causal=False,
        look_backward=1,
        look_forward=1,
        dropout=0.0,
        autopad=True,
        exact_windowsize=True,
        scale=beta,
        dim=d,
        use_rotary_pos_emb=False,
    )
    module = module.to(q.device).eval()

    def call() -> torch.Tensor:
        with torch.inference_mode():
            return module(q, k, v)

    return Peer(
        "local_attention",
        "local",
        call,
        {"window_size": size, "look_backward": 1, "look_forward": 1, "exact_windowsize": True},
    )
