"""What a page asks the service for at the sidebar's settings: inputs, exact attention, a method's run and parts, the
entropy readout, and the display order. ``Settings`` holds; these functions build its views and ask the service
(cached; heavy work queues in the scheduler with the page's progress bar)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar, cast

import numpy as np

from core import sparse_lowrank
from service import compute, uploads, views
from service.result_cache import MemoryLayer
from ui import page_lifecycle
from ui.fields import max_heads
from ui.settings import Settings

T = TypeVar("T")
SHARED_DRAWN_BYTES = 32 * 2**20  # dozens of links: Compare's default link draws about 0.5 MB of maps per head
_shared_drawn = MemoryLayer(SHARED_DRAWN_BYTES)


def inputs(s: Settings) -> compute.InputArrays:
    """numpy q, k, v (heads, n, d), with the tokens, labels and the real model's attention where they exist."""
    return compute.load_inputs(s.spec)


def exact(s: Settings) -> compute.ExactResult:
    return compute.exact(s.exact_view())


def entropy(s: Settings) -> float:
    """Mean row entropy of exact attention (nats), averaged over heads: the sidebar's readout."""
    return float(compute.remembered(s.entropy_view()))


def run(s: Settings, method: str, params: dict[str, Any]) -> compute.MethodResult:
    """One method (cached on every setting); errors are against exact at the same temperature."""
    return compute.run_method_scheduled(s.method_run(method, params))


def parts(
    s: Settings, method: str, params: dict[str, Any], names: tuple[str, ...], head: int | None = None
) -> dict[str, np.ndarray]:
    """Named dense parts of one head of a method's run (the shown head unless ``head``)."""
    # In cluster order a map must be reordered before any reduction, so up to the cached full size the parts come at
    # full resolution and the page reduces them after sorting.
    return compute.method_parts_scheduled(parts_view(s, method, params, names, head))


def parts_view(
    s: Settings, method: str, params: dict[str, Any], names: tuple[str, ...], head: int | None = None
) -> views.MethodParts:
    """The view ``parts`` asks for."""
    full = s.by_cluster and compute.block_factor(s.n) > 1 and s.n <= compute.CACHE_FULL_MAX_N
    return views.MethodParts(s.method_run(method, params), s.head if head is None else head, tuple(names), not full)


def scatterbrain_correction(
    s: Settings, params: dict[str, Any], names: tuple[str, ...]
) -> sparse_lowrank.CorrectionSummary:
    """Scatterbrain against the naive sum on the shown head, from the parts ``parts(s, "scatterbrain", params,
    names)`` gave (full resolution only), computed where the page's views compute."""
    view = views.ScatterbrainCorrection(parts_view(s, "scatterbrain", params, names))
    return cast(sparse_lowrank.CorrectionSummary, compute.remembered(view))


def cluster_order(s: Settings) -> np.ndarray | None:
    """The display order of the positions: by cluster when "Order positions by cluster" is on (clustered input),
    else None (position order)."""
    return compute.cluster_order(s.spec) if s.by_cluster else None


def drawn(s: Settings, matrix: np.ndarray, in_cluster_order: np.ndarray | None = None) -> np.ndarray:
    """``matrix`` (..., n, n) as drawn: rows and columns in cluster order when "Order positions by cluster" is on.

    A full-resolution map is reordered here. A block-reduced one cannot be (its blocks mix clusters): pass the
    engine's copy reduced in cluster order as ``in_cluster_order``; without one it keeps position order, with a
    notice.
    """
    order = cluster_order(s)
    if order is None:
        return matrix
    if in_cluster_order is not None:
        return in_cluster_order
    if matrix.ndim < 2 or matrix.shape[-1] != s.n or matrix.shape[-2] != s.n:
        page_lifecycle.notice(
            "**Order positions by cluster**: a map reduced before drawing keeps the real positions "
            f"(n = {s.n}); lower n to see it sorted."
        )
        return matrix
    return compute.reorder(matrix, order)


def shared_drawn(key: str, produce: Callable[[], T]) -> T:
    """``produce()``, made once per server process for ``key`` and shared, read-only, by every session: the maps a
    page draws from a cached result (reordered, block-reduced). A class opening one link reordered and reduced each
    method's maps once per student, about a fifth of a cached Compare run's time on the server. ``key`` must name
    everything ``produce`` reads."""
    return _shared_drawn.remember(key, produce)[0]


def clear_shared_drawn() -> None:
    _shared_drawn.clear()


def with_every_uploaded_head(s: Settings) -> Settings:
    """These settings on every head of the uploaded file (within the dense views' head limit at this n): for pages
    that hide the heads control but place heads one by one. Other inputs are returned unchanged."""
    if s.spec.source != "upload":
        return s
    heads = min(int(uploads.describe(s.spec.upload)["heads"]), max_heads(s.n))
    return replace(s, spec=s.spec.replace(heads=heads))
