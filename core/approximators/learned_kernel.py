"""Trainable feed-forward kernels (Yorsh & Kovalenko 2022) and ELU+1 linear attention (Katharopoulos et al. 2020).

Both attend linearly, out_i = phi(q_i)^T (sum_j phi(k_j) v_j^T) / phi(q_i)^T (sum_j phi(k_j)), with one feature map
phi applied to queries and keys (both first multiplied by sqrt(beta), so beta q.k = x.y):

    ff:     phi(x) = Softplus(x W)                                     (the paper's single-layer "linear kernel")
    glu:    phi(x) = Softplus(x W_f) * sigmoid(x W_g)                  (the paper's output GLU unit; Gaussian init)
    oglu:   glu with W_f orthogonally initialised (and penalised when ortho_penalty > 0)
    aoglu:  oglu with a low-rank gate W_g = A B, rank features // 4    (1.5 m^2 instead of 2 m^2 at m = d)
    linear_elu: phi(x) = ELU(x) + 1, nothing trained (m = d features)

W is per head (one per batch element), fitted on its own: an element's result never depends on its batch.
The paper trains phi end to end inside a Transformer on the task loss;
here, as a demonstration, phi is FITTED to the exact softmax attention of the given input: Adam on the row-averaged
KL(A || A_hat) over (a seeded subsample of) query rows, plus ortho_penalty * mean((W W^T - I)^2) on W (or W_f).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from core.approximation import Approximation, AttentionInputs, Cost, make_result
from core.approximators.performer import safe_denominator
from core.cancel import CancelToken, check
from core.device import cpu_threads
from core.registry import MethodSpec, ParamSpec, register

VARIANTS = ("ff", "glu", "oglu", "aoglu")
MAX_FEATURES = 1024
MAX_STEPS = 2000
# Query rows per training step: the loss needs those rows of the exact attention against all keys.
TRAIN_ROWS = 256
# Training works on at most this many scalars per step (batch x rows x n x features); larger inputs are refused.
MAX_TRAIN_WORK = 2**27
INIT_STREAM = 11
ROW_STREAM = 12


# ---------------------------------------------------------------------------------------------- feature maps


def elu_features(x: torch.Tensor) -> torch.Tensor:
    """ELU(x) + 1: positive, m = d features."""
    return F.elu(x) + 1.0


def linear_attend(phi_q: torch.Tensor, phi_k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """phi(Q) (phi(K)^T V) / phi(Q) (phi(K)^T 1), never an n x n tensor: (B, n, dv)."""
    kv = phi_k.transpose(-1, -2) @ v
    denominator = phi_q @ phi_k.sum(-2).unsqueeze(-1)
    return (phi_q @ kv).div_(safe_denominator(denominator))


def linear_weights(phi_q: torch.Tensor, phi_k: torch.Tensor) -> torch.Tensor:
    """The dense row-normalised attention phi(Q) phi(K)^T / rowsum: (B, n, n)."""
    scores = phi_q @ phi_k.transpose(-1, -2)
    return scores / safe_denominator(scores.sum(-1, keepdim=True))


def gate_rank(features: int) -> int:
    """Rank of AOGLU's gate W_g = A B: features // 4 as in the paper (at least 1)."""
    return max(1, features // 4)


def orthogonal_matrix(batch: int, rows: int, cols: int, generator: torch.Generator) -> torch.Tensor:
    """(batch, rows, cols) with orthonormal columns (rows >= cols) or rows (rows < cols), Haar-distributed."""
    tall = rows >= cols
    gauss = torch.randn(batch, max(rows, cols), min(rows, cols), generator=generator, dtype=torch.float64, device="cpu")
    q, r = torch.linalg.qr(gauss)
    signs = torch.sign(torch.diagonal(r, dim1=-2, dim2=-1))
    q = q * torch.where(signs == 0, torch.ones_like(signs), signs)[:, None, :]
    return q if tall else q.transpose(-1, -2)


@dataclass
class KernelWeights:
    """A feature map's parameters for B heads; ``features(x)`` applies it to x (B, n, d) -> (B, n, m)."""

    variant: str
    w: torch.Tensor  # W (ff) or W_f (GLU variants), (B, d, m)
    gate: torch.Tensor | None = None  # W_g (B, d, m) for glu/oglu
    gate_a: torch.Tensor | None = None  # A (B, d, r) for aoglu
    gate_b: torch.Tensor | None = None  # B (B, r, m) for aoglu

    def parameters(self) -> list[torch.Tensor]:
        return [t for t in (self.w, self.gate, self.gate_a, self.gate_b) if t is not None]

    def features(self, x: torch.Tensor) -> torch.Tensor:
        value = F.softplus(x @ self.w)
        if self.variant == "ff":
            return value
        if self.variant == "aoglu":
            assert self.gate_a is not None and self.gate_b is not None
            gate = (x @ self.gate_a) @ self.gate_b
        else:
            assert self.gate is not None
            gate = x @ self.gate
        return value * torch.sigmoid(gate)

    def detached(self) -> KernelWeights:
        def cut(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else t.detach().clone()

        w = cut(self.w)
        assert w is not None
        return KernelWeights(self.variant, w, cut(self.gate), cut(self.gate_a), cut(self.gate_b))

    def orthogonality_penalty(self) -> torch.Tensor:
        """mean((W W^T - I)^2) over the smaller Gram matrix of W (or W_f), averaged over heads."""
        w = self.w
        gram = w @ w.transpose(-1, -2) if w.shape[-2] <= w.shape[-1] else w.transpose(-1, -2) @ w
        eye = torch.eye(gram.shape[-1], dtype=gram.dtype, device=gram.device)
        return ((gram - eye) ** 2).mean()

    def parameter_count(self) -> int:
        return sum(int(t[0].numel()) for t in self.parameters())


def init_weights(
    variant: str, batch: int, d: int, features: int, orthogonal_init: bool, generator: torch.Generator
) -> KernelWeights:
    """Seeded initial weights (float64, CPU).

    W_f is orthogonal for oglu/aoglu, Gaussian for glu (the paper's plain GLU), and for ff as ``orthogonal_init`` says
    (the paper's "Orth. linear kernel" vs "Linear kernel").
    """
    orthogonal = variant in ("oglu", "aoglu") or (variant == "ff" and orthogonal_init)
    if orthogonal:
        w = orthogonal_matrix(batch, d, features, generator)
    else:
        w = torch.randn(batch, d, features, generator=generator, dtype=torch.float64, device="cpu") / math.sqrt(d)
    if variant == "ff":
        return KernelWeights(variant, w)
    if variant == "aoglu":
        r = gate_rank(features)
        a = torch.randn(batch, d, r, generator=generator, dtype=torch.float64, device="cpu") / math.sqrt(d)
        b = torch.randn(batch, r, features, generator=generator, dtype=torch.float64, device="cpu") / math.sqrt(r)
        return KernelWeights(variant, w, gate_a=a, gate_b=b)
    gate = torch.randn(batch, d, features, generator=generator, dtype=torch.float64, device="cpu") / math.sqrt(d)
    return KernelWeights(variant, w, gate=gate)


# ---------------------------------------------------------------------------------------------- fitting


@dataclass
class FittedKernel:
    """A feature map fitted to softmax attention, with its training record."""

    weights: KernelWeights
    curve: list[float]  # loss (mean row KL + penalty) at every step, before the step's update
    kl_curve: list[float]  # mean row KL part of the loss
    final_kl: float  # mean row KL on all rows after training
    seconds: float
    train_rows: int

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.weights.features(x)


def fit_kernel(
    q: torch.Tensor,
    k: torch.Tensor,
    scale: torch.Tensor,
    *,
    features: int,
    variant: str = "ff",
    steps: int = 100,
    ortho_penalty: float = 0.0,
    lr: float = 0.05,
    orthogonal_init: bool = True,
    generator: Callable[[int], torch.Generator],
    progress: Callable[[int, int], None] | None = None,
    cancel: CancelToken | None = None,
) -> FittedKernel:
    """Fit phi so that phi(Q) phi(K)^T, row-normalised, matches softmax(scale Q K^T) (KL per row).

    q, k: (B, n, d); scale: (B, 1, 1). generator(stream) gives seeded CPU generators (init, row subsets).
    Each batch element is fitted on its own, from the same seeded draws, so an element gives the same phi
    alone or inside any batch. Curves and final_kl are means over the elements.
    Runs with gradients even when called under no_grad / inference_mode.
    """
    start = time.perf_counter()
    batch = q.shape[0]
    fits = []
    for b in range(batch):
        report = None
        if progress is not None:

            def report(step: int, total: int, b: int = b) -> None:
                progress(b * total + step, batch * total)

        fits.append(
            _fit_one(
                q[b : b + 1],
                k[b : b + 1],
                scale[b : b + 1],
                features=features,
                variant=variant,
                steps=steps,
                ortho_penalty=ortho_penalty,
                lr=lr,
                orthogonal_init=orthogonal_init,
                generator=generator,
                progress=report,
                cancel=cancel,
            )
        )
    parts = [f.weights for f in fits]

    def stack(name: str) -> torch.Tensor | None:
        pieces = [getattr(w, name) for w in parts]
        return None if pieces[0] is None else torch.cat(pieces)

    w = stack("w")
    assert w is not None
    weights = KernelWeights(variant, w, stack("gate"), stack("gate_a"), stack("gate_b"))
    return FittedKernel(
        weights=weights,
        curve=[sum(f.curve[i] for f in fits) / batch for i in range(steps)],
        kl_curve=[sum(f.kl_curve[i] for f in fits) / batch for i in range(steps)],
        final_kl=sum(f.final_kl for f in fits) / batch,
        seconds=time.perf_counter() - start,
        train_rows=fits[0].train_rows,
    )


def _fit_one(
    q: torch.Tensor,
    k: torch.Tensor,
    scale: torch.Tensor,
    *,
    features: int,
    variant: str,
    steps: int,
    ortho_penalty: float,
    lr: float,
    orthogonal_init: bool,
    generator: Callable[[int], torch.Generator],
    progress: Callable[[int, int], None] | None,
    cancel: CancelToken | None = None,
) -> FittedKernel:
    """fit_kernel on one batch element (q, k: (1, n, d))."""
    start = time.perf_counter()
    device = q.device
    # Half precision trains in float32: Adam on float16/bfloat16 weights loses the small updates.
    dtype = torch.float64 if q.dtype == torch.float64 else torch.float32
    batch, n, d = q.shape
    rows = min(n, TRAIN_ROWS)
    with torch.inference_mode(False), torch.enable_grad(), cpu_threads(1, device):
        sqrt_scale = scale.detach().clone().to(dtype).sqrt()
        x_q = (q.detach().clone().to(dtype)) * sqrt_scale
        x_k = (k.detach().clone().to(dtype)) * sqrt_scale
        init = init_weights(variant, batch, d, features, orthogonal_init, generator(INIT_STREAM))
        params = [t.to(device=device, dtype=dtype).requires_grad_(True) for t in init.parameters()]
        weights = _rebuild(init, params)
        optimiser = torch.optim.Adam(params, lr=lr)
        log_exact_all = torch.log_softmax(x_q @ x_k.transpose(-1, -2), dim=-1) if rows == n else None
        row_gen = generator(ROW_STREAM)
        curve: list[float] = []
        kl_curve: list[float] = []
        for step in range(steps):
            check(cancel)
            if rows == n:
                x_rows, log_exact = x_q, log_exact_all
            else:
                index = torch.randperm(n, generator=row_gen, device="cpu")[:rows].to(device)
                x_rows = x_q[:, index]
                log_exact = torch.log_softmax(x_rows @ x_k.transpose(-1, -2), dim=-1)
            assert log_exact is not None
            kl = _row_kl(weights.features(x_rows), weights.features(x_k), log_exact)
            loss = kl + ortho_penalty * weights.orthogonality_penalty() if ortho_penalty > 0 else kl
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            optimiser.step()
            curve.append(float(loss.detach()))
            kl_curve.append(float(kl.detach()))
            if progress is not None:
                progress(step + 1, steps)
        fitted = weights.detached()
        with torch.no_grad():
            final_kl = _full_kl(fitted, x_q, x_k)
    return FittedKernel(
        weights=fitted,
        curve=curve,
        kl_curve=kl_curve,
        final_kl=final_kl,
        seconds=time.perf_counter() - start,
        train_rows=rows,
    )


def _rebuild(template: KernelWeights, params: list[torch.Tensor]) -> KernelWeights:
    it = iter(params)
    w = next(it)
    gate = next(it) if template.gate is not None else None
    gate_a = next(it) if template.gate_a is not None else None
    gate_b = next(it) if template.gate_b is not None else None
    return KernelWeights(template.variant, w, gate, gate_a, gate_b)


def _row_kl(phi_rows: torch.Tensor, phi_k: torch.Tensor, log_exact: torch.Tensor) -> torch.Tensor:
    """Mean over heads and rows of KL(exact_row || approx_row)."""
    scores = (phi_rows @ phi_k.transpose(-1, -2)).clamp_min(torch.finfo(phi_rows.dtype).tiny)
    log_approx = torch.log(scores) - torch.log(scores.sum(-1, keepdim=True))
    return (log_exact.exp() * (log_exact - log_approx)).sum(-1).mean()


def _full_kl(weights: KernelWeights, x_q: torch.Tensor, x_k: torch.Tensor, chunk: int = 1024) -> float:
    phi_k = weights.features(x_k)
    total = 0.0
    n = x_q.shape[1]
    for start in range(0, n, chunk):
        rows = x_q[:, start : start + chunk]
        log_exact = torch.log_softmax(rows @ x_k.transpose(-1, -2), dim=-1)
        total += float(_row_kl(weights.features(rows), phi_k, log_exact)) * rows.shape[1]
    return total / n


# ---------------------------------------------------------------------------------------------- registry


def _check_train_size(inputs: AttentionInputs, features: int) -> None:
    from core.errors import ParameterError

    rows = min(inputs.n, TRAIN_ROWS)
    work = inputs.batch * rows * inputs.n * max(features, inputs.d)
    if work > MAX_TRAIN_WORK:
        raise ParameterError(
            "n",
            f"learned_kernel fits on {rows} query rows against all n keys per head: batch x rows x n x features = "
            f"{work} exceeds {MAX_TRAIN_WORK}; use a smaller n, fewer heads or fewer features",
        )


def _run_learned(inputs: AttentionInputs, params: dict[str, Any]) -> Approximation:
    features = params["features"]
    _check_train_size(inputs, features)
    fitted = fit_kernel(
        inputs.q,
        inputs.k,
        inputs.scale,
        features=features,
        variant=params["variant"],
        steps=params["steps"],
        ortho_penalty=params["ortho_penalty"],
        lr=params["lr"],
        orthogonal_init=params["orthogonal_init"],
        generator=inputs.generator,
    )
    sqrt_scale = inputs.scale.sqrt()
    weights = _cast(fitted.weights, inputs.device, inputs.dtype)
    with torch.no_grad():
        phi_q = weights.features(inputs.q * sqrt_scale)
        phi_k = weights.features(inputs.k * sqrt_scale)
        output = linear_attend(phi_q, phi_k, inputs.v)

    def singular_values() -> torch.Tensor:
        return torch.linalg.svdvals(fitted.weights.w)

    return make_result(
        inputs,
        "learned_kernel",
        output,
        dense=lambda: linear_weights(phi_q, phi_k),
        parts={
            "training_curve": lambda: list(fitted.curve),
            "kl_curve": lambda: list(fitted.kl_curve),
            "features_q": lambda: phi_q,
            "features_k": lambda: phi_k,
            "weight": lambda: fitted.weights.w,
            "singular_values": singular_values,
        },
        info={
            "features": features,
            "variant": params["variant"],
            "initial_loss": fitted.curve[0] if fitted.curve else float("nan"),
            "final_loss": fitted.curve[-1] if fitted.curve else float("nan"),
            "final_kl": fitted.final_kl,
            "fit_seconds": fitted.seconds,
            "train_rows": fitted.train_rows,
            "kernel_parameters_per_head": fitted.weights.parameter_count(),
        },
    )


def _cast(weights: KernelWeights, device: torch.device, dtype: torch.dtype) -> KernelWeights:
    def move(t: torch.Tensor | None) -> torch.Tensor | None:
        return None if t is None else t.to(device=device, dtype=dtype)

    w = move(weights.w)
    assert w is not None
    return KernelWeights(weights.variant, w, move(weights.gate), move(weights.gate_a), move(weights.gate_b))


def _feature_map_cost(inputs: AttentionInputs, m: int, map_flops_per_row: int) -> Cost:
    n, dv, b = inputs.n, inputs.dv, inputs.batch
    memory = 2 * n * m + m * dv + m
    flops = 2 * n * map_flops_per_row + 2 * n * m * dv * 2 + 2 * n * m
    return Cost(memory=b * memory, flops=b * flops)


def learned_cost(inputs: AttentionInputs, params: dict[str, Any]) -> Cost:
    m, d = params["features"], inputs.d
    per_row = {"ff": 2 * d * m, "glu": 4 * d * m, "oglu": 4 * d * m}.get(
        params["variant"], 2 * d * m + 2 * gate_rank(m) * (d + m)
    )
    return _feature_map_cost(inputs, m, per_row + 4 * m)


def learned_budget(n: int, d: int, fraction: float) -> dict[str, Any]:
    # memory ~ 2 n m (query and key features), as for the Performer
    return {"features": max(1, round(fraction * n / 2))}


register(
    MethodSpec(
        name="learned_kernel",
        title="Trainable kernel (fitted)",
        family="low-rank",
        description="Linear attention with a small learned feature map phi = Softplus(xW) (or a GLU variant), "
        "FITTED here to this input's softmax attention; the paper trains it end to end on the task instead.",
        params=(
            ParamSpec(
                "features",
                "int",
                32,
                "Feature dimension m of phi (the paper uses m = head dimension d).",
                low=1,
                high=MAX_FEATURES,
                log=True,
                budgeted=True,
            ),
            ParamSpec(
                "variant",
                "choice",
                "ff",
                "ff: Softplus(xW). glu: Softplus(xW_f) * sigmoid(xW_g). oglu: glu with orthogonal W_f. "
                "aoglu: oglu with a rank m/4 gate.",
                choices=VARIANTS,
            ),
            ParamSpec(
                "steps", "int", 100, "Adam steps fitting phi to the exact attention.", low=1, high=MAX_STEPS, log=True
            ),
            ParamSpec(
                "ortho_penalty",
                "float",
                0.0,
                "lambda of the orthogonality penalty lambda * mean((W W^T - I)^2) on W (W_f). The paper uses it; "
                "for fitting to softmax it hurts (an orthogonal W cannot sharpen attention).",
                low=0.0,
                high=10.0,
            ),
            ParamSpec("lr", "float", 0.05, "Adam learning rate.", low=1e-4, high=1.0, log=True),
            ParamSpec(
                "orthogonal_init",
                "bool",
                True,
                "ff only: start W orthogonal (the paper's orth. linear kernel) or Gaussian. glu starts Gaussian, "
                "oglu and aoglu start W_f orthogonal.",
            ),
        ),
        fn=_run_learned,
        budget=learned_budget,
        cost=learned_cost,
        randomized=True,
        no_causal_reason="its feature map is fitted to this input's full attention matrix, future keys included, "
        "so even prefix sums would carry the future in phi; no causal fit is implemented",
    )
)


def _run_elu(inputs: AttentionInputs, params: dict[str, Any]) -> Approximation:
    sqrt_scale = inputs.scale.sqrt()

    def features(x: torch.Tensor) -> torch.Tensor:
        return elu_features(x * sqrt_scale)

    # linear_attend's numbers with one n x d feature tensor alive at a time (the model's 2 n m at m = d holds
    # phi(K) and then phi(Q) with the output): phi(K) is reduced first, and the result keeps no features.
    phi_k = F.elu(inputs.k * sqrt_scale, inplace=True).add_(1.0)
    kv = phi_k.transpose(-1, -2) @ inputs.v
    k_sum = phi_k.sum(-2).unsqueeze(-1)
    del phi_k
    phi_q = F.elu(inputs.q * sqrt_scale, inplace=True).add_(1.0)
    denominator = phi_q @ k_sum
    output = (phi_q @ kv).div_(safe_denominator(denominator))
    del phi_q
    return make_result(
        inputs,
        "linear_elu",
        output,
        dense=lambda: linear_weights(features(inputs.q), features(inputs.k)),
        parts={"features_q": lambda: features(inputs.q), "features_k": lambda: features(inputs.k)},
        info={"features": inputs.d},
    )


def elu_cost(inputs: AttentionInputs, params: dict[str, Any]) -> Cost:
    return _feature_map_cost(inputs, inputs.d, 2 * inputs.d)


register(
    MethodSpec(
        name="linear_elu",
        title="Linear attention (ELU+1)",
        family="low-rank",
        description="Katharopoulos et al.'s linear attention, phi(x) = ELU(x) + 1 on sqrt(beta) q and sqrt(beta) k: "
        "m = d features, nothing random or trained.",
        params=(),
        fn=_run_elu,
        cost=elu_cost,
        no_causal_reason="its causal form (prefix sums, Katharopoulos et al.) is not implemented here yet",
    )
)
