"""Figures shared by every session that draws the same data: a class opening one link builds each figure, and its
Plotly JSON, once per server process instead of once per student.

Forty cached sessions of Compare on one server share one Python process and its GIL: building each session's Plotly
figures and serialising them took about a quarter of the server's time, the same work forty times.
``shared(builder, *args)`` returns the figure ``builder(*args)`` made for the same arguments before (arrays compared
by their bytes, dtype and shape), and ``figure_json(fig)`` its JSON, made with it. Both live in a memory layer of
their own (``service.result_cache.MemoryLayer``: bounded in bytes, one build when sessions miss a figure at once).
A shared figure must not be changed in place: ``presenter_figure`` copies before it enlarges, and the export menu
only reads.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import numpy as np
import plotly.graph_objects as go

from service.result_cache import VALUE_OVERHEAD_BYTES, MemoryLayer

MAX_BYTES = 128 * 2**20  # a few pages' figures for several links at once
_KEY = "_attention_explorer_shared_key"  # set on a shared figure (a copy, e.g. presenter_figure's, has none)


def _shared_bytes(entry: tuple[go.Figure, str]) -> int:
    # The figure's arrays and its JSON (which holds them base64-encoded): about twice the JSON.
    return VALUE_OVERHEAD_BYTES + 2 * len(entry[1])


_layer = MemoryLayer(MAX_BYTES, size=_shared_bytes)


class _NotKeyable(TypeError):
    pass


def _feed(value: Any, digest: Any) -> None:
    if isinstance(value, np.ndarray):
        digest.update(f"array {value.dtype.str} {value.shape}:".encode())
        digest.update(np.ascontiguousarray(value).view(np.uint8).reshape(-1).data)
    elif isinstance(value, (list, tuple)):
        digest.update(f"{type(value).__name__} {len(value)}(".encode())
        for item in value:
            _feed(item, digest)
        digest.update(b")")
    elif isinstance(value, dict):
        digest.update(f"dict {len(value)}(".encode())
        for name in sorted(value, key=repr):
            _feed(name, digest)
            _feed(value[name], digest)
        digest.update(b")")
    elif value is None or isinstance(value, (str, bool, int, float, np.generic)):
        digest.update(f"{type(value).__name__} {value!r};".encode())
    else:
        raise _NotKeyable(type(value).__name__)


def key_of(builder: Callable[..., go.Figure], args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    """The figure's key: the builder's qualified name and every argument by value; None when an argument is of a
    kind not compared here (the figure is then built as usual)."""
    digest = hashlib.blake2b(digest_size=20)
    digest.update(f"{builder.__module__}.{builder.__qualname__}".encode())
    try:
        _feed(args, digest)
        _feed(kwargs, digest)
    except _NotKeyable:
        return None
    return digest.hexdigest()


def shared(builder: Callable[..., go.Figure], *args: Any, **kwargs: Any) -> go.Figure:
    """``builder(*args, **kwargs)``, built once per process for equal arguments, with its JSON. The figure is shared:
    do not change it in place."""
    key = key_of(builder, args, kwargs)
    if key is None:
        return builder(*args, **kwargs)

    def build() -> tuple[go.Figure, str]:
        fig = builder(*args, **kwargs)
        object.__setattr__(fig, _KEY, key)  # past Plotly's property check: not a figure property
        return fig, fig.to_json()

    entry: tuple[go.Figure, str] = _layer.remember(key, build)[0]
    return entry[0]


def figure_json(fig: go.Figure) -> str:
    """``fig.to_json()``, kept for the figures ``shared`` returned (any other figure is serialised each time)."""
    key = getattr(fig, _KEY, None)
    entry = None if key is None else _layer.get(key)
    if entry is not None and entry[0] is fig:
        text: str = entry[1]
        return text
    return fig.to_json()


def clear() -> None:
    _layer.clear()
