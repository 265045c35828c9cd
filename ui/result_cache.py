"""The shared on-disk result cache: identical settings are computed once and served to every session.

A ``diskcache.Cache`` at ``ATTN_EXPLORER_CACHE_DIR`` (default ``<repo>/.cache/results``), shared by every server
process on the host and kept across restarts. Bounded by ``ATTN_EXPLORER_CACHE_BYTES`` (default 1 GiB) with
least-recently-used eviction. Statistics are on, so any process reads hits/misses with
``diskcache.Cache(dir).stats()``.

In front of it, each process keeps a ``MemoryLayer``: decoded values shared by all its sessions, bounded in bytes
by ``ATTN_EXPLORER_MEMORY_CACHE_BYTES``. Its values are frozen (read-only arrays), so one copy serves every session.

Values are stored as bytes only: one ``np.savez`` archive whose arrays hold the numbers and whose ``__meta__``
entry is JSON describing the structure (dicts, lists, tuples, scalars, strings and dataclasses of ``core``/``ui``).
Nothing is ever pickled or unpickled, so a tampered cache file cannot run code.

Keys: sha256 of the JSON of (``ENGINE_VERSION``, name, canonical settings). ``ENGINE_VERSION`` is a hash of the
source of ``core/``, ``ui/`` and ``pages/`` (page sections in ``ui/panels`` hand work to the cache too), computed
once at import: any change to the code that produces a result makes the old entries unreachable (they age out by
LRU).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import importlib
import io
import json
import math
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import cachetools
import diskcache  # type: ignore[import-untyped]
import numpy as np
import torch

from core import cancel as core_cancel
from core import config
from ui import streamlit_compat

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DIR = config.DEFAULT_CACHE_DIR
DEFAULT_BYTES = config.default("cache_bytes")
META = "__meta__"
_ALLOWED_MODULES = ("core", "ui")  # dataclasses are rebuilt only from the project's own modules

T = TypeVar("T")


def _engine_version() -> str:
    digest = hashlib.sha256()
    # This file too: a change to the stored format must not serve entries written in the old one.
    files = sorted((ROOT / "core").rglob("*.py")) + sorted((ROOT / "ui").rglob("*.py"))
    files += sorted((ROOT / "pages").glob("*.py"))
    for path in files:
        if path.is_file():
            digest.update(str(path.relative_to(ROOT)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


ENGINE_VERSION = _engine_version()


def cache_dir() -> Path:
    """``ATTN_EXPLORER_CACHE_DIR`` (``core.config``), default ``DEFAULT_DIR``."""
    configured = config.read("cache_dir")
    return Path(configured) if configured is not None else DEFAULT_DIR


def size_limit() -> int:
    """``ATTN_EXPLORER_CACHE_BYTES`` (default 1 GiB)."""
    return int(config.read("cache_bytes"))


_lock = threading.Lock()
_caches: dict[tuple[str, Any], diskcache.Cache] = {}


def get_cache() -> diskcache.Cache:
    """This process's handle on the shared cache (one per directory and size bound)."""
    where, limit = str(cache_dir()), size_limit()
    with _lock:
        cache = _caches.get((where, limit))
        if cache is None:
            # cull_limit=0: eviction is done here, one least-recently-used entry at a time, so a set never
            # evicts more than it must (diskcache's own cull drops up to ten entries at once).
            cache = diskcache.Cache(
                where, size_limit=limit, eviction_policy="least-recently-used", cull_limit=0, statistics=1
            )
            cache.stats(enable=True)
            _caches[(where, limit)] = cache
        return cache


# ------------------------------------------------------------------ keys


def _canonical(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: _canonical(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return {"__type__": type(value).__name__, **fields}
    if isinstance(value, dict):
        return {"__dict__": sorted(([_canonical(k), _canonical(v)] for k, v in value.items()), key=json.dumps)}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if isinstance(value, float):
        return repr(value)  # exact, and nan/inf stay valid JSON
    if isinstance(value, np.generic):
        return _canonical(value.item())
    if value is None or isinstance(value, (bool, int, str)):
        return value
    raise TypeError(f"cache key part of type {type(value).__name__} is not a plain setting")


def make_key(name: str, key: Any) -> str:
    """The cache key of ``name`` at settings ``key`` (scalars, tuples, dicts, dataclasses) and this engine."""
    text = json.dumps([ENGINE_VERSION, name, _canonical(key)], sort_keys=True)
    return f"{name}:{hashlib.sha256(text.encode()).hexdigest()}"


# ------------------------------------------------------------------ encoding (bytes only, never pickle)


class _Encoder:
    def __init__(self) -> None:
        self.arrays: list[np.ndarray] = []

    def array(self, tag: str, value: np.ndarray) -> dict[str, Any]:
        if value.dtype.hasobject:
            raise TypeError("object arrays are not cached")
        # ascontiguousarray alone turns a 0-d array into shape (1,): keep the shape.
        self.arrays.append(np.ascontiguousarray(value).reshape(value.shape))
        return {tag: len(self.arrays) - 1}

    def encode(self, value: Any) -> Any:
        if value is None or isinstance(value, (bool, int, str)):
            return value
        if isinstance(value, float):
            return value if math.isfinite(value) else {"__float__": repr(value)}
        if isinstance(value, np.ndarray):
            return self.array("__nd__", value)
        if isinstance(value, torch.Tensor):
            return self.array("__tensor__", value.detach().cpu().numpy())
        if isinstance(value, np.generic):
            return self.encode(value.item())
        if isinstance(value, tuple):
            return {"__tuple__": [self.encode(v) for v in value]}
        if isinstance(value, list):
            return [self.encode(v) for v in value]
        if isinstance(value, dict):
            return {"__dict__": [[self.encode(k), self.encode(v)] for k, v in value.items()]}
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            cls = type(value)
            if cls.__module__.split(".")[0] not in _ALLOWED_MODULES:
                raise TypeError(f"dataclass {cls.__qualname__} from {cls.__module__} is not cacheable")
            fields = {f.name: self.encode(getattr(value, f.name)) for f in dataclasses.fields(value) if f.init}
            return {"__dc__": f"{cls.__module__}:{cls.__qualname__}", "fields": fields}
        raise TypeError(f"a value of type {type(value).__name__} is not cacheable")


def _decode(node: Any, arrays: Any) -> Any:
    if isinstance(node, list):
        return [_decode(v, arrays) for v in node]
    if not isinstance(node, dict):
        return node
    if "__nd__" in node:
        return arrays[f"a{node['__nd__']}"]
    if "__tensor__" in node:
        return torch.from_numpy(arrays[f"a{node['__tensor__']}"])
    if "__float__" in node:
        return float(node["__float__"])
    if "__tuple__" in node:
        return tuple(_decode(v, arrays) for v in node["__tuple__"])
    if "__dict__" in node:
        return {_decode(k, arrays): _decode(v, arrays) for k, v in node["__dict__"]}
    if "__dc__" in node:
        module_name, qualname = node["__dc__"].split(":")
        if module_name.split(".")[0] not in _ALLOWED_MODULES:
            raise ValueError(f"refusing to rebuild {node['__dc__']}")
        cls: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            cls = getattr(cls, part)
        if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
            raise ValueError(f"{node['__dc__']} is not a dataclass")
        return cls(**{k: _decode(v, arrays) for k, v in node["fields"].items()})
    raise ValueError(f"unknown node {sorted(node)}")


def encode(value: Any) -> bytes:
    """``value`` as npz bytes (raises TypeError for values that are not plain data)."""
    encoder = _Encoder()
    meta = json.dumps(encoder.encode(value))
    buffer = io.BytesIO()
    payload: dict[str, Any] = {f"a{i}": a for i, a in enumerate(encoder.arrays)}
    payload[META] = np.frombuffer(meta.encode(), dtype=np.uint8)
    np.savez(buffer, **payload)
    return buffer.getvalue()


def decode(data: bytes) -> Any:
    with np.load(io.BytesIO(data), allow_pickle=False) as archive:
        arrays = {name: archive[name] for name in archive.files}
    meta = json.loads(arrays.pop(META).tobytes().decode())
    return _decode(meta, arrays)


# ------------------------------------------------------------------ the process's memory layer

DEFAULT_MEMORY_BYTES = config.default("memory_cache_bytes")
VALUE_OVERHEAD_BYTES = 4096  # charged per value on top of its arrays (objects, dicts, small fields)
_LOCK_STRIPES = 64


def memory_limit() -> int:
    """``ATTN_EXPLORER_MEMORY_CACHE_BYTES`` (default 384 MiB); 0 turns the memory layer off."""
    return int(config.read("memory_cache_bytes"))


def _walk(value: Any, visit: Callable[[np.ndarray], None]) -> None:
    if isinstance(value, np.ndarray):
        visit(value)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _walk(item, visit)
    elif isinstance(value, dict):
        for item in value.values():
            _walk(item, visit)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            _walk(getattr(value, field.name), visit)


def freeze(value: T) -> T:
    """Make every numpy array in ``value`` read-only (in place), so a shared value cannot be changed by one reader
    under another: an in-place write raises ``ValueError: assignment destination is read-only``."""

    def lock(array: np.ndarray) -> None:
        array.flags.writeable = False

    _walk(value, lock)
    return value


def value_bytes(value: Any) -> int:
    """What a value costs the memory layer: its arrays' bytes plus a fixed overhead."""
    sizes: list[int] = []
    _walk(value, lambda array: sizes.append(array.nbytes))
    return VALUE_OVERHEAD_BYTES + sum(sizes)


class MemoryLayer:
    """Decoded results this process serves to all its sessions without a copy: least recently used out first,
    bounded in bytes (``cachetools.LRUCache`` with ``value_bytes`` as the size). ``st.cache_data`` instead gives
    each reader its own unpickled copy (about 8 MB per Compare method at n = 512, times every session in flight)
    and bounds entries, not bytes. A value larger than the whole bound is served but not kept."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lru: cachetools.LRUCache[str, Any] | None = (
            cachetools.LRUCache(maxsize=limit, getsizeof=value_bytes) if limit > 0 else None
        )
        self._lock = threading.Lock()
        self._stripes = [threading.Lock() for _ in range(_LOCK_STRIPES)]

    def get(self, full: str) -> Any | None:
        if self._lru is None:
            return None
        with self._lock:
            return self._lru.get(full)

    def put(self, full: str, value: Any) -> Any:
        """Freeze ``value``, keep it if it fits, and return it."""
        freeze(value)
        if self._lru is not None:
            with self._lock:
                try:
                    self._lru[full] = value
                except ValueError:  # cachetools: larger than the whole bound
                    pass
        return value

    def remember(self, full: str, produce: Callable[[], T]) -> tuple[T, bool]:
        """(value, True) from memory, or (``produce()``, False) kept for next time. Concurrent callers with the
        same key wait for one ``produce`` (a class opening one link computes it once), as ``st.cache_data`` did."""
        hit = self.get(full)
        if hit is not None:
            return hit, True
        with self._stripes[hash(full) % _LOCK_STRIPES]:
            hit = self.get(full)
            if hit is not None:
                return hit, True
            return self.put(full, produce()), False

    def clear(self) -> None:
        if self._lru is not None:
            with self._lock:
                self._lru.clear()

    @property
    def bytes_used(self) -> int:
        if self._lru is None:
            return 0
        with self._lock:
            return int(self._lru.currsize)


_memory_layers: dict[int, MemoryLayer] = {}


def memory() -> MemoryLayer:
    """This process's memory layer (one per bound, so a test may change ``ATTN_EXPLORER_MEMORY_CACHE_BYTES``)."""
    limit = memory_limit()
    with _lock:
        layer = _memory_layers.get(limit)
        if layer is None:
            layer = _memory_layers[limit] = MemoryLayer(limit)
        return layer


# ------------------------------------------------------------------ get / put


def get(name: str, key: Any) -> Any | None:
    """The cached value, or None on a miss (or an unreadable entry, which is dropped)."""
    return get_key(make_key(name, key))


def get_key(full: str) -> Any | None:
    """``get`` by a key from ``make_key``."""
    with _writes_lock:
        pending = _pending_writes.get(full)
    if pending is not None:  # computed here, still on its way to disk
        return pending
    cache = get_cache()
    try:
        data = cache.get(full, default=None, retry=True)
    except diskcache.Timeout:
        return None
    if not isinstance(data, bytes):
        return None
    try:
        return decode(data)
    except (ValueError, KeyError, TypeError, OSError, AttributeError, ImportError):
        cache.delete(full, retry=True)
        return None


def contains(name: str, key: Any) -> bool:
    """Whether ``get`` would find an entry, without reading or decoding it (a presence test costs one index lookup;
    ``get`` reads and decodes megabytes). An entry that later proves unreadable is dropped by ``get``."""
    full = make_key(name, key)
    with _writes_lock:
        if full in _pending_writes:
            return True
    try:
        return full in get_cache()
    except sqlite3.OperationalError:  # the index is busy past its timeout: report a miss, as ``get`` does
        return False


def put(name: str, key: Any, value: Any) -> bool:
    """Store ``value``; False when it is not plain data or larger than the whole bound (then nothing is stored)."""
    return put_key(make_key(name, key), value)


def put_key(full: str, value: Any) -> bool:
    """``put`` by a key from ``make_key``."""
    try:
        data = encode(value)
    except TypeError:
        return False
    cache = get_cache()
    limit = size_limit()
    if len(data) > limit // 2:
        return False
    # diskcache writes a bytes value by iterating io.BytesIO, i.e. line by line: one write per 0x0A byte, ~16,000
    # for 4 MB of float32. Each full 8 KB buffer releases the GIL and waits to get it back behind the page threads
    # (4 s per 4 MB beside two busy threads). A file-like value with read=True is written in 4 MiB chunks.
    value_or_file: bytes | io.BytesIO = data if len(data) < cache.disk.min_file_size else io.BytesIO(data)
    try:
        cache.set(full, value_or_file, read=not isinstance(value_or_file, bytes), retry=True)
        _evict(cache, limit)
    except diskcache.Timeout:
        return False
    return True


MAX_PENDING_WRITES = 8  # beyond this many values waiting for the writer, put_soon writes in the caller (back-pressure)
_writer = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="result-cache-writer")
_pending_writes: dict[str, Any] = {}  # full key -> value not yet on disk (get_key serves it meanwhile)
_writes_lock = threading.Lock()


def put_soon(name: str, key: Any, value: Any) -> None:
    """``put`` on a background writer thread: a page run does not wait for encoding and SQLite (about 0.1 s for a
    Compare method's result on this 2-core machine). The value is read back from memory until it is on disk."""
    full = make_key(name, key)
    with _writes_lock:
        write_here = len(_pending_writes) >= MAX_PENDING_WRITES
        if not write_here:
            _pending_writes[full] = value
    if write_here:
        put_key(full, value)
        return
    _writer.submit(_write_pending, full, value)


def _write_pending(full: str, value: Any) -> None:
    try:
        put_key(full, value)
    finally:
        with _writes_lock:
            _pending_writes.pop(full, None)


def flush_writes() -> None:
    """Wait until every ``put_soon`` value is on disk."""
    _writer.submit(lambda: None).result()


def _evict(cache: diskcache.Cache, limit: int) -> None:
    """Drop least-recently-used entries, one at a time, until the cache fits its bound."""
    while cache.volume() > limit:
        key = streamlit_compat.oldest_entry_key(cache)
        if key is None or not cache.delete(key, retry=True):
            return


def cached(name: str, key: Any, compute: Callable[[], T]) -> T:
    """``compute()`` through the shared cache (computed once per settings and engine version)."""
    hit = get(name, key)
    if hit is not None:
        return hit
    value = compute()
    token = core_cancel.current()
    if token is None or not token.cancelled:  # a stopped page run (a closed tab) does not spend a second writing
        put(name, key, value)
    return value


COUNTERS_DIR = "counters"  # a small cache of its own: reading a counter must not count as a result-cache hit
MEMORY_HITS = "memory_hits"


def counters() -> diskcache.Cache:
    """Cross-process counters beside the result cache (``diskcache.Cache(<dir>/counters)``), one handle per
    process and directory: opening one costs SQLite set-up."""
    return _counters_at(str(cache_dir() / COUNTERS_DIR))


def _counters_at(where: str) -> diskcache.Cache:
    with _lock:
        store = _caches.get((where, COUNTERS_DIR))
        if store is None:
            store = _caches[(where, COUNTERS_DIR)] = diskcache.Cache(where)
        return store


_pending_hits: dict[str, int] = {}  # counters folder -> memory hits not yet added to it
_pending_lock = threading.Lock()
_flusher: threading.Thread | None = None
FLUSH_SECONDS = 0.25


def count_memory_hit() -> None:
    """One engine call served from a process's memory cache, before the disk cache is even asked.

    Counted in memory and added to the shared counter by a background thread every FLUSH_SECONDS: one SQLite
    write per flush instead of one per hit, because a class of 40 sessions' hits otherwise queue on SQLite's
    write lock (a py-spy profile of 40 cached sessions found script threads waiting there)."""
    global _flusher  # noqa: PLW0603
    where = str(cache_dir() / COUNTERS_DIR)
    with _pending_lock:
        _pending_hits[where] = _pending_hits.get(where, 0) + 1
        if _flusher is None or not _flusher.is_alive():
            _flusher = threading.Thread(target=_flush_forever, name="result-cache-counters", daemon=True)
            _flusher.start()


def flush_counters() -> None:
    """Add the memory hits counted in this process to the shared counters now."""
    with _pending_lock:
        pending = dict(_pending_hits)
        _pending_hits.clear()
    for where, hits in pending.items():
        _counters_at(where).incr(MEMORY_HITS, hits, retry=True)


def _flush_forever() -> None:
    while True:
        time.sleep(FLUSH_SECONDS)
        try:
            flush_counters()
        except Exception:  # noqa: BLE001  (a counter write that fails, e.g. a removed folder, loses those counts only)
            pass


def stats() -> dict[str, int]:
    """Hits and misses counted by every process on this cache, its size in bytes, and memory hits (engine calls
    that a process served from its own memory cache, so the disk cache never saw them)."""
    flush_writes()
    cache = get_cache()
    hits, misses = cache.stats()
    flush_counters()
    memory_hits = int(counters().get(MEMORY_HITS, 0))
    return {"hits": int(hits), "misses": int(misses), "size_bytes": int(cache.volume()), "memory_hits": memory_hits}


def clear() -> None:
    """Empty the cache and reset its statistics."""
    flush_writes()
    cache = get_cache()
    cache.clear(retry=True)
    cache.stats(enable=True, reset=True)
