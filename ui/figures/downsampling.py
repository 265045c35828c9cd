"""Block reduction of dense (..., n, n) matrices for display: a browser is sent at most ``DISPLAY_MAX`` per side."""

from __future__ import annotations

import math

import numpy as np

DISPLAY_MAX = 512  # largest side of a matrix sent to the browser


def block_factor(n: int, limit: int = DISPLAY_MAX) -> int:
    return max(1, math.ceil(n / limit))


def block_reduce(a: np.ndarray, factor: int, mode: str = "max") -> np.ndarray:
    """Reduce the last two axes by ``factor`` (padding the edge). mode: max | absmax (signed) | mean | any."""
    if factor <= 1:
        return a
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
