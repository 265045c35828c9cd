"""The shared result cache: identical settings are computed once and served to every session.

By default a ``diskcache.Cache`` at ``ATTN_EXPLORER_CACHE_DIR`` (default ``<repo>/.cache/results``), shared by every
server process on the host and kept across restarts. Bounded by ``ATTN_EXPLORER_CACHE_BYTES`` (default 1 GiB) with
least-recently-used eviction. Statistics are on, so any process reads hits/misses with
``diskcache.Cache(dir).stats()``.

With ``ATTN_EXPLORER_CACHE_URL`` (``redis://host:6379/0``) the entries live in Redis instead, shared by every host
that names the server: the same bytes under ``attn-explorer:results:<key>``, hit, miss and memory-hit counters under
``attn-explorer:counters:<name>``. Redis bounds its memory itself (``maxmemory`` with ``allkeys-lru``). A server that
does not answer within ``REDIS_TIMEOUT_S`` turns every call into a miss (pages compute without the cache) for
``REDIS_RETRY_S``, with one logged warning and ``backend_problem()`` saying so; the first call after that tries again.

In front of it, each process keeps a ``MemoryLayer``: decoded values shared by all its sessions, bounded in bytes
by ``ATTN_EXPLORER_MEMORY_CACHE_BYTES``. Its values are frozen (read-only arrays), so one copy serves every session.

Values are stored as bytes only: one ``np.savez`` archive whose arrays hold the numbers and whose ``__meta__``
entry is JSON describing the structure (dicts, lists, tuples, scalars, strings and dataclasses of
``core``/``service``/``ui``). Nothing is ever pickled or unpickled, so a tampered cache file cannot run code.

Keys: sha256 of the JSON of (``ENGINE_VERSION``, name, canonical settings). ``ENGINE_VERSION`` is a hash of the
source of ``core/``, ``service/``, ``ui/`` and ``pages/`` (page sections in ``ui/panels`` hand work to the cache
too), computed once at import: any change to the code that produces a result makes the old entries unreachable
(they age out by LRU).
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import dataclasses
import fcntl
import hashlib
import importlib
import io
import json
import logging
import math
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import cachetools
import diskcache  # type: ignore[import-untyped]
import numpy as np
import torch

from core import cancel as core_cancel
from core import config
from service import diskcache_compat

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DIR = config.DEFAULT_CACHE_DIR
DEFAULT_BYTES = config.default("cache_bytes")
META = "__meta__"
_ALLOWED_MODULES = ("core", "service", "ui")  # dataclasses are rebuilt only from the project's own modules

T = TypeVar("T")


def _engine_version() -> str:
    digest = hashlib.sha256()
    # This file too: a change to the stored format must not serve entries written in the old one.
    files = [path for part in ("core", "service", "ui") for path in sorted((ROOT / part).rglob("*.py"))]
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


def cache_url() -> str | None:
    """``ATTN_EXPLORER_CACHE_URL``: the Redis server holding the cache, or None for the folder."""
    return config.read("cache_url")


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


# ------------------------------------------------------------------ the Redis backend

REDIS_RESULTS = "attn-explorer:results:"  # + make_key's key
REDIS_COUNTERS = "attn-explorer:counters:"  # + counter name
REDIS_TIMEOUT_S = 0.5  # connect and read: a dead or unreachable server never holds a page longer
REDIS_RETRY_S = 5.0  # after a failure, calls are misses without a connection attempt for this long
HITS, MISSES = "hits", "misses"

_log = logging.getLogger(__name__)


def _redacted(url: str) -> str:
    """``url`` without a password (in its user part or its query)."""
    parts = urlsplit(url)
    return parts._replace(netloc=parts.netloc.rpartition("@")[2], query="").geturl()


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class RedisCounters:
    """Cross-process counters in Redis, with ``diskcache.Cache``'s ``incr`` and ``get``; a lost server loses counts."""

    def __init__(self, store: RedisStore) -> None:
        self.store = store

    def incr(self, key: str, delta: int = 1, **_diskcache_options: Any) -> int:
        return int(self.store.call(lambda client: client.incrby(REDIS_COUNTERS + key, delta), 0))

    def get(self, key: str, default: Any = None) -> Any:
        value = self.store.call(lambda client: client.get(REDIS_COUNTERS + key), None)
        return default if value is None else int(value)


class RedisStore:
    """This process's view of one Redis server holding the cache: its entries, its counters and whether it answers.

    A connection error or timeout marks the server down for ``REDIS_RETRY_S``: meanwhile every call returns its
    fallback (a miss, a refused put) at once, and ``problem`` says so. The first call after that tries again."""

    def __init__(self, url: str) -> None:
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        self.url = url
        self.where = _redacted(url)
        self._errors = redis.exceptions
        # No retries (redis-py's default retries with a back-off of up to seconds): a failed call is a miss, and
        # the pool itself reopens a connection that the server closed (a restart between two calls).
        self.client = redis.Redis.from_url(
            url,
            socket_timeout=REDIS_TIMEOUT_S,
            socket_connect_timeout=REDIS_TIMEOUT_S,
            retry=Retry(NoBackoff(), 0),
            retry_on_timeout=False,
        )
        self.counters = RedisCounters(self)
        self.problem: str | None = None
        self._down_until = 0.0
        self._state_lock = threading.Lock()
        self._policy_checked = False

    def call(self, operation: Callable[[Any], T], fallback: T) -> T:
        """``operation(client)``, or ``fallback`` while the server is down or when it refuses the command."""
        if self.problem is not None and time.monotonic() < self._down_until:
            return fallback
        try:
            result = operation(self.client)
        except (self._errors.ConnectionError, self._errors.TimeoutError, OSError) as error:
            self._went_away(error)
            return fallback
        except self._errors.RedisError as error:  # it answered, with an error (e.g. a value above maxmemory)
            _log.debug("result cache: Redis at %s refused a command: %s", self.where, error)
            return fallback
        if self.problem is not None:
            self._came_back()
        return result

    def _went_away(self, error: Exception) -> None:
        with self._state_lock:
            first = self.problem is None
            self._down_until = time.monotonic() + REDIS_RETRY_S
            self.problem = (
                f"The shared result cache (Redis at {self.where}) does not answer: results are computed without it "
                f"until it does."
            )
        self.client.connection_pool.disconnect(inuse_connections=False)  # idle ones: none is stale once it is back
        if first:
            _log.warning(
                "result cache: Redis at %s does not answer (%s); computing without the cache, retrying every %g s",
                self.where,
                error,
                REDIS_RETRY_S,
            )

    def _came_back(self) -> None:
        with self._state_lock:
            if self.problem is None:
                return
            self.problem = None
        _log.warning("result cache: Redis at %s answers again; the cache is back", self.where)

    def refresh(self) -> None:
        """Ask the server again if it was down and the back-off is over (``backend_problem`` is then current)."""
        if self.problem is not None and time.monotonic() >= self._down_until:
            self.call(lambda client: client.ping(), None)

    def get(self, full: str) -> bytes | None:
        data = self.call(lambda client: client.get(REDIS_RESULTS + full), None)
        return data if isinstance(data, bytes) else None

    def contains(self, full: str) -> bool:
        return bool(self.call(lambda client: client.exists(REDIS_RESULTS + full), 0))

    def set(self, full: str, data: bytes, expire: float | None = None) -> bool:
        if not self._policy_checked:
            self._warn_if_unbounded()
            self._policy_checked = self.problem is None  # asked again when the server was down
        seconds = None if expire is None else max(1, math.ceil(expire))  # Redis's ex= takes whole seconds
        return bool(self.call(lambda client: client.set(REDIS_RESULTS + full, data, ex=seconds), False))

    def delete(self, full: str) -> None:
        self.call(lambda client: client.delete(REDIS_RESULTS + full), 0)

    def _warn_if_unbounded(self) -> None:
        """One warning when the server would grow without bound (managed servers that refuse CONFIG are trusted)."""
        settings = self.call(lambda client: client.config_get("maxmemory*"), None)
        if not settings:
            return
        text = {_text(name): _text(value) for name, value in settings.items()}
        limit, policy = text.get("maxmemory", "0"), text.get("maxmemory-policy", "")
        if limit == "0" or not policy.startswith("allkeys-"):
            _log.warning(
                "result cache: Redis at %s has maxmemory %s and policy %s; set maxmemory and "
                "maxmemory-policy allkeys-lru, or the cache grows until the server refuses writes",
                self.where,
                limit,
                policy,
            )

    def _result_keys(self, client: Any) -> list[bytes]:
        return list(client.scan_iter(match=REDIS_RESULTS + "*", count=1000))

    def volume(self) -> int:
        """Bytes of the stored values (not Redis's own overhead per key)."""

        def total(client: Any) -> int:
            pipe = client.pipeline(transaction=False)
            for key in self._result_keys(client):
                pipe.strlen(key)
            return sum(int(n) for n in pipe.execute())

        return self.call(total, 0)

    def clear(self) -> None:
        """Drop every entry and the hit and miss counters (other keys of the database are left alone)."""

        def drop(client: Any) -> None:
            keys = self._result_keys(client)
            for start in range(0, len(keys), 1000):
                client.unlink(*keys[start : start + 1000])
            client.delete(REDIS_COUNTERS + HITS, REDIS_COUNTERS + MISSES)

        self.call(drop, None)


_redis_stores: dict[str, RedisStore] = {}


def redis_store() -> RedisStore | None:
    """This process's handle on the Redis server of ``ATTN_EXPLORER_CACHE_URL``, or None when it is unset."""
    url = cache_url()
    return None if url is None else _redis_store_at(url)


def _redis_store_at(url: str) -> RedisStore:
    with _lock:
        store = _redis_stores.get(url)
        if store is None:
            store = _redis_stores[url] = RedisStore(url)
        return store


def backend_problem() -> str | None:
    """A short message while the cache's Redis server does not answer (pages then compute without the cache), else
    None. Always None for the on-disk cache."""
    store = redis_store()
    if store is None:
        return None
    store.refresh()
    return store.problem


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


def encode_parts(value: Any) -> tuple[str, list[np.ndarray]]:
    """``value`` as the two parts of its bytes, before they are archived: the JSON of its structure and its arrays
    (C-contiguous; raises TypeError for values that are not plain data). A worker sends these back
    (``service.dask_client``): Dask moves the arrays as raw buffers, with no archive to write and read on the way."""
    encoder = _Encoder()
    return json.dumps(encoder.encode(value)), encoder.arrays


def decode_parts(meta: str, arrays: list[np.ndarray]) -> Any:
    """The value ``encode_parts`` gave ``(meta, arrays)`` for: the same value ``decode(encode(value))`` gives."""
    if not all(isinstance(a, np.ndarray) and not a.dtype.hasobject for a in arrays):
        raise ValueError("the parts hold something other than plain arrays")
    return _decode(json.loads(meta), {f"a{i}": a for i, a in enumerate(arrays)})


def encode(value: Any) -> bytes:
    """``value`` as npz bytes (raises TypeError for values that are not plain data)."""
    meta, arrays = encode_parts(value)
    buffer = io.BytesIO()
    payload: dict[str, Any] = {f"a{i}": a for i, a in enumerate(arrays)}
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


@dataclasses.dataclass
class _Producing:
    lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)
    waiting: int = 0  # threads producing or waiting for this key


class MemoryLayer:
    """Decoded results this process serves to all its sessions without a copy: least recently used out first,
    bounded in bytes (``cachetools.LRUCache`` with ``value_bytes`` as the size). ``st.cache_data`` instead gives
    each reader its own unpickled copy (about 8 MB per Compare method at n = 512, times every session in flight)
    and bounds entries, not bytes. A value larger than the whole bound is served but not kept."""

    def __init__(self, limit: int, size: Callable[[Any], int] = value_bytes) -> None:
        """``limit``: bytes; ``size``: what one value costs (default: its arrays' bytes plus an overhead)."""
        self.limit = limit
        self._lru: cachetools.LRUCache[str, Any] | None = (
            cachetools.LRUCache(maxsize=limit, getsizeof=size) if limit > 0 else None
        )
        self._lock = threading.Lock()
        self._producing: dict[str, _Producing] = {}  # key -> its lock, while some thread produces it

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
        same key wait for one ``produce`` (a class opening one link computes it once), as ``st.cache_data`` did.

        One lock per key being produced, not per stripe of keys: a ``produce`` may itself remember other keys (a
        method's run needs exact attention, which needs the inputs), and two keys sharing a lock would deadlock."""
        hit = self.get(full)
        if hit is not None:
            return hit, True
        with self._lock:
            producing = self._producing.get(full)
            if producing is None:
                producing = self._producing[full] = _Producing()
            producing.waiting += 1
        try:
            with producing.lock:
                hit = self.get(full)
                if hit is not None:
                    return hit, True
                return self.put(full, produce()), False
        finally:
            with self._lock:
                producing.waiting -= 1
                if producing.waiting == 0:
                    del self._producing[full]

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
    store = redis_store()
    if store is not None:
        data = store.get(full)
        _count(store.url, MISSES if data is None else HITS)
    else:
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
        if store is not None:
            store.delete(full)
        else:
            cache.delete(full, retry=True)
        return None


def contains(name: str, key: Any) -> bool:
    """Whether ``get`` would find an entry, without reading or decoding it (a presence test costs one index lookup;
    ``get`` reads and decodes megabytes). An entry that later proves unreadable is dropped by ``get``."""
    return contains_key(make_key(name, key))


def contains_key(full: str) -> bool:
    """``contains`` by a key from ``make_key`` (or another key of the cache's own, e.g. an upload's)."""
    with _writes_lock:
        if full in _pending_writes:
            return True
    store = redis_store()
    if store is not None:
        return store.contains(full)
    try:
        return full in get_cache()
    except sqlite3.OperationalError:  # the index is busy past its timeout: report a miss, as ``get`` does
        return False


def put(name: str, key: Any, value: Any, expire: float | None = None) -> bool:
    """Store ``value``; False when it is not plain data or larger than the whole bound (then nothing is stored).
    expire: seconds after which the entry is gone (None: kept until evicted)."""
    return put_key(make_key(name, key), value, expire)


def put_key(full: str, value: Any, expire: float | None = None) -> bool:
    """``put`` by a key from ``make_key``."""
    try:
        data = encode(value)
    except TypeError:
        return False
    store = redis_store()
    if store is not None:  # bounded by the server's maxmemory policy, not here
        return store.set(full, data, expire)
    cache = get_cache()
    limit = size_limit()
    if len(data) > limit // 2:
        return False
    # diskcache writes a bytes value by iterating io.BytesIO, i.e. line by line: one write per 0x0A byte, ~16,000
    # for 4 MB of float32. Each full 8 KB buffer releases the GIL and waits to get it back behind the page threads
    # (4 s per 4 MB beside two busy threads). A file-like value with read=True is written in 4 MiB chunks.
    value_or_file: bytes | io.BytesIO = data if len(data) < cache.disk.min_file_size else io.BytesIO(data)
    try:
        cache.set(full, value_or_file, expire=expire, read=not isinstance(value_or_file, bytes), retry=True)
        _evict(cache, limit)
    except diskcache.Timeout:
        return False
    return True


MAX_PENDING_WRITES = 8  # beyond this many values waiting for the writer, put_soon writes in the caller (back-pressure)
_writer = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="result-cache-writer")
_pending_writes: dict[str, Any] = {}  # full key -> value not yet on disk (get_key serves it meanwhile)
_writes_lock = threading.Lock()


def put_soon(name: str, key: Any, value: Any, expire: float | None = None) -> None:
    """``put`` on a background writer thread: a page run does not wait for encoding and SQLite (about 0.1 s for a
    Compare method's result on this 2-core machine). The value is read back from memory until it is on disk."""
    full = make_key(name, key)
    with _writes_lock:
        write_here = len(_pending_writes) >= MAX_PENDING_WRITES
        if not write_here:
            _pending_writes[full] = value
    if write_here:
        put_key(full, value, expire)
        return
    _writer.submit(_write_pending, full, value, expire)


def _write_pending(full: str, value: Any, expire: float | None = None) -> None:
    try:
        put_key(full, value, expire)
    finally:
        with _writes_lock:
            _pending_writes.pop(full, None)


def flush_writes() -> None:
    """Wait until every ``put_soon`` value is on disk."""
    _writer.submit(lambda: None).result()


def _evict(cache: diskcache.Cache, limit: int) -> None:
    """Drop least-recently-used entries, one at a time, until the cache fits its bound."""
    while cache.volume() > limit:
        key = diskcache_compat.oldest_entry_key(cache)
        if key is None or not cache.delete(key, retry=True):
            return


def cached(name: str, key: Any, compute: Callable[[], T], expire: float | None = None) -> T:
    """``compute()`` through the shared cache (computed once per settings and engine version); ``expire`` as
    ``put``."""
    hit = get(name, key)
    if hit is not None:
        return hit
    value = compute()
    token = core_cancel.current()
    if token is None or not token.cancelled:  # a stopped page run (a closed tab) does not spend a second writing
        put(name, key, value, expire)
    return value


COUNTERS_DIR = "counters"  # a small cache of its own: reading a counter must not count as a result-cache hit
MEMORY_HITS = "memory_hits"


def counters() -> diskcache.Cache | RedisCounters:
    """Cross-process counters beside the result cache (``diskcache.Cache(<dir>/counters)``, or keys in Redis), one
    handle per process and place: opening one costs SQLite set-up."""
    return _counters_at(_counters_place())


def _counters_place() -> str:
    """The Redis URL, or the counters folder of the on-disk cache."""
    return cache_url() or str(cache_dir() / COUNTERS_DIR)


def _counters_at(where: str) -> diskcache.Cache | RedisCounters:
    if where.startswith(config.REDIS_SCHEMES):
        return _redis_store_at(where).counters
    with _lock:
        store = _caches.get((where, COUNTERS_DIR))
        if store is None:
            store = _caches[(where, COUNTERS_DIR)] = diskcache.Cache(where)
        return store


_pending_counts: dict[tuple[str, str], int] = {}  # (counters place, counter) -> count not yet added to it
_pending_lock = threading.Lock()
_flusher: threading.Thread | None = None
FLUSH_SECONDS = 0.25


def count_memory_hit() -> None:
    """One engine call served from a process's memory cache, before the disk cache is even asked.

    Counted in memory and added to the shared counter by a background thread every FLUSH_SECONDS: one SQLite
    write per flush instead of one per hit, because a class of 40 sessions' hits otherwise queue on SQLite's
    write lock (a py-spy profile of 40 cached sessions found script threads waiting there)."""
    _count(_counters_place(), MEMORY_HITS)


def _count(where: str, counter: str) -> None:
    global _flusher  # noqa: PLW0603
    with _pending_lock:
        _pending_counts[(where, counter)] = _pending_counts.get((where, counter), 0) + 1
        if _flusher is None or not _flusher.is_alive():
            _flusher = threading.Thread(target=_flush_forever, name="result-cache-counters", daemon=True)
            _flusher.start()


def flush_counters() -> None:
    """Add the memory hits (and, with Redis, the hits and misses) counted in this process to the shared counters."""
    with _pending_lock:
        pending = dict(_pending_counts)
        _pending_counts.clear()
    for (where, counter), count in pending.items():
        _counters_at(where).incr(counter, count, retry=True)


def _flush_forever() -> None:
    while True:
        time.sleep(FLUSH_SECONDS)
        _flush_quietly()


def _flush_quietly() -> None:
    try:
        flush_counters()
    except Exception:  # noqa: BLE001  (a counter write that fails, e.g. a removed folder, loses those counts only)
        pass


atexit.register(_flush_quietly)  # a process that ends between two flushes still adds its counts


def stats() -> dict[str, int]:
    """Hits and misses counted by every process on this cache, its size in bytes, and memory hits (engine calls
    that a process served from its own memory cache, so the disk cache never saw them)."""
    flush_writes()
    store = redis_store()
    if store is not None:
        flush_counters()
        hits, misses, memory_hits = (int(store.counters.get(name, 0)) for name in (HITS, MISSES, MEMORY_HITS))
        return {"hits": hits, "misses": misses, "size_bytes": store.volume(), "memory_hits": memory_hits}
    cache = get_cache()
    hits, misses = cache.stats()
    flush_counters()
    memory_hits = int(counters().get(MEMORY_HITS, 0))
    return {"hits": int(hits), "misses": int(misses), "size_bytes": int(cache.volume()), "memory_hits": memory_hits}


def clear() -> None:
    """Empty the cache and reset its statistics."""
    flush_writes()
    store = redis_store()
    if store is not None:
        with _pending_lock:
            for counter in (HITS, MISSES):
                _pending_counts.pop((store.url, counter), None)
        store.clear()
        return
    cache = get_cache()
    cache.clear(retry=True)
    cache.stats(enable=True, reset=True)


# ------------------------------------------------------------------ the warm-up's marker and lock

# They live in the cache they describe: on the Redis server when the cache is Redis (a new or flushed server is
# warmed, whatever a host's folder holds), else in the cache folder. deploy/warmup.py reads and writes them here.
REDIS_WARMUP_DONE = "attn-explorer:warmup:done:"  # + the engine version: the finished warm-up's summary (JSON)
REDIS_WARMUP_LOCK = "attn-explorer:warmup:lock"  # one warm-up at a time per server; it expires if its holder dies
WARMUP_LOCK_SECONDS = 6 * 3600
_RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"


def warmup_marker_path(folder: Path, version: str) -> Path:
    """The marker of a finished warm-up in a cache folder."""
    return folder / f"warmup-{version}.json"


def warmup_place() -> str:
    """Where the warm-up's marker and lock are, in words (for the log)."""
    store = redis_store()
    return f"Redis at {store.where}" if store is not None else str(cache_dir())


def warmup_marker(version: str | None = None) -> str | None:
    """The summary of the finished warm-up of this engine version in this cache, or None when it was not warmed
    (or the Redis server does not answer)."""
    version = version or ENGINE_VERSION
    store = redis_store()
    if store is not None:
        data = store.call(lambda client: client.get(REDIS_WARMUP_DONE + version), None)
        return None if data is None else _text(data)
    path = warmup_marker_path(cache_dir(), version)
    return path.read_text() if path.exists() else None


def mark_warmed(summary: str, version: str | None = None) -> bool:
    """Record that this cache is warmed for this engine version (False when the Redis server refused it)."""
    version = version or ENGINE_VERSION
    store = redis_store()
    if store is not None:
        return bool(store.call(lambda client: client.set(REDIS_WARMUP_DONE + version, summary), False))
    path = warmup_marker_path(cache_dir(), version)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(summary)
    return True


@contextlib.contextmanager
def warmup_lock() -> Iterator[bool]:
    """True while this process holds the cache's warm-up lock; False when another process holds it (or the Redis
    server does not answer: then there is no cache to warm)."""
    store = redis_store()
    if store is not None:
        token = uuid.uuid4().hex
        held = bool(
            store.call(lambda client: client.set(REDIS_WARMUP_LOCK, token, nx=True, ex=WARMUP_LOCK_SECONDS), False)
        )
        try:
            yield held
        finally:
            if held:  # only our own lock: one that expired and was taken by another process stays
                store.call(lambda client: client.eval(_RELEASE, 1, REDIS_WARMUP_LOCK, token), 0)
        return
    folder = cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "warmup.lock", "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
