"""Error and entropy measures for attention matrices and outputs.

All functions take tensors with any leading dimensions; matrix metrics reduce over the last two.
"""

from __future__ import annotations

import torch

# Floor for probabilities inside logs: approximations that drop entries (top-k, LSH) would give inf KL.
KL_FLOOR = 1e-12


def row_entropy(p: torch.Tensor) -> torch.Tensor:
    """Entropy of each row of a row-stochastic matrix, in nats: (..., n). Zero entries contribute 0; negative
    entries (signed approximations such as a truncated SVD) are clipped to 0."""
    # entr(x) = -x ln x in one pass over the matrix (five before: two clamps, log, product, sum); it is -inf for
    # x < 0, so a row holding a negative entry sums to -inf, and only then is the matrix clipped first.
    entropy = torch.special.entr(p).sum(-1)
    if bool(torch.isneginf(entropy).any()):
        entropy = torch.special.entr(p.clamp_min(0)).sum(-1)
    return entropy


def mean_row_entropy(p: torch.Tensor) -> torch.Tensor:
    """Mean row entropy in nats over the last two dimensions: (...,). Ranges over [0, ln n]."""
    return row_entropy(p).mean(-1)


def relative_frobenius_error(approx: torch.Tensor, exact: torch.Tensor) -> torch.Tensor:
    """||approx - exact||_F / ||exact||_F over the last two dimensions."""
    return torch.linalg.matrix_norm(approx - exact) / torch.linalg.matrix_norm(exact).clamp_min(1e-30)


def relative_output_error(approx: torch.Tensor, exact: torch.Tensor) -> torch.Tensor:
    """Relative Frobenius error of attention outputs (..., n, dv)."""
    return relative_frobenius_error(approx, exact)


def max_abs_error(approx: torch.Tensor, exact: torch.Tensor) -> torch.Tensor:
    """Largest absolute entry error over the last two dimensions."""
    return (approx - exact).abs().amax(dim=(-2, -1))


def mean_row_kl(exact: torch.Tensor, approx: torch.Tensor) -> torch.Tensor:
    """Mean over rows of KL(exact_row || approx_row), in nats.

    The approximate rows are clipped at KL_FLOOR and renormalised first, so dropped entries give a large
    but finite penalty and signed approximations (SVD) are measured on their positive part.
    """
    q = approx.clamp_min(KL_FLOOR)
    q = q / q.sum(-1, keepdim=True)
    p = exact.clamp_min(0)
    terms = torch.where(
        p > 0, p * (torch.log(p.clamp_min(torch.finfo(p.dtype).tiny)) - torch.log(q)), torch.zeros_like(p)
    )
    return terms.sum(-1).mean(-1)


def entry_errors(approx: torch.Tensor, exact: torch.Tensor) -> torch.Tensor:
    """Per-entry error approx - exact (the paper's Fig. 4 view plots it against q.k)."""
    return approx - exact


def summary(
    approx_attention: torch.Tensor,
    exact_attention: torch.Tensor,
    approx_output: torch.Tensor,
    exact_output: torch.Tensor,
) -> dict[str, float]:
    """The standard metrics, averaged over any leading dimensions, as floats."""
    return {
        "attention_error": float(relative_frobenius_error(approx_attention, exact_attention).mean()),
        "output_error": float(relative_output_error(approx_output, exact_output).mean()),
        "max_abs_error": float(max_abs_error(approx_attention, exact_attention).max()),
        "row_kl": float(mean_row_kl(exact_attention, approx_attention).mean()),
        "entropy": float(mean_row_entropy(exact_attention).mean()),
    }
