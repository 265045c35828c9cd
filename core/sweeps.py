"""Sweeps: error against entropy over temperatures, and the (beta, sigma) regime map.

Temperatures are batched: the input is repeated along a new leading dimension and every method runs
once on the whole stack with a per-element inverse temperature, so exact attention is computed once per
chunk of temperatures and random features are drawn once (the same draw at every temperature).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from core import data as data_module
from core import metrics, registry
from core.approximation import approximate, at_least_float32
from core.approximators.exact import causal_mask
from core.budget import budget_params
from core.cancel import CancelToken, check
from core.device import GPU_CHUNK_ELEMENTS, chunk_elements
from core.errors import ParameterError

Progress = Callable[[float, str], None]
# Temperatures per batched chunk are limited so that chunk * batch * n^2 stays under core.device.chunk_elements
# (smaller on a CPU); this, the largest of those, bounds the memory estimates of core.limits on every device.
CHUNK_ELEMENTS = GPU_CHUNK_ELEMENTS
MAX_POINTS = 200
MAX_CELLS = 400


@dataclass
class SweepResult:
    """Errors of several methods over a range of inverse temperatures (averaged over heads)."""

    betas: np.ndarray  # (T,)
    entropy: np.ndarray  # (T,) mean row entropy of exact attention, nats
    attention_error: dict[str, np.ndarray]  # method -> (T,) relative Frobenius error of the attention matrix
    output_error: dict[str, np.ndarray]  # method -> (T,) relative error of the output
    params: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def taus(self) -> np.ndarray:
        return 1.0 / self.betas

    def crossover(self, first: str, second: str, axis: str = "entropy") -> float | None:
        """Entropy (or beta, with axis="beta") at which first's error crosses second's (linear interpolation),
        or None."""
        if axis not in ("entropy", "beta"):
            raise ParameterError("axis", f"must be 'entropy' or 'beta', got {axis!r}")
        diff = self.attention_error[first] - self.attention_error[second]
        values = self.entropy if axis == "entropy" else self.betas
        order = np.argsort(values)
        x, y = values[order], diff[order]
        for i in range(len(x) - 1):
            if y[i] == 0:
                return float(x[i])
            if y[i] * y[i + 1] < 0:
                return float(x[i] + (x[i + 1] - x[i]) * (-y[i]) / (y[i + 1] - y[i]))
        return None

    def rows(self) -> list[dict[str, Any]]:
        """Tidy rows (one per method and temperature) for tables and CSV."""
        out = []
        for name, errors in self.attention_error.items():
            for t, beta in enumerate(self.betas):
                out.append(
                    {
                        "method": name,
                        "beta": float(beta),
                        "tau": float(1 / beta) if beta > 0 else math.inf,
                        "entropy": float(self.entropy[t]),
                        "attention_error": float(errors[t]),
                        "output_error": float(self.output_error[name][t]),
                    }
                )
        return out


def _as_betas(taus: Sequence[float] | None, betas: Sequence[float] | None) -> np.ndarray:
    if (taus is None) == (betas is None):
        raise ParameterError("taus", "give exactly one of taus or betas")
    values = np.asarray(taus if taus is not None else betas, dtype=float).reshape(-1)
    name = "taus" if taus is not None else "betas"
    if values.size == 0 or values.size > MAX_POINTS:
        raise ParameterError(name, f"must hold between 1 and {MAX_POINTS} values, got {values.size}")
    if not np.all(np.isfinite(values)) or np.any(values <= 0):
        raise ParameterError(name, "every value must be a finite number > 0")
    return 1.0 / values if taus is not None else values


def error_vs_entropy(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    methods: Sequence[str],
    *,
    taus: Sequence[float] | None = None,
    betas: Sequence[float] | None = None,
    fraction: float = 1 / 8,
    seed: int = 0,
    method_params: Mapping[str, Mapping[str, Any]] | None = None,
    progress: Progress | None = None,
    cancel: CancelToken | None = None,
    causal: bool = False,
) -> SweepResult:
    """Each method's error against exact attention at every temperature, at an equal memory budget.

    q, k, v: (..., n, d). Parameters come from ``budget_params(method, n, d, fraction)``, overridden by
    ``method_params[method]``. logits = beta q.k with beta = 1 / tau. ``causal``: every method in its causal form,
    against causally masked exact attention (a method without one is refused, naming it).
    """
    beta_values = _as_betas(taus, betas)
    names = list(dict.fromkeys(methods))
    for name in names:
        registry.get(name)
    if causal:
        refused = [name for name in names if not registry.get(name).causal_form]
        if refused:
            raise ParameterError(
                "causal",
                f"{', '.join(refused)} ha{'s' if len(refused) == 1 else 've'} no causal form; choose among "
                f"{', '.join(registry.causal_methods())}",
            )
    n, d = int(q.shape[-2]), int(q.shape[-1])
    overrides = method_params or {}
    mode = {"causal": True} if causal else {}
    params = {name: {**budget_params(name, n, d, fraction), **overrides.get(name, {}), **mode} for name in names}
    batch = math.prod(q.shape[:-2]) if q.dim() > 2 else 1
    per_chunk = max(1, min(len(beta_values), chunk_elements(q.device) // max(1, batch * n * n)))
    total_steps = math.ceil(len(beta_values) / per_chunk) * (len(names) + 1)
    done = 0
    entropy_parts: list[torch.Tensor] = []
    errors: dict[str, list[torch.Tensor]] = {name: [] for name in names}
    out_errors: dict[str, list[torch.Tensor]] = {name: [] for name in names}
    lead = (1,) * (q.dim() - 2)
    # Exact attention at every temperature comes from one q k^T; for half-precision inputs the reference and the
    # errors are float32 (the methods still take q, k and v as they are).
    wide = at_least_float32(q.dtype)
    unscaled_logits = q.to(wide) @ k.to(wide).transpose(-1, -2)
    for start in range(0, len(beta_values), per_chunk):
        check(cancel)
        chunk = beta_values[start : start + per_chunk]
        scale = torch.as_tensor(chunk, dtype=wide, device=q.device).reshape(-1, *lead)
        stack = [x.unsqueeze(0).expand(len(chunk), *x.shape) for x in (q, k, v)]
        logits = scale[..., None, None] * unscaled_logits
        if causal:
            logits = logits.masked_fill(~causal_mask(n, q.device), float("-inf"))
        exact_attention = torch.softmax(logits, dim=-1)
        exact_output = exact_attention @ v.to(wide)
        reduce_dims = tuple(range(1, exact_attention.dim() - 2))
        entropy_parts.append(_mean_over(metrics.mean_row_entropy(exact_attention), reduce_dims))
        done += 1
        _report(progress, done, total_steps, "exact attention")
        for name in names:
            check(cancel)
            result = approximate(name, *stack, scale=scale, seed=seed, **params[name])
            attention_error = metrics.relative_frobenius_error(result.attention().to(wide), exact_attention)
            output_error = metrics.relative_output_error(result.output.to(wide), exact_output)
            errors[name].append(_mean_over(attention_error, reduce_dims))
            out_errors[name].append(_mean_over(output_error, reduce_dims))
            done += 1
            _report(progress, done, total_steps, registry.get(name).label)
    return SweepResult(
        betas=beta_values,
        entropy=torch.cat(entropy_parts).double().cpu().numpy(),
        attention_error={name: torch.cat(errors[name]).double().cpu().numpy() for name in names},
        output_error={name: torch.cat(out_errors[name]).double().cpu().numpy() for name in names},
        params=params,
    )


def _mean_over(x: torch.Tensor, dims: tuple[int, ...]) -> torch.Tensor:
    return x.mean(dim=dims) if dims else x


def _report(progress: Progress | None, done: int, total: int, label: str) -> None:
    if progress is not None:
        progress(min(1.0, done / total), label)


@dataclass
class RegimeMap:
    """Which family wins on the clustered input over a (beta, sigma) grid."""

    betas: np.ndarray  # (T,)
    spreads: np.ndarray  # (S,)
    methods: dict[str, str]  # role ("sparse", "low_rank", "sparse_low_rank") -> method
    errors: dict[str, np.ndarray]  # role -> (S, T)
    entropy: np.ndarray  # (S, T)

    @property
    def roles(self) -> list[str]:
        return list(self.methods)

    @property
    def winner(self) -> np.ndarray:
        """(S, T) index into ``roles`` of the lowest error."""
        return np.argmin(np.stack([self.errors[r] for r in self.roles]), axis=0)

    @property
    def gain(self) -> np.ndarray:
        """Relative error reduction of sparse + low-rank over the better single method: (S, T), in [-inf, 1]."""
        best_single = np.minimum(self.errors["sparse"], self.errors["low_rank"])
        return (best_single - self.errors["sparse_low_rank"]) / np.maximum(best_single, 1e-30)


ESTIMATORS = {"sparse": "lsh", "low_rank": "performer", "sparse_low_rank": "scatterbrain"}
ORACLES = {"sparse": "topk", "low_rank": "svd", "sparse_low_rank": "rpca"}
# The estimators with a routed-sparse contender (MoBA: each query picks key blocks by score, where LSH hashes).
ROUTED = {"sparse": "lsh", "routed_sparse": "moba", "low_rank": "performer", "sparse_low_rank": "scatterbrain"}
OPTIONAL_ROLES = ("routed_sparse",)


def regime_map(
    *,
    n: int,
    d: int,
    clusters: int,
    betas: Sequence[float],
    spreads: Sequence[float],
    methods: Mapping[str, str] | None = None,
    fraction: float = 1 / 8,
    seed: int = 0,
    method_params: Mapping[str, Mapping[str, Any]] | None = None,
    device: torch.device | str = "cpu",
    progress: Progress | None = None,
    cancel: CancelToken | None = None,
    causal: bool = False,
) -> RegimeMap:
    """Errors of a sparse, a low-rank and a sparse + low-rank method over a (beta, sigma) grid.

    Each spread sigma draws one clustered input (Process 1); all betas for it run as one batched sweep.
    ``methods`` maps the roles sparse / low_rank / sparse_low_rank to registry names (default: the
    estimators lsh / performer / scatterbrain; ``ORACLES`` gives topk / svd / rpca; ``ROUTED`` adds the role
    routed_sparse, MoBA). ``causal``: as in
    ``error_vs_entropy`` (a role whose method has no causal form is refused, naming it).
    """
    roles = dict(methods or ESTIMATORS)
    if set(roles) - set(OPTIONAL_ROLES) != set(ESTIMATORS):
        raise ParameterError(
            "methods",
            f"must map the roles {sorted(ESTIMATORS)} (and optionally {', '.join(OPTIONAL_ROLES)}) to method names",
        )
    beta_values = _as_betas(None, betas)
    spread_values = np.asarray(spreads, dtype=float).reshape(-1)
    if spread_values.size == 0 or spread_values.size * beta_values.size > MAX_CELLS:
        raise ParameterError("spreads", f"the grid must have between 1 and {MAX_CELLS} cells")
    errors = {role: np.zeros((spread_values.size, beta_values.size)) for role in roles}
    entropy = np.zeros((spread_values.size, beta_values.size))
    for row, spread in enumerate(spread_values):
        inputs = data_module.clustered(n, d, clusters, float(spread), seed).to(device)

        def inner(fraction_done: float, label: str, row: int = row) -> None:
            if progress is not None:
                progress((row + fraction_done) / spread_values.size, f"sigma = {spread_values[row]:.2f}: {label}")

        sweep = error_vs_entropy(
            inputs.q,
            inputs.k,
            inputs.v,
            list(roles.values()),
            betas=beta_values.tolist(),
            fraction=fraction,
            seed=seed,
            method_params=method_params,
            causal=causal,
            progress=inner,
            cancel=cancel,
        )
        entropy[row] = sweep.entropy
        for role, name in roles.items():
            errors[role][row] = sweep.attention_error[name]
    return RegimeMap(beta_values, spread_values, roles, errors, entropy)
