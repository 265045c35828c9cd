"""Row errors of chosen query tokens: how far each method's attention row and output row are from exact.

Per query row i: KL(exact_i || approx_i) (nats; approx clamped at 1e-12 so a zero where exact has weight stays
finite), L1 = sum_j |approx_ij - exact_ij| (0 to 2 for probability rows) and the relative output error
|o~_i - o_i| / |o_i|.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from core.errors import ParameterError

ROW_METRICS = ("row_kl", "row_l1", "row_output_error")
KL_FLOOR = 1e-12


def row_errors(
    exact: torch.Tensor, approx: torch.Tensor, exact_out: torch.Tensor, approx_out: torch.Tensor
) -> dict[str, np.ndarray]:
    """Per-row errors of one head: exact, approx (n, n) attention; exact_out, approx_out (n, dv) outputs."""
    if exact.shape != approx.shape or exact.dim() != 2:
        raise ParameterError("approx", f"must be an (n, n) matrix like exact {tuple(exact.shape)}")
    if exact_out.shape != approx_out.shape or exact_out.shape[0] != exact.shape[0]:
        raise ParameterError("approx_out", f"must have the exact output's shape {tuple(exact_out.shape)}")
    p, q = exact.double(), approx.double()
    kl = torch.where(p > 0, p * (torch.log(p.clamp_min(KL_FLOOR)) - torch.log(q.clamp_min(KL_FLOOR))), 0).sum(-1)
    l1 = (q - p).abs().sum(-1)
    out = (approx_out.double() - exact_out.double()).norm(dim=-1) / exact_out.double().norm(dim=-1).clamp_min(1e-30)
    return {"row_kl": kl.numpy(), "row_l1": l1.numpy(), "row_output_error": out.numpy()}


def summarise_rows(errors: dict[str, np.ndarray], rows: Sequence[int]) -> dict[str, float]:
    """Mean and sum of each row metric over the chosen rows (indices into the head's n rows)."""
    if not rows:
        raise ParameterError("rows", "choose at least one query token")
    n = len(next(iter(errors.values())))
    bad = [r for r in rows if not 0 <= r < n]
    if bad:
        raise ParameterError("rows", f"must be token positions in [0, {n - 1}], got {bad}")
    index = np.asarray(rows)
    out: dict[str, float] = {}
    for name in ROW_METRICS:
        out[f"{name}_mean"] = float(errors[name][index].mean())
        out[f"{name}_sum"] = float(errors[name][index].sum())
    return out
