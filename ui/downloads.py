"""Full-resolution exports of one heatmap (PNG and data), within the server limits (core.limits).

The figures show block-reduced copies (at most a few hundred pixels a side); a download recomputes the one head at
full resolution, n x n in real positions, only when its button is pressed. When that would exceed the server's
limits, the data export holds the shown copy and says why.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import core
import core.compare
from service import compute
from ui.figures import png_bytes
from ui.settings import Settings


def full_matrix(s: Settings, method: str, params: dict[str, Any], head: int, kind: str = "attention") -> np.ndarray:
    """One head of ``method`` at full resolution; kind="error" subtracts exact attention."""
    matrix = compute.full_attention(s.method_run(method, params if method != "exact" else {}), head)
    if kind == "error":
        matrix = matrix - compute.full_attention(s.method_run("exact", {}), head)
    return matrix


def heatmap_exports(
    s: Settings, method: str, params: dict[str, Any], head: int, kind: str, shown: np.ndarray, log: bool
) -> dict[str, Any]:
    """Keyword arguments for ``ui.show_figure``: full-resolution PNG and data, or the shown copy with a note."""
    try:
        core.compare.full_export_check(method, s.n, s.d, params, with_exact=kind == "error")
    except core.ParameterError as exc:
        side = shown.shape[-1]
        return {"data": {kind: shown}, "data_note": f"Data holds the {side} × {side} display copy: {exc}"}

    def png() -> bytes:
        matrix = full_matrix(s, method, params, head, kind)
        return png_bytes(matrix, "error") if kind == "error" else png_bytes(matrix, "attention", log=log)

    return {
        "data": lambda: {kind: full_matrix(s, method, params, head, kind)},
        "data_note": f"Data: head {head} at full resolution, {s.n} × {s.n}, positions in their real order.",
        "png": png,
        "png_label": "PNG (full resolution)",
    }
