"""Block reduction of dense (..., n, n) matrices for display: a browser is sent at most ``DISPLAY_MAX`` per side."""

from __future__ import annotations

import math
from typing import TypeVar

import numpy as np
import torch

Matrix = TypeVar("Matrix", np.ndarray, torch.Tensor)

DISPLAY_MAX = 512  # largest side of a matrix sent to the browser


def block_factor(n: int, limit: int = DISPLAY_MAX) -> int:
    return max(1, math.ceil(n / limit))


def block_reduce(a: Matrix, factor: int, mode: str = "max") -> Matrix:
    """Reduce the last two axes by ``factor`` (padding the edge). mode: max | absmax (signed) | mean | any.

    A torch tensor is reduced where it lives (on a GPU, before the copy to the host: a 16th of the bytes at n = 4096),
    with the same numbers as the NumPy path."""
    if factor <= 1:
        return a
    if isinstance(a, torch.Tensor):
        return _block_reduce_tensor(a, factor, mode)
    *lead, rows, cols = a.shape
    pr, pc = (-rows) % factor, (-cols) % factor
    fill = {"max": -np.inf, "absmax": 0.0, "mean": np.nan, "any": 0}[mode]
    if pr or pc:
        padded = np.full((*lead, rows + pr, cols + pc), fill, dtype=np.float64 if mode == "mean" else a.dtype)
        padded[..., :rows, :cols] = a
        a = padded
    shaped = a.reshape(*lead, (rows + pr) // factor, factor, (cols + pc) // factor, factor)
    if mode == "max":
        return shaped.max(axis=(-3, -1))
    if mode == "any":
        return shaped.max(axis=(-3, -1))
    if mode == "mean":
        return np.nanmean(shaped, axis=(-3, -1)).astype(np.float32)
    flat = np.moveaxis(shaped, -3, -2).reshape(*shaped.shape[:-4], shaped.shape[-4], shaped.shape[-2], -1)
    index = np.abs(flat).argmax(axis=-1)
    return np.take_along_axis(flat, index[..., None], axis=-1)[..., 0]


def _block_reduce_tensor(a: torch.Tensor, factor: int, mode: str) -> torch.Tensor:
    *lead, rows, cols = a.shape
    pr, pc = (-rows) % factor, (-cols) % factor
    if a.dtype == torch.bool:
        return _block_reduce_tensor(a.to(torch.uint8), factor, mode).bool()
    if mode == "mean":
        a = a.to(torch.float64)
    if pr or pc:
        fill = {"max": -math.inf, "absmax": 0.0, "mean": math.nan, "any": 0}[mode]
        padded = a.new_full((*lead, rows + pr, cols + pc), fill)
        padded[..., :rows, :cols] = a
        a = padded
    shaped = a.reshape(*lead, (rows + pr) // factor, factor, (cols + pc) // factor, factor)
    if mode in ("max", "any"):
        return shaped.amax(dim=(-3, -1))
    if mode == "mean":
        return torch.nanmean(shaped, dim=(-3, -1)).to(torch.float32)
    flat = shaped.movedim(-3, -2).reshape(*shaped.shape[:-4], shaped.shape[-4], shaped.shape[-2], -1)
    index = flat.abs().argmax(dim=-1, keepdim=True)
    return flat.gather(-1, index).squeeze(-1)
