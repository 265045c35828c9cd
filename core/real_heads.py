"""Real heads on the regime: a fitted beta per head, the winning family per head and rank correlations.

The fitted beta of a head is the inverse temperature at which a clustered Process-1 input (same n and d, the
sidebar's clusters, spread and seed) has the same mean row entropy as the head: the entropy curve H(beta) of that
input is computed on a log grid, made non-increasing, and inverted by linear interpolation in log beta. A head whose
entropy lies outside the curve's range (flatter than the flattest or more peaked than the most peaked clustered
input on the grid) has no fitted beta (nan).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from core import data, metrics
from core.errors import ParameterError

BETA_GRID = (0.01, 1000.0)
GRID_POINTS = 97  # 16 points per decade of beta


def entropy_curve(
    n: int, d: int, clusters: int, spread: float, seed: int = 0, points: int = GRID_POINTS
) -> tuple[np.ndarray, np.ndarray]:
    """(betas, mean row entropy) of a clustered Process-1 input over a log grid of beta; entropy non-increasing."""
    if points < 2:
        raise ParameterError("points", f"must be at least 2, got {points!r}")
    betas = np.geomspace(*BETA_GRID, points)
    inputs = data.clustered(n, d, clusters, spread, seed, dtype=torch.float64)
    logits = (inputs.q @ inputs.k.transpose(-1, -2)).cpu()
    scale = torch.as_tensor(betas, dtype=torch.float64).reshape(-1, 1, 1, 1)
    entropy = metrics.mean_row_entropy(torch.softmax(scale * logits, dim=-1)).reshape(points, -1).mean(dim=1)
    # Entropy falls with beta in theory; float noise at the flat end must not make the inverse ambiguous.
    return betas, np.minimum.accumulate(entropy.numpy())


def fit_beta(entropy: Sequence[float] | np.ndarray, betas: np.ndarray, curve: np.ndarray) -> np.ndarray:
    """The beta on the curve with each given entropy (log-linear interpolation); nan outside the curve's range."""
    h = np.asarray(entropy, dtype=float)
    low, high = float(curve[-1]), float(curve[0])
    # np.interp needs increasing x: reverse the (non-increasing) curve.
    fitted = np.exp(np.interp(h, curve[::-1], np.log(betas)[::-1]))
    return np.where((h >= low) & (h <= high) & np.isfinite(h), fitted, np.nan)


def head_winners(table: pd.DataFrame, roles: Mapping[str, str], metric: str = "attention") -> pd.DataFrame:
    """One row per (layer, head): entropy, each role's error and the role with the lowest error (``winner``).

    ``table``: rows (method, layer, head, entropy, attention_error, output_error) as ``real_heads_table`` builds.
    Ties go to the first role in ``roles``' order. Heads missing a role's method are dropped.
    """
    if metric not in ("attention", "output"):
        raise ParameterError("metric", f"must be 'attention' or 'output', got {metric!r}")
    column = f"{metric}_error"
    wide = table.pivot_table(index=["layer", "head"], columns="method", values=column, aggfunc="first")
    missing = [m for m in roles.values() if m not in wide.columns]
    if missing:
        raise ParameterError("roles", f"no errors for {', '.join(missing)} in the table")
    entropy = table.groupby(["layer", "head"])["entropy"].first()
    out = pd.DataFrame({"entropy": entropy})
    for role, method in roles.items():
        out[f"error_{role}"] = wide[method]
    out = out.dropna()
    role_list = list(roles)
    errors = out[[f"error_{r}" for r in role_list]].to_numpy()
    out["winner"] = [role_list[i] for i in np.argmin(errors, axis=1)]
    return out.reset_index()


def spearman(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float:
    """Spearman rank correlation (average ranks for ties); nan with fewer than 3 points or a constant side."""
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if a.shape != b.shape:
        raise ParameterError("y", f"must have the same length as x ({a.size}), got {b.size}")
    if a.size < 3:
        return float("nan")
    ra, rb = pd.Series(a).rank().to_numpy(), pd.Series(b).rank().to_numpy()
    if ra.std() == 0 or rb.std() == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


def entropy_correlations(table: pd.DataFrame, metric: str) -> dict[str, float]:
    """Spearman correlation of each method's error with head entropy, over the heads in ``table``."""
    return {
        method: spearman(part["entropy"], part[f"{metric}_error"])
        for method, part in table.groupby("method", sort=False)
    }


def place_heads(
    table: pd.DataFrame, roles: Mapping[str, str], betas: np.ndarray, curve: np.ndarray, metric: str = "attention"
) -> pd.DataFrame:
    """``head_winners`` plus each head's fitted beta (nan where the fit is not defined) on the entropy curve."""
    heads = head_winners(table, roles, metric)
    heads["fitted_beta"] = fit_beta(heads["entropy"].to_numpy(), betas, curve)
    return heads


def win_counts(heads: pd.DataFrame, roles: Sequence[str]) -> dict[str, int]:
    """Heads won by each role (every role listed, zero when it wins none)."""
    return {role: int((heads["winner"] == role).sum()) for role in roles}
