"""What the Sparse + low rank page measures: Scatterbrain against the naive sum, and the paper's Fig. 4.

Scatterbrain (Chen et al. 2021, Sec. 3): L = phi(Q) phi(K)^T everywhere, plus S = (exp(QK^T) - L) on the LSH
support Omega, one row normaliser for both. The naive sum adds exp(QK^T) on Omega to L without subtracting
L there, so before normalising it holds about 2 exp(q.k) on Omega (Performer's estimate is unbiased).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from core import registry
from core.approximation import approximate, at_least_float32
from core.budget import budget_params

# The page's defaults (sidebar settings a user can also choose): flat enough rows that Performer's estimate is
# accurate on Omega, and a budget that buys enough features, so the naive sum visibly double counts.
PAGE_DEFAULTS: dict[str, Any] = {"tau": 2.0, "budget": 1 / 2}
# The correction "matters" when the naive sum's error is at least this multiple of Scatterbrain's.
MATTERS_FACTOR = 1.25


@dataclass
class CorrectionSummary:
    """Scatterbrain vs the naive sum on one head."""

    sb_error: float  # ||A_sb - A||_F / ||A||_F
    naive_error: float  # the same for the naive sum
    ratio_mean: float  # mean over Omega of (exp(q.k) + phi(q).phi(k)) / exp(q.k): about 2 when unbiased
    ratio_median: float
    omega_share: float  # share of the n^2 pairs in Omega
    omega_mass: float  # mean over rows of the exact attention on Omega
    features: int = 0

    @property
    def factor(self) -> float:
        """The naive sum's error in units of Scatterbrain's."""
        return self.naive_error / self.sb_error if self.sb_error > 0 else math.inf

    @property
    def matters(self) -> bool:
        return self.factor >= MATTERS_FACTOR

    def reasons(self) -> list[str]:
        """Why the correction hardly changes the error here (empty when it matters)."""
        if self.matters:
            return []
        out = []
        if self.ratio_median < 1.5:
            out.append(
                f"with m = {self.features} random features, φ(q)·φ(k) on Ω is usually far below exp(q·k) (median "
                f"of (exact + L) / exact is {self.ratio_median:.2f}, not 2): the estimate is unbiased only on "
                "average, so the naive sum rarely doubles anything"
            )
        if self.omega_mass > 0.85:
            out.append(
                f"{100 * self.omega_mass:.0f}% of each row's attention is inside Ω, so doubling it is mostly "
                "undone by normalising"
            )
        if self.sb_error > 0.5:
            out.append(
                f"both errors are dominated by the low-rank part off Ω (Scatterbrain's own error is "
                f"{self.sb_error:.2f}), which the correction does not touch"
            )
        return out or ["the entries on Ω carry too little of the error for their double counting to show"]


def correction_summary(
    exact: np.ndarray,
    attention: np.ndarray,
    naive_sum: np.ndarray,
    support: np.ndarray,
    unnormalized_low_rank: np.ndarray,
    logits: np.ndarray,
    features: int = 0,
) -> CorrectionSummary:
    """The summary from one head's (n, n) arrays; ``logits`` = beta q.k (float64 preferred)."""
    exact64 = exact.astype(np.float64)
    norm = float(np.linalg.norm(exact64))
    sb_error = float(np.linalg.norm(attention.astype(np.float64) - exact64) / norm)
    naive_error = float(np.linalg.norm(naive_sum.astype(np.float64) - exact64) / norm)
    omega = support.astype(bool)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        double = 1.0 + unnormalized_low_rank[omega].astype(np.float64) / np.exp(logits[omega].astype(np.float64))
    double = double[np.isfinite(double)]
    return CorrectionSummary(
        sb_error=sb_error,
        naive_error=naive_error,
        ratio_mean=float(np.mean(double)) if double.size else math.nan,
        ratio_median=float(np.median(double)) if double.size else math.nan,
        omega_share=float(omega.mean()),
        omega_mass=float((exact64 * omega).sum(axis=-1).mean()),
        features=int(features),
    )


def head_logits(q: np.ndarray, k: np.ndarray, beta: float) -> np.ndarray:
    """One head's logits beta q k^T (q, k: (n, d)) in float64, as ``correction_summary`` wants them."""
    return beta * (q.astype(np.float64) @ k.astype(np.float64).T)


def relative_error(approx: np.ndarray, exact: np.ndarray) -> float:
    """||approx - exact||_F / ||exact||_F."""
    return float(np.linalg.norm(approx - exact) / np.linalg.norm(exact))


def measure_correction(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, beta: float, seed: int, params: dict[str, Any]
) -> CorrectionSummary:
    """Run Scatterbrain on one head (q, k, v: (n, d)) and summarise it against exact attention."""
    sb = approximate("scatterbrain", q, k, v, scale=beta, seed=seed, **params)
    exact = approximate("exact", q, k, v, scale=beta).attention()
    logits = beta * (q.double() @ k.double().T)

    def numpy(t: torch.Tensor) -> np.ndarray:
        return t.to(at_least_float32(t.dtype)).cpu().numpy()  # NumPy has no bfloat16

    return correction_summary(
        numpy(exact),
        numpy(sb.attention()),
        numpy(sb.parts["naive_sum"]),
        numpy(sb.parts["support"]),
        numpy(sb.parts["unnormalized_low_rank"]),
        logits.cpu().numpy(),
        features=int(sb.params.get("features", 0)),
    )


# ------------------------------------------------------------------ spectrum


def spectrum(exact: np.ndarray, rank: int) -> tuple[np.ndarray, float, float]:
    """Singular values of one head's exact attention, the energy share of the top ``rank`` and the best
    rank-``rank`` relative error (Eckart-Young)."""
    sv = singular_values(exact)
    energy = float((sv[:rank] ** 2).sum() / (sv**2).sum())
    return sv, energy, math.sqrt(max(0.0, 1 - energy))


def budget_rank(n: int, d: int, fraction: float) -> int:
    """The rank the memory budget buys the SVD oracle (half the budget's rows when no SVD is registered)."""
    if "svd" in registry.methods():
        return int(budget_params("svd", n, d, fraction)["rank"])
    return max(1, int(fraction * n / 2))


def singular_values(matrix: np.ndarray) -> np.ndarray:
    """Singular values of an (n, n) matrix, computed in float64."""
    return np.linalg.svd(matrix.astype(np.float64), compute_uv=False)


# ------------------------------------------------------------------ Fig. 4


def performer_variance(x: np.ndarray, m: int) -> np.ndarray:
    """Performer (positive iid features) MSE of exp(q.k) for unit q, k with q.k = x (Performer Lemma 2)."""
    s2 = 2 + 2 * x
    return np.exp(s2) * np.exp(2 * x) * (1 - np.exp(-s2)) / m


def cross_polytope_collision(x: np.ndarray, d: int, hashes: int, tables: int) -> np.ndarray:
    """P[(q, k) in Omega] with tables of concatenated cross-polytope hashes (the paper's Theorem 2 bound)."""
    tau2 = np.clip(2 - 2 * x, 0, 4 - 1e-9)
    p = np.exp(-tau2 / (4 - tau2) * math.log(d))
    return 1 - (1 - p**hashes) ** tables


def fig4_measure(
    d: int, m: int, rounds: int, buckets: int, draws: int, pairs: int, orthogonal: bool, seed: int
) -> dict[str, np.ndarray]:
    """Per-pair squared errors of the unnormalised estimates of exp(q.k) for unit q, k with q.k spread over [-1, 1].

    Pair i has k_i = cos(t_i) q_i + sin(t_i) u_i (u_i a unit vector orthogonal to q_i), so q_i.k_i = cos(t_i).
    """
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(pairs, d, generator=g, dtype=torch.float64, device="cpu")
    q = q / q.norm(dim=-1, keepdim=True)
    u = torch.randn(pairs, d, generator=g, dtype=torch.float64, device="cpu")
    u = u - (u * q).sum(-1, keepdim=True) * q
    u = u / u.norm(dim=-1, keepdim=True)
    x = torch.linspace(-1, 1, pairs, dtype=torch.float64)
    k = x[:, None] * q + torch.sqrt(1 - x[:, None] ** 2) * u
    qf, kf = q.float()[None], k.float()[None]
    v = torch.zeros(1, pairs, 1)
    truth = torch.exp(x)
    idx = torch.arange(pairs)
    errs: dict[str, list[np.ndarray]] = {"performer": [], "lsh": [], "scatterbrain": []}
    hits = []
    for draw in range(draws):
        perf = approximate(
            "performer", qf, kf, v, scale=1.0, seed=seed + draw, features=m, kernel="positive", orthogonal=orthogonal
        )
        est = perf.parts["unnormalized"][0][idx, idx].double()
        errs["performer"].append(((est - truth) ** 2).numpy())
        lsh = approximate("lsh", qf, kf, v, scale=1.0, seed=seed + draw, rounds=rounds, buckets=buckets)
        hit = lsh.parts["support"][0][idx, idx]
        hits.append(hit.numpy())
        errs["lsh"].append(((torch.where(hit, truth, torch.zeros_like(truth)) - truth) ** 2).numpy())
        sb = approximate(
            "scatterbrain",
            qf,
            kf,
            v,
            scale=1.0,
            seed=seed + draw,
            features=m,
            kernel="positive",
            orthogonal=orthogonal,
            support="lsh",
            rounds=rounds,
            buckets=buckets,
        )
        est_sb = (sb.parts["unnormalized_sparse"][0] + sb.parts["unnormalized_low_rank"][0])[idx, idx].double()
        errs["scatterbrain"].append(((est_sb - truth) ** 2).numpy())
    out = {f"sq_error_{k}": np.stack(v) for k, v in errs.items()}
    out["collision"] = np.stack(hits).astype(np.float64)
    out["qk"] = x.numpy()
    return out


@dataclass
class Fig4Curves:
    centres: np.ndarray  # (B,) q.k bin centres
    measured: dict[str, np.ndarray]  # method -> (B,) mean squared error per bin
    collision: np.ndarray  # (B,) measured P[(q, k) in Omega]
    grid: np.ndarray  # (G,) q.k for the theory lines
    theory: dict[str, np.ndarray]  # method -> (G,) Theorem 2 with the measured collision rate
    paper: dict[str, np.ndarray]  # lsh / scatterbrain with the paper's cross-polytope bound (L = 4, K = 23)
    # method -> (B,) standard error of each point across draws (NaN with one draw): the estimators' squared errors
    # are heavy-tailed, so a point from few draws can sit far from its line
    stderr: dict[str, np.ndarray] = field(default_factory=dict)

    def table(self) -> dict[str, np.ndarray]:
        """The measured points as export columns: bin centre, collision rate, MSE and its standard error per method."""
        columns = {"qk_bin_centre": self.centres, "collision_rate": self.collision}
        columns.update({f"mse_{name}": values for name, values in self.measured.items()})
        columns.update({f"stderr_{name}": values for name, values in self.stderr.items()})
        return columns


def fig4_curves(res: dict[str, np.ndarray], d: int, m: int, bins: int = 20) -> Fig4Curves:
    """Bin ``fig4_measure``'s per-pair errors by q.k and put Theorem 2's curves beside them."""
    x = res["qk"]
    edges = np.linspace(-1, 1, bins + 1)
    centres = (edges[:-1] + edges[1:]) / 2
    which = np.clip(np.digitize(x, edges) - 1, 0, len(centres) - 1)

    def binned(values: np.ndarray) -> np.ndarray:
        flat = values.mean(axis=0)
        return np.array([flat[which == b].mean() if np.any(which == b) else np.nan for b in range(len(centres))])

    def stderr(values: np.ndarray) -> np.ndarray:
        """Standard error across draws of each draw's bin mean (pairs of one draw share its features)."""
        draws = values.shape[0]
        if draws < 2:
            return np.full(len(centres), np.nan)
        out = []
        for b in range(len(centres)):
            per_draw = values[:, which == b].mean(axis=1) if np.any(which == b) else np.full(draws, np.nan)
            out.append(per_draw.std(ddof=1) / np.sqrt(draws))
        return np.array(out)

    grid = np.linspace(-1, 1, 201)
    collision = binned(res["collision"])
    collision_grid = np.interp(grid, centres, np.nan_to_num(collision))
    paper_p = cross_polytope_collision(grid, d, 23, 4)
    names = ("performer", "lsh", "scatterbrain")
    return Fig4Curves(
        centres=centres,
        measured={name: binned(res[f"sq_error_{name}"]) for name in names},
        stderr={name: stderr(res[f"sq_error_{name}"]) for name in names},
        collision=collision,
        grid=grid,
        theory={
            "performer": performer_variance(grid, m),
            "lsh": (1 - collision_grid) * np.exp(2 * grid),
            "scatterbrain": (1 - collision_grid) * performer_variance(grid, m),
        },
        paper={
            "lsh": (1 - paper_p) * np.exp(2 * grid),
            "scatterbrain": (1 - paper_p) * performer_variance(grid, m),
        },
    )
