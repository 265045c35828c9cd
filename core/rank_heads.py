"""Rank vs heads: one attention layer trained on the nearest-neighbour target (Amsel, Yehudai, Bruna 2024).

A layer of ``heads`` heads, each with query/key maps Q_h, K_h in R^{d x r} (so the bilinear form K_h Q_h^T has
rank <= r) and a full value map V_h in R^{d x d} (the theorem's class), plus one learnable inverse temperature c:

    model(X, y) = sum_h V_h X softmax(c * X^T K_h Q_h^T y + b_h)

The sources y and the N targets x_i lie on the unit sphere; the target is the nearest x_i to y (``"nearest"``),
the farthest (``"farthest"``), or the nearest after a fixed per-position bias (``"biased"``, Eq. 8; the layer then
also learns a per-head positional score bias b_h, which is inside the paper's generalised class).

The error is the mean squared Euclidean error E||f(X; y) - model(X, y)||^2 on a fixed held-out set; because
||f|| = 1 it is the paper's relative squared error. Note the paper's "rank" is the head dimension r, not the rank
of the n x n attention matrix that the approximation methods elsewhere in this engine work on.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from core.cancel import CancelToken, check
from core.device import cpu_threads, describe, resolve_device, synchronize
from core.errors import ParameterError

# Input limits; a page can lower them. Every one is checked and named in the error.
MIN_D = 2
MAX_D = 64
MIN_POINTS = 2
MAX_POINTS = 256
MAX_HEADS = 1024
MAX_STEPS = 20_000
MAX_BATCH = 4096
MAX_GRID_CELLS = 64
# Work limit of one grid request, in multiply-adds of the head-value products (heads * d^2 * batch * steps summed
# over cells); about 10 minutes on a 2-core CPU.
MAX_GRID_WORK = 1.5e13
MAX_CONSTRUCTION_SAMPLES = 200_000
# Intra-op threads while training on a CPU. The matrices are small, so extra threads gain little when the machine
# is idle and cost several-fold when it is loaded (measured: 7x slower wall time with 2 threads on a busy 2-core box).
CPU_TRAIN_THREADS = 1
EVALUATIONS = 20  # test-set evaluations per run when eval_every is not given

TEST_SAMPLES = 8192
TEST_SEED = 987_654_321  # the held-out set is the same for every training seed
DEFAULT_BATCH = 512
DEFAULT_LR = 0.01
WARMUP_FRACTION = 0.05
# The biased target uses the fixed bias b_i = BIAS_STRENGTH * linspace(-1, 1, N) / sqrt(d): of the order of the
# score gaps x_i^T y ~ 1/sqrt(d), so the bias changes the answer on a sizeable share of inputs.
BIAS_STRENGTH = 1.0

Target = Literal["nearest", "farthest", "biased"]
TARGETS: tuple[str, ...] = ("nearest", "farthest", "biased")
Distribution = Literal["auto", "orthonormal", "uniform"]
DISTRIBUTIONS: tuple[str, ...] = ("auto", "orthonormal", "uniform")


# ------------------------------------------------------------------------------------------------ validation


def _int_in(name: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ParameterError(name, f"must be an integer in [{low}, {high}], got {value!r}")
    return value


def _choice(name: str, value: Any, choices: Sequence[str]) -> str:
    if value not in choices:
        raise ParameterError(name, f"must be one of {', '.join(choices)}, got {value!r}")
    return str(value)


def _check_shape(d: Any, n_points: Any) -> tuple[int, int]:
    return _int_in("d", d, MIN_D, MAX_D), _int_in("n_points", n_points, MIN_POINTS, MAX_POINTS)


def _resolve_distribution(distribution: Any, d: int, n_points: int) -> str:
    distribution = _choice("distribution", distribution, DISTRIBUTIONS)
    if distribution == "auto":
        # The theory's D_N (orthonormal targets) exists only for N <= d.
        return "orthonormal" if n_points <= d else "uniform"
    if distribution == "orthonormal" and n_points > d:
        raise ParameterError("n_points", f"orthonormal targets need n_points <= d = {d}, got {n_points}")
    return distribution


# ------------------------------------------------------------------------------------------------ data


def sample_points(
    batch: int, d: int, n_points: int, distribution: str, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Targets X (batch, N, d) and sources y (batch, d), float64 on the CPU.

    "orthonormal": the first N columns of a Haar-random orthogonal matrix (the paper's D_N); "uniform": i.i.d.
    uniform on the sphere. y is uniform on the sphere and independent of X.
    """
    gauss = torch.randn(batch, d, n_points, generator=generator, dtype=torch.float64, device="cpu")
    if distribution == "orthonormal" and n_points <= 4:
        # Gram-Schmidt of Gaussian columns is the QR with a positive diagonal: the same Haar frame, cheaper.
        columns: list[torch.Tensor] = []
        for j in range(n_points):
            col = gauss[:, :, j]
            for prev in columns:
                col = col - (col * prev).sum(-1, keepdim=True) * prev
            columns.append(col / col.norm(dim=-1, keepdim=True))
        x = torch.stack(columns, dim=1)
    elif distribution == "orthonormal":
        q, r = torch.linalg.qr(gauss)
        # Fixing the signs of R's diagonal makes Q Haar-distributed.
        signs = torch.sign(torch.diagonal(r, dim1=-2, dim2=-1))
        signs = torch.where(signs == 0, torch.ones_like(signs), signs)
        x = (q * signs[:, None, :]).transpose(1, 2)
    else:
        x = gauss.transpose(1, 2)
        x = x / x.norm(dim=-1, keepdim=True)
    y = torch.randn(batch, d, generator=generator, dtype=torch.float64, device="cpu")
    y = y / y.norm(dim=-1, keepdim=True)
    return x.contiguous(), y


def target_bias(d: int, n_points: int) -> torch.Tensor:
    """The fixed per-position bias of the biased target, (N,) float64."""
    return BIAS_STRENGTH * torch.linspace(-1.0, 1.0, n_points, dtype=torch.float64) / math.sqrt(d)


def target_index(x: torch.Tensor, y: torch.Tensor, target: str) -> torch.Tensor:
    """Index of the correct target for each sample: (batch,)."""
    scores = torch.einsum("bnd,bd->bn", x, y)
    if target == "nearest":
        return scores.argmax(-1)
    if target == "farthest":
        return scores.argmin(-1)
    # argmin ||x_i - y||^2 - 2 b_i = argmax x_i^T y + b_i on the sphere (Fact 3's sign convention).
    return (scores + target_bias(x.shape[-1], x.shape[-2]).to(scores)).argmax(-1)


def target_points(x: torch.Tensor, y: torch.Tensor, target: str) -> torch.Tensor:
    index = target_index(x, y, target)
    return x[torch.arange(x.shape[0], device=x.device), index]


# ------------------------------------------------------------------------------------------------ reference lines


def mean_abs_inner_product(d: int) -> float:
    """E|x^T y| for x, y independent and uniform on S^{d-1}: Gamma(d/2) / (sqrt(pi) Gamma((d+1)/2)).

    (|x^T y| = |cos theta| with density proportional to sin^{d-2} theta; the ratio of Beta integrals gives it.)
    """
    return math.exp(math.lgamma(d / 2) - math.lgamma((d + 1) / 2)) / math.sqrt(math.pi)


def degree1_floor(d: int) -> float:
    """The degree-1 floor for N = 2 orthonormal targets: 1/2 (1 - d (E|x^T y|)^2).

    The error a layer reaches if it captures only the bilinear (degree-1 harmonic) part of the sign target;
    0.161 / 0.172 / 0.177 / 0.179 at d = 8 / 16 / 32 / 64, tending to 1/2 (1 - 2/pi).
    """
    d = _int_in("d", d, 1, 1_000_000)
    m = mean_abs_inner_product(d)
    return 0.5 * (1.0 - d * m * m)


def midpoint_error(n_points: int = 2) -> float:
    """Error of predicting the mean of N orthonormal targets: 1 - 1/N (0.5 for the paper's N = 2)."""
    n_points = _int_in("n_points", n_points, 1, 1_000_000)
    return 1.0 - 1.0 / n_points


def parameter_count(d: int, rank: int, heads: int) -> int:
    """The paper's size of a layer, r * d * H (one d x r projection per head; H = d / r gives d^2).

    The paper keeps this fixed at d^2, d^2.5 or d^3 along each line of its Fig. 1.
    """
    d = _int_in("d", d, 1, 1_000_000)
    rank = _int_in("rank", rank, 1, d)
    heads = _int_in("heads", heads, 1, 10**9)
    return rank * d * heads


def trained_parameter_count(d: int, rank: int, heads: int, target: str = "nearest", n_points: int = 2) -> int:
    """Trainable parameters of the layer trained here: H (2 d r + d^2) + 1 (+ H N position biases if biased)."""
    d = _int_in("d", d, 1, 1_000_000)
    rank = _int_in("rank", rank, 1, d)
    heads = _int_in("heads", heads, 1, 10**9)
    target = _choice("target", target, TARGETS)
    extra = heads * n_points if target == "biased" else 0
    return heads * (2 * d * rank + d * d) + 1 + extra


def heads_for_budget(d: int, rank: int, exponent: float) -> int:
    """Heads H with r d H = d^(1 + exponent) (the paper's equal-parameter lines), at least 1."""
    return max(1, round(d ** (1.0 + exponent) / (rank * d)))


def theorem2_high_accuracy_shape(d: float, rank: float) -> float:
    """Shape of Theorem 2(i)'s head bound, 2^(d - (r+1) log2(2d/r)), with its unknown constants set to 1."""
    return 2.0 ** (d - (rank + 1) * math.log2(2 * d / rank))


def theorem2_high_dimension_shape(d: float, rank: float, eps: float) -> float:
    """Shape of Theorem 2(ii)'s head bound, (d/r)^(1/eps), with its unknown constants set to 1."""
    if not 0 < eps:
        raise ParameterError("eps", f"must be > 0, got {eps!r}")
    return (d / rank) ** (1.0 / eps)


def theorem4_shape(d: float, rank: float) -> float:
    """Shape of Theorem 4's threshold exp(d - r) / d^2 (biased target), constants set to 1."""
    return math.exp(d - rank) / d**2


# ------------------------------------------------------------------------------------------------ Fact 1


@dataclass(frozen=True)
class ConstructionResult:
    """Fact 1's full-rank head V = I, K Q^T = c I on fresh samples."""

    error: float
    entropy: float  # mean attention entropy, nats
    c: float


def full_rank_construction(
    d: int,
    n_points: int,
    c: float,
    *,
    samples: int = 20_000,
    seed: int = 0,
    distribution: Distribution = "uniform",
    target: Target = "nearest",
) -> float:
    """Error of Fact 1's single full-rank head, V = I and K Q^T = c I (c = inf: hardmax). No training.

    The hardmax head returns the correct point exactly for any inputs on the sphere, so its error is 0;
    the softmax head's error falls roughly like 1/c. Fact 1 draws the points i.i.d. uniform ("uniform").
    """
    return construction(d, n_points, c, samples=samples, seed=seed, distribution=distribution, target=target).error


def construction(
    d: int,
    n_points: int,
    c: float,
    *,
    samples: int = 20_000,
    seed: int = 0,
    distribution: Distribution = "uniform",
    target: Target = "nearest",
) -> ConstructionResult:
    """Fact 1's head with its error and mean attention entropy (see ``full_rank_construction``)."""
    d, n_points = _check_shape(d, n_points)
    samples = _int_in("samples", samples, 1, MAX_CONSTRUCTION_SAMPLES)
    target_name = _choice("target", target, TARGETS)
    if isinstance(c, bool) or not isinstance(c, (int, float)) or math.isnan(c) or c < 0:
        raise ParameterError("c", f"must be a number >= 0 (inverse temperature; inf for hardmax), got {c!r}")
    dist = _resolve_distribution(distribution, d, n_points)
    generator = torch.Generator().manual_seed(int(seed))
    x, y = sample_points(samples, d, n_points, dist, generator)
    truth = target_points(x, y, target_name)
    scores = torch.einsum("bnd,bd->bn", x, y)
    if target_name == "farthest":
        scores = -scores  # K Q^T = -c I
    elif target_name == "biased":
        scores = scores + target_bias(d, n_points)
    if math.isinf(c):
        weights = torch.nn.functional.one_hot(scores.argmax(-1), n_points).to(x.dtype)
    else:
        weights = torch.softmax(c * scores, dim=-1)
    output = torch.einsum("bn,bnd->bd", weights, x)
    error = float(((output - truth) ** 2).sum(-1).mean())
    logw = torch.log(weights.clamp_min(1e-300))
    entropy = float(-(torch.where(weights > 0, weights * logw, torch.zeros_like(weights))).sum(-1).mean())
    return ConstructionResult(error=error, entropy=entropy, c=float(c))


def construction_sweep(
    d: int,
    n_points: int,
    cs: Sequence[float],
    *,
    samples: int = 20_000,
    seed: int = 0,
    distribution: Distribution = "uniform",
    target: Target = "nearest",
) -> list[ConstructionResult]:
    """``construction`` at every c (same samples for every c, so the curve is smooth)."""
    out = []
    for c in cs:
        check()  # the job's ambient token
        out.append(construction(d, n_points, c, samples=samples, seed=seed, distribution=distribution, target=target))
    return out


# ------------------------------------------------------------------------------------------------ training


class RankHeadsLayer(torch.nn.Module):
    """sum_h V_h X softmax(c X^T K_h Q_h^T y + b_h), with rank-r Q_h, K_h and full V_h."""

    def __init__(self, d: int, rank: int, heads: int, n_points: int, positional_bias: bool, generator: torch.Generator):
        super().__init__()
        # Scores x^T K Q^T y then have unit-order spread at initialisation (entries ~ r^(-1/4)).
        std = rank**-0.25
        self.q = torch.nn.Parameter(
            torch.randn(heads, d, rank, generator=generator, dtype=torch.float64, device="cpu") * std
        )
        self.k = torch.nn.Parameter(
            torch.randn(heads, d, rank, generator=generator, dtype=torch.float64, device="cpu") * std
        )
        # V_h = I / H: the layer starts as the average of its heads' attention outputs.
        self.v = torch.nn.Parameter(torch.eye(d, dtype=torch.float64).repeat(heads, 1, 1) / heads)
        self.log_c = torch.nn.Parameter(torch.zeros((), dtype=torch.float64))
        self.bias = torch.nn.Parameter(torch.zeros(heads, n_points, dtype=torch.float64)) if positional_bias else None

    def attention(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Per-head attention weights (batch, H, N)."""
        batch, n_points, d = x.shape
        heads, _, rank = self.k.shape
        # Flat GEMMs over all heads at once; per-head batched products of tiny matrices are far slower on a CPU.
        xk = (x.reshape(batch * n_points, d) @ self.k.permute(1, 0, 2).reshape(d, heads * rank)).reshape(
            batch, n_points, heads, rank
        )
        qy = (y @ self.q.permute(1, 0, 2).reshape(d, heads * rank)).reshape(batch, 1, heads, rank)
        scores = torch.exp(self.log_c) * (xk * qy).sum(-1).transpose(1, 2)  # (batch, H, N)
        if self.bias is not None:
            scores = scores + self.bias
        return torch.softmax(scores, dim=-1)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        weights = self.attention(x, y)
        heads, d, _ = self.v.shape
        mixed = weights @ x  # (batch, H, d)
        # sum_h V_h mixed_h as one GEMM: (batch, H d) @ (H d, d).
        return mixed.reshape(-1, heads * d) @ self.v.transpose(1, 2).reshape(heads * d, d)


@dataclass
class TrainResult:
    """One trained layer.

    error: final relative test error on the held-out set; curve: test error at each step of curve_steps;
    train_loss: training loss of every step.
    """

    error: float
    curve: list[float]
    curve_steps: list[int]
    train_loss: list[float]
    seconds: float
    device: str
    temperature: float  # the learned inverse temperature c
    d: int
    n_points: int
    rank: int
    heads: int
    steps: int
    seed: int
    target: str
    distribution: str
    parameters: int
    # For r = d: the angle in degrees between each head's K Q^T and I, and ||K Q^T||_F / sqrt(d) (with c folded in).
    kq_angle_deg: list[float] = field(default_factory=list)
    kq_norm: list[float] = field(default_factory=list)

    @property
    def best_error(self) -> float:
        return min(self.curve) if self.curve else self.error


ProgressFn = Callable[[int, int], None]


def _lr_factor(step: int, steps: int) -> float:
    warmup = max(1, int(round(WARMUP_FRACTION * steps)))
    if step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return 0.5 * (1.0 + math.cos(math.pi * progress))


def _test_error(model: RankHeadsLayer, x: torch.Tensor, y: torch.Tensor, truth: torch.Tensor, chunk: int) -> float:
    total = 0.0
    with torch.no_grad():
        for start in range(0, x.shape[0], chunk):
            out = model(x[start : start + chunk], y[start : start + chunk])
            total += float(((out - truth[start : start + chunk]) ** 2).sum())
    return total / x.shape[0]


def check_train_args(
    d: Any, n_points: Any, rank: Any, heads: Any, steps: Any, target: Any, distribution: Any, batch: Any
) -> tuple[int, int, int, int, int, str, str, int]:
    d, n_points = _check_shape(d, n_points)
    rank = _int_in("rank", rank, 1, d)
    heads = _int_in("heads", heads, 1, MAX_HEADS)
    steps = _int_in("steps", steps, 1, MAX_STEPS)
    target = _choice("target", target, TARGETS)
    dist = _resolve_distribution(distribution, d, n_points)
    batch = _int_in("batch", batch, 1, MAX_BATCH)
    return d, n_points, rank, heads, steps, target, dist, batch


def train(
    d: int,
    n_points: int,
    rank: int,
    heads: int,
    steps: int,
    seed: int = 0,
    device: str | torch.device | None = None,
    target: Target = "nearest",
    *,
    distribution: Distribution = "auto",
    batch: int = DEFAULT_BATCH,
    lr: float = DEFAULT_LR,
    eval_every: int | None = None,
    test_samples: int = TEST_SAMPLES,
    progress: ProgressFn | None = None,
    cancel: CancelToken | None = None,
) -> TrainResult:
    """Train one layer of ``heads`` rank-``rank`` heads on the nearest-neighbour target.

    AdamW (betas 0.9, 0.95, no weight decay), 5% linear warm-up then cosine decay to 0, a fresh batch every step,
    float32 on any device (on a CPU with CPU_TRAIN_THREADS intra-op threads). The held-out set (``test_samples``
    points, fixed seed) is the same for every training seed. ``distribution="auto"`` uses orthonormal targets (the
    theory's D_N) when N <= d and i.i.d. uniform points otherwise. ``progress(step, steps)`` is called at each
    evaluation. ``.curve`` holds the held-out error every ``eval_every`` steps (20 evaluations by default).
    ``cancel`` (else the thread's ambient token) is checked before every step.
    """
    d, n_points, rank, heads, steps, target_name, dist, batch = check_train_args(
        d, n_points, rank, heads, steps, target, distribution, batch
    )
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not 0 < lr <= 1:
        raise ParameterError("lr", f"must be a number in (0, 1], got {lr!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        raise ParameterError("seed", f"must be an integer in [0, 2^63 - 1], got {seed!r}")
    test_samples = _int_in("test_samples", test_samples, 1, 65_536)
    if eval_every is None:
        eval_every = max(1, steps // EVALUATIONS)
    eval_every = _int_in("eval_every", eval_every, 1, MAX_STEPS)
    dev = resolve_device(device or "auto")
    with cpu_threads(CPU_TRAIN_THREADS, dev):
        return _train(
            d,
            n_points,
            rank,
            heads,
            steps,
            seed,
            dev,
            target_name,
            dist,
            batch,
            float(lr),
            eval_every,
            test_samples,
            progress,
            cancel,
        )


def _train(
    d: int,
    n_points: int,
    rank: int,
    heads: int,
    steps: int,
    seed: int,
    dev: torch.device,
    target: str,
    dist: str,
    batch: int,
    lr: float,
    eval_every: int,
    test_samples: int,
    progress: ProgressFn | None,
    cancel: CancelToken | None,
) -> TrainResult:
    dtype = torch.float32

    test_x, test_y = sample_points(test_samples, d, n_points, dist, torch.Generator().manual_seed(TEST_SEED))
    test_truth = target_points(test_x, test_y, target)
    test_x, test_y, test_truth = (t.to(dev, dtype) for t in (test_x, test_y, test_truth))

    # Two independent streams per seed (initialisation, batches); the held-out set has its own fixed seed.
    init_gen = torch.Generator().manual_seed((seed * 2 + 1) % 2**63)
    data_gen = torch.Generator().manual_seed((seed * 2 + 2) % 2**63)
    model = RankHeadsLayer(d, rank, heads, n_points, target == "biased", init_gen).to(dev, dtype)
    optimiser = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimiser, lambda s: _lr_factor(s, steps))
    chunk = max(256, min(test_samples, 2**22 // max(1, heads * d)))

    curve: list[float] = []
    curve_steps: list[int] = []
    losses: list[float] = []
    synchronize(dev)
    start = time.perf_counter()
    for step in range(steps):
        check(cancel)
        x, y = sample_points(batch, d, n_points, dist, data_gen)
        truth = target_points(x, y, target)
        x, y, truth = x.to(dev, dtype), y.to(dev, dtype), truth.to(dev, dtype)
        loss = ((model(x, y) - truth) ** 2).sum(-1).mean()
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        optimiser.step()
        scheduler.step()
        losses.append(float(loss.detach()))
        if (step + 1) % eval_every == 0 or step + 1 == steps:
            curve.append(_test_error(model, test_x, test_y, test_truth, chunk))
            curve_steps.append(step + 1)
            if progress is not None:
                progress(step + 1, steps)
    synchronize(dev)
    seconds = time.perf_counter() - start

    angles: list[float] = []
    norms: list[float] = []
    if rank == d:
        with torch.no_grad():
            kq = torch.exp(model.log_c) * model.k @ model.q.transpose(1, 2)  # (H, d, d)
            eye = torch.eye(d, dtype=kq.dtype, device=kq.device)
            cos = (kq * eye).sum((1, 2)) / (kq.norm(dim=(1, 2)) * math.sqrt(d)).clamp_min(1e-30)
            angles = [math.degrees(math.acos(max(-1.0, min(1.0, float(v))))) for v in cos]
            norms = [float(v) / math.sqrt(d) for v in kq.norm(dim=(1, 2))]
    return TrainResult(
        error=curve[-1],
        curve=curve,
        curve_steps=curve_steps,
        train_loss=losses,
        seconds=seconds,
        device=describe(dev),
        temperature=float(torch.exp(model.log_c).detach()),
        d=d,
        n_points=n_points,
        rank=rank,
        heads=heads,
        steps=steps,
        seed=seed,
        target=target,
        distribution=dist,
        parameters=trained_parameter_count(d, rank, heads, target, n_points),
        kq_angle_deg=angles,
        kq_norm=norms,
    )


def train_best_of(
    d: int,
    n_points: int,
    rank: int,
    heads: int,
    steps: int,
    seeds: int = 1,
    device: str | torch.device | None = None,
    target: Target = "nearest",
    *,
    first_seed: int = 0,
    **kwargs: Any,
) -> TrainResult:
    """Best final error over seeds first_seed .. first_seed + seeds - 1 (the paper reports the best of 5 runs)."""
    seeds = _int_in("seeds", seeds, 1, 16)
    results = [
        train(d, n_points, rank, heads, steps, seed=first_seed + s, device=device, target=target, **kwargs)
        for s in range(seeds)
    ]
    return min(results, key=lambda r: r.error)


# ------------------------------------------------------------------------------------------------ grids


def grid_work(
    d: int, cells: Sequence[tuple[int, int]], steps: int, batch: int = DEFAULT_BATCH, seeds: int = 1
) -> float:
    """Multiply-adds of the head-value products over a grid of (rank, heads) cells: the dominant training cost."""
    return float(sum(heads * (d * d + 2 * d * rank) * batch * steps * seeds for rank, heads in cells))


def estimate_seconds(
    d: int,
    cells: Sequence[tuple[int, int]],
    steps: int,
    batch: int = DEFAULT_BATCH,
    seeds: int = 1,
    device: str = "cpu",
) -> float:
    """Rough wall time of a grid: a cost per run (set-up and the final evaluation), a per-step overhead (sampling,
    Python) and its multiply-adds.

    Calibrated on the quiet 2-core reference machine with the threads of one compute slot: the default grid (9 cells,
    d = 16, one seed) took 13.1-13.6 s at 500 steps, 25.3 s at 1000 and 4.2 s at 100, and with 5 seeds at 20 steps
    14.3 s (45 runs of 20 steps: the cost per run dominates; without it the estimate was 2.7 s). A loaded server takes
    longer (39-51 s seen for 500 steps while other work shared the cores). A GPU figure is a guess.
    """
    per_run, per_step, per_mac = (0.25, 1.7e-3, 0.47e-9) if device == "cpu" else (0.1, 1.5e-3, 1e-11)
    runs = len(cells) * seeds
    return (
        runs * per_run
        + runs * steps * per_step * batch / DEFAULT_BATCH
        + grid_work(d, cells, steps, batch, seeds) * per_mac
    )


def check_grid(
    d: int,
    n_points: int,
    ranks: Sequence[int],
    heads: Sequence[int],
    steps: int,
    *,
    batch: int = DEFAULT_BATCH,
    seeds: int = 1,
    max_cells: int | None = None,
    max_work: float | None = None,
) -> list[tuple[int, int]]:
    """Validate a (rank x heads) grid and return its cells; refuse one too large, naming the limit.

    The limits default to the module's MAX_GRID_CELLS and MAX_GRID_WORK, read at call time (so a deployment can
    change them).
    """
    max_cells = MAX_GRID_CELLS if max_cells is None else max_cells
    max_work = MAX_GRID_WORK if max_work is None else max_work
    d, n_points = _check_shape(d, n_points)
    steps = _int_in("steps", steps, 1, MAX_STEPS)
    if not ranks or not heads:
        raise ParameterError("ranks", "the grid needs at least one rank and one head count")
    for r in ranks:
        _int_in("ranks", r, 1, d)
    for h in heads:
        _int_in("heads", h, 1, MAX_HEADS)
    cells = [(int(r), int(h)) for r in ranks for h in heads]
    if len(cells) * seeds > max_cells:
        raise ParameterError(
            "grid", f"has {len(cells)} cells x {seeds} seeds = {len(cells) * seeds} runs; the limit is {max_cells}"
        )
    work = grid_work(d, cells, steps, batch, seeds)
    if work > max_work:
        raise ParameterError(
            "grid",
            f"needs about {work:.2g} multiply-adds (sum of heads * d^2 * batch * steps); the limit is {max_work:.2g}. "
            "Use fewer steps, heads or ranks.",
        )
    return cells


def train_grid(
    d: int,
    n_points: int,
    ranks: Sequence[int],
    heads: Sequence[int],
    steps: int,
    *,
    seeds: int = 1,
    device: str | torch.device | None = None,
    target: Target = "nearest",
    progress: Callable[[int, int, tuple[int, int]], None] | None = None,
    **kwargs: Any,
) -> dict[tuple[int, int], TrainResult]:
    """Train every (rank, heads) cell (best of ``seeds``); ``progress(done, total, cell)`` after each cell."""
    cells = check_grid(d, n_points, ranks, heads, steps, seeds=seeds, batch=kwargs.get("batch", DEFAULT_BATCH))
    out: dict[tuple[int, int], TrainResult] = {}
    for index, (rank, h) in enumerate(cells):
        check(kwargs.get("cancel"))
        out[(rank, h)] = train_best_of(d, n_points, rank, h, steps, seeds=seeds, device=device, target=target, **kwargs)
        if progress is not None:
            progress(index + 1, len(cells), (rank, h))
    return out


# ------------------------------------------------------------------------------------------------ paper values

# Read from the authors' figure images (github.com/NoahAmsel/attention-formers, paper_experiments/imgs), via the
# project notes; about +-10-15% on log axes. Fig. 1, L = 1, d = 64, N = 16, farthest neighbour, self-attention:
# MSE by rank r for parameters per layer r d H = d^2, d^2.5, d^3.
PAPER_FIG1_L1: dict[str, dict[int, float]] = {
    "d^2": {1: 0.87, 2: 0.86, 4: 0.85, 8: 0.83, 16: 0.79, 32: 0.69, 64: 0.015},
    "d^2.5": {1: 0.82, 2: 0.82, 4: 0.78, 8: 0.72, 16: 0.61, 32: 0.43, 64: 0.007},
    "d^3": {1: 0.65, 2: 0.61, 4: 0.58, 8: 0.57, 16: 0.46, 32: 0.31, 64: 0.0019},
}
# Fig. 4, d = 64, L = 2, H = d^2 / r: MSE by context length N for each rank.
PAPER_FIG4: dict[int, dict[int, float]] = {
    1: {4: 0.025, 16: 0.63, 64: 0.81, 256: 1.165},
    8: {4: 0.012, 16: 0.415, 64: 0.695, 256: 0.81},
    16: {4: 0.004, 16: 0.33, 64: 0.60, 256: 0.72},
    32: {4: 0.006, 16: 0.23, 64: 0.435, 256: 0.545},
    64: {4: 0.006, 16: 0.005, 64: 0.01, 256: 0.04},
}
