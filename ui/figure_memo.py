"""Figures shared by every session that draws the same data: a class opening one link builds each figure, and its
Plotly JSON, once per server process instead of once per student.

Forty cached sessions of Compare on one server share one Python process and its GIL: building each session's Plotly
figures and serialising them took about a quarter of the server's time, the same work forty times.
``shared(builder, *args)`` returns the figure ``builder(*args)`` made for the same arguments before (arrays compared
by their bytes, dtype and shape), and ``figure_json(fig)`` its JSON, made once. A shared figure must not be changed in
place: ``presenter_figure`` copies before it enlarges, and the export menu only reads.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from typing import Any

import cachetools
import numpy as np
import plotly.graph_objects as go

MAX_FIGURES = 256  # a few pages' figures for several links at once; each holds its display-sized arrays

_figures: cachetools.LRUCache[bytes, go.Figure] = cachetools.LRUCache(maxsize=MAX_FIGURES)
_json: cachetools.LRUCache[bytes, str] = cachetools.LRUCache(maxsize=MAX_FIGURES)
_KEY = "_attention_explorer_shared_key"  # set on a shared figure (a copy, e.g. presenter_figure's, has none)
_lock = threading.Lock()
_making: dict[tuple[int, bytes], threading.Lock] = {}  # a key being made, by cache: its lock


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


def key_of(builder: Callable[..., go.Figure], args: tuple[Any, ...], kwargs: dict[str, Any]) -> bytes | None:
    """The figure's key: the builder's qualified name and every argument by value; None when an argument is of a
    kind not compared here (the figure is then built as usual)."""
    digest = hashlib.blake2b(digest_size=20)
    digest.update(f"{builder.__module__}.{builder.__qualname__}".encode())
    try:
        _feed(args, digest)
        _feed(kwargs, digest)
    except _NotKeyable:
        return None
    return digest.digest()


def _once(cache: cachetools.LRUCache[bytes, Any], key: bytes, make: Callable[[], Any]) -> Any:
    """``cache[key]``, made by ``make()`` on a miss. Sessions that miss the same key at once wait for one ``make``:
    a class's first visit reaches its figures together, when the shared computation ends."""
    with _lock:
        value = cache.get(key)
        if value is not None:
            return value
        making = _making.setdefault((id(cache), key), threading.Lock())
    with making:
        with _lock:
            value = cache.get(key)
        if value is None:
            value = make()
            with _lock:
                cache[key] = value
        with _lock:
            _making.pop((id(cache), key), None)
        return value


def shared(builder: Callable[..., go.Figure], *args: Any, **kwargs: Any) -> go.Figure:
    """``builder(*args, **kwargs)``, built once per process for equal arguments. The figure is shared: do not change
    it in place."""
    key = key_of(builder, args, kwargs)
    if key is None:
        return builder(*args, **kwargs)

    def build() -> go.Figure:
        fig = builder(*args, **kwargs)
        object.__setattr__(fig, _KEY, key)  # past Plotly's property check: not a figure property
        return fig

    figure: go.Figure = _once(_figures, key, build)
    return figure


def figure_json(fig: go.Figure) -> str:
    """``fig.to_json()``, kept for the figures ``shared`` returned (any other figure is serialised each time)."""
    key = getattr(fig, _KEY, None)
    if key is None:
        return fig.to_json()
    text: str = _once(_json, key, fig.to_json)
    return text


def clear() -> None:
    with _lock:
        _figures.clear()
        _json.clear()
