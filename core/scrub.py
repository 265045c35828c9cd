"""Temperature scrubbing: every view a page needs at a grid of temperatures, from one batched call per method.

The browser then animates through the grid without asking the server again. The maps are block-reduced on the
engine side so the payload stays bounded: ``grid × (1 + 2·methods) × side²`` float32 numbers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from core import metrics, registry
from core.approximation import approximate, at_least_float32
from core.device import chunk_elements
from core.errors import ParameterError

MAX_N = 2048  # n x n per temperature is materialised (in chunks) to measure the error maps
MAX_GRID = 32
MAX_SIDE = 128


@dataclass
class ScrubViews:
    """Views of one head at every temperature of the grid (index 0 = the first tau)."""

    taus: np.ndarray  # (T,)
    entropy: np.ndarray  # (T,) mean row entropy of the exact attention, nats
    exact: np.ndarray  # (T, s, s) block maximum of the exact attention
    attention: dict[str, np.ndarray] = field(default_factory=dict)  # method -> (T, s, s) block maximum
    error_map: dict[str, np.ndarray] = field(default_factory=dict)  # method -> (T, s, s) signed largest |error|
    error: dict[str, np.ndarray] = field(default_factory=dict)  # method -> (T,) relative Frobenius error
    factor: int = 1  # block size of the reduction

    def payload_bytes(self) -> int:
        """Bytes of the numbers sent to the browser (float32)."""
        arrays = [self.exact, *self.attention.values(), *self.error_map.values()]
        return int(sum(a.size for a in arrays) * 4 + (len(self.error) + 2) * self.taus.size * 8)


def _block_max(a: torch.Tensor, factor: int) -> torch.Tensor:
    if factor == 1:
        return a
    return F.max_pool2d(a.unsqueeze(1), factor, ceil_mode=True).squeeze(1)


def _ordered(a: torch.Tensor, order: torch.Tensor | None) -> torch.Tensor:
    """(..., n, n) with rows and columns in display ``order`` (None: position order)."""
    return a if order is None else a[..., order, :][..., order]


def _display_order(order: Sequence[int] | torch.Tensor | None, n: int, device: torch.device) -> torch.Tensor | None:
    if order is None:
        return None
    index = torch.as_tensor(np.asarray(order), dtype=torch.long, device=device)
    if index.shape != (n,) or not torch.equal(torch.sort(index).values, torch.arange(n, device=device)):
        raise ParameterError("order", f"must be a permutation of the {n} positions")
    return index


def _block_absmax(a: torch.Tensor, factor: int) -> torch.Tensor:
    """The entry of largest magnitude in each block, with its sign."""
    if factor == 1:
        return a
    high = _block_max(a, factor)
    low = -_block_max(-a, factor)
    return torch.where(high >= -low, high, low)


def temperature_grid(taus: Sequence[float] | None, betas: Sequence[float] | None) -> tuple[list[float], list[float]]:
    """(temperatures, inverse temperatures) of a grid given as exactly one of ``taus`` or ``betas`` (β = 1/τ)."""
    if (taus is None) == (betas is None):
        raise ParameterError("taus", "give exactly one of taus or betas")
    name, given = ("taus", taus) if taus is not None else ("betas", betas)
    assert given is not None
    if not 1 <= len(given) <= MAX_GRID:
        raise ParameterError(name, f"needs 1 to {MAX_GRID} temperatures; got {len(given)}")
    values = [float(x) for x in given]
    if not all(math.isfinite(x) and x > 0 for x in values):
        what = "temperature" if taus is not None else "inverse temperature"
        raise ParameterError(name, f"every {what} must be finite and > 0")
    inverse = [1.0 / x for x in values]
    return (values, inverse) if taus is not None else (inverse, values)


def temperature_views(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    methods: Sequence[str],
    taus: Sequence[float] | None = None,
    *,
    betas: Sequence[float] | None = None,
    params: Mapping[str, Mapping[str, Any]] | None = None,
    seed: int = 0,
    side: int = 64,
    order: Sequence[int] | torch.Tensor | None = None,
) -> ScrubViews:
    """Exact attention and each method at every tau (logits = q.k / tau), for one head: q, k, v are (n, d).

    Each method runs once over the whole grid with a tensor ``scale`` (batch-independent, so every frame equals
    a single call at that temperature). ``side`` caps the side of every map sent to the browser. ``order``: a
    permutation of the positions the maps are drawn in (e.g. by cluster), applied before the block reduction;
    display only, the methods and errors use the real positions.
    """
    if q.dim() != 2:
        raise ParameterError("q", f"must be one head, shape (n, d); got {tuple(q.shape)}")
    n = int(q.shape[0])
    if n > MAX_N:
        raise ParameterError("n", f"the temperature scrubber works up to n = {MAX_N}; got {n}")
    tau_values, beta_values = temperature_grid(taus, betas)
    if not 8 <= side <= MAX_SIDE:
        raise ParameterError("side", f"must be in [8, {MAX_SIDE}]; got {side}")
    names = list(dict.fromkeys(methods))
    for name in names:
        registry.get(name)
    overrides = params or {}
    factor = max(1, math.ceil(n / side))
    shown = _display_order(order, n, q.device)
    per_chunk = max(1, min(len(tau_values), chunk_elements(q.device) // (n * n)))

    exact_maps, entropies = [], []
    attention: dict[str, list[torch.Tensor]] = {name: [] for name in names}
    error_maps: dict[str, list[torch.Tensor]] = {name: [] for name in names}
    errors: dict[str, list[torch.Tensor]] = {name: [] for name in names}
    wide = at_least_float32(q.dtype)  # half-precision inputs: a float32 reference
    logits = q.to(wide) @ k.to(wide).transpose(-1, -2)
    for start in range(0, len(tau_values), per_chunk):
        chunk = tau_values[start : start + per_chunk]
        beta = torch.tensor(beta_values[start : start + per_chunk], dtype=torch.float64)
        exact = torch.softmax(beta.to(logits.dtype)[:, None, None] * logits, dim=-1)
        exact_maps.append(_block_max(_ordered(exact, shown), factor))
        entropies.append(metrics.mean_row_entropy(exact))
        stack = [x.unsqueeze(0).expand(len(chunk), *x.shape) for x in (q, k, v)]
        for name in names:
            result = approximate(
                name, *stack, scale=beta.to(wide).to(q.device), seed=seed, **dict(overrides.get(name, {}))
            )
            approx = result.attention().to(exact.dtype)
            attention[name].append(_block_max(_ordered(approx, shown), factor))
            error_maps[name].append(_block_absmax(_ordered(approx - exact, shown), factor))
            errors[name].append(metrics.relative_frobenius_error(approx, exact))

    def numpy(parts: list[torch.Tensor]) -> np.ndarray:
        return torch.cat(parts).float().cpu().numpy()

    return ScrubViews(
        taus=np.asarray(tau_values),
        entropy=torch.cat(entropies).double().cpu().numpy(),
        exact=numpy(exact_maps),
        attention={name: numpy(parts) for name, parts in attention.items()},
        error_map={name: numpy(parts) for name, parts in error_maps.items()},
        error={name: torch.cat(parts).double().cpu().numpy() for name, parts in errors.items()},
        factor=factor,
    )


SPLIT_PARTS = ("sparse", "low_rank", "attention", "naive_sum")  # Scatterbrain's S, L, S + L, and the naive sum


@dataclass
class SplitViews:
    """Scatterbrain's split of one head at every temperature of the grid (index 0 = the first tau)."""

    taus: np.ndarray  # (T,)
    entropy: np.ndarray  # (T,) mean row entropy of the exact attention, nats
    exact: np.ndarray  # (T, s, s) block maximum of the exact attention
    parts: dict[str, np.ndarray]  # SPLIT_PARTS -> (T, s, s); "sparse" keeps the signed largest |entry| per block
    error: dict[str, np.ndarray]  # "attention" (S + L) and "naive_sum" -> (T,) relative Frobenius error
    support_share: np.ndarray  # (T,) share of the n² pairs in Ω
    double_count: np.ndarray  # (T,) mean over Ω of (exp(q·k/τ) + φ(q)·φ(k)) / exp(q·k/τ), before normalising
    factor: int = 1

    def payload_bytes(self) -> int:
        arrays = [self.exact, *self.parts.values()]
        return int(sum(a.size for a in arrays) * 4 + 5 * self.taus.size * 8)


def split_views(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    taus: Sequence[float] | None = None,
    *,
    betas: Sequence[float] | None = None,
    params: Mapping[str, Any] | None = None,
    seed: int = 0,
    side: int = 64,
    order: Sequence[int] | torch.Tensor | None = None,
) -> SplitViews:
    """Scatterbrain's S, L, S + L and naive sum next to exact at every tau, for one head (q, k, v: (n, d)).

    One batched call with a tensor ``scale``; every frame equals a single call at that temperature. ``order``: the
    display order of the positions, as in ``temperature_views``.
    """
    if q.dim() != 2:
        raise ParameterError("q", f"must be one head, shape (n, d); got {tuple(q.shape)}")
    n = int(q.shape[0])
    if n > MAX_N:
        raise ParameterError("n", f"the temperature scrubber works up to n = {MAX_N}; got {n}")
    tau_values, beta_values = temperature_grid(taus, betas)
    if not 8 <= side <= MAX_SIDE:
        raise ParameterError("side", f"must be in [8, {MAX_SIDE}]; got {side}")
    factor = max(1, math.ceil(n / side))
    shown = _display_order(order, n, q.device)
    # Several n x n parts per temperature are held at once: a smaller chunk than the comparison scrubber's.
    per_chunk = max(1, min(len(tau_values), chunk_elements(q.device) // (4 * n * n)))
    wide = at_least_float32(q.dtype)  # half-precision inputs: a float32 reference
    logits = (q.to(wide) @ k.to(wide).transpose(-1, -2)).double()

    exact_maps, entropies, shares, doubles = [], [], [], []
    maps: dict[str, list[torch.Tensor]] = {name: [] for name in SPLIT_PARTS}
    errors: dict[str, list[torch.Tensor]] = {"attention": [], "naive_sum": []}
    for start in range(0, len(tau_values), per_chunk):
        chunk = tau_values[start : start + per_chunk]
        beta = torch.tensor(beta_values[start : start + per_chunk], dtype=torch.float64)
        exact = torch.softmax(beta.to(logits.dtype)[:, None, None] * logits, dim=-1).to(wide)
        exact_maps.append(_block_max(_ordered(exact, shown), factor))
        entropies.append(metrics.mean_row_entropy(exact))
        stack = [x.unsqueeze(0).expand(len(chunk), *x.shape) for x in (q, k, v)]
        result = approximate("scatterbrain", *stack, scale=beta.to(wide).to(q.device), seed=seed, **dict(params or {}))
        for name in SPLIT_PARTS:
            value = result.attention() if name == "attention" else result.parts[name]
            value = value.to(exact.dtype)
            drawn = _ordered(value, shown)
            maps[name].append(_block_absmax(drawn, factor) if name == "sparse" else _block_max(drawn, factor))
            if name in errors:
                errors[name].append(metrics.relative_frobenius_error(value, exact))
        support = result.parts["support"].bool()
        shares.append(support.double().mean(dim=(-2, -1)))
        raw = result.parts["unnormalized_low_rank"].double()
        scaled = beta.to(logits.device)[:, None, None] * logits
        with torch.no_grad():
            ratio = 1.0 + raw * torch.exp(-scaled)  # (exp(s) + L) / exp(s)
        ratio = torch.where(support & torch.isfinite(ratio), ratio, torch.nan)
        doubles.append(torch.nanmean(ratio.flatten(1), dim=1))

    def numpy(parts: list[torch.Tensor]) -> np.ndarray:
        return torch.cat(parts).float().cpu().numpy()

    return SplitViews(
        taus=np.asarray(tau_values),
        entropy=torch.cat(entropies).double().cpu().numpy(),
        exact=numpy(exact_maps),
        parts={name: numpy(values) for name, values in maps.items()},
        error={name: torch.cat(values).double().cpu().numpy() for name, values in errors.items()},
        support_share=torch.cat(shares).cpu().numpy(),
        double_count=torch.cat(doubles).cpu().numpy(),
        factor=factor,
    )
