"""The shared on-disk result cache: round trips, cross-process hits, the LRU size bound, bytes only, engine key."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import diskcache
import numpy as np
import pytest
import torch

from core.errors import ConfigError
from service import compute, result_cache, views
from service.views import MethodRun

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    where = tmp_path / "cache"
    monkeypatch.setenv("ATTN_EXPLORER_CACHE_DIR", str(where))
    monkeypatch.delenv("ATTN_EXPLORER_CACHE_BYTES", raising=False)
    yield where


def small_spec(seed: int = 0) -> views.InputSpec:
    return views.InputSpec("clustered", 64, 16, 2, 4, 0.3, seed)


def test_method_result_round_trip(cache_dir: Path) -> None:
    spec = small_spec()
    result = compute.run_method_now(MethodRun(spec, 2.0, "cpu", "performer", (("features", 16),), 0))
    assert result.error_message is None
    assert result_cache.put("run_method", (spec, 2.0), result)
    back = result_cache.get("run_method", (spec, 2.0))
    assert isinstance(back, compute.MethodResult)
    assert back.method == "performer" and back.params == result.params and back.info == result.info
    assert back.memory == result.memory and back.flops == result.flops and back.seconds == result.seconds
    np.testing.assert_array_equal(back.attention, result.attention)
    np.testing.assert_array_equal(back.error, result.error)
    for name, values in result.metrics.items():
        np.testing.assert_array_equal(back.metrics[name], values)


def test_contains_answers_without_decoding(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    value = np.arange(1000, dtype=np.float32)
    assert not result_cache.contains("presence", "k")
    result_cache.put_soon("presence", "k", value)  # seen while still on its way to disk, and after
    assert result_cache.contains("presence", "k")
    result_cache.flush_writes()

    def no_decoding(data: bytes) -> None:
        raise AssertionError("contains decoded an entry")

    monkeypatch.setattr(result_cache, "decode", no_decoding)
    assert result_cache.contains("presence", "k")
    assert not result_cache.contains("presence", "other") and not result_cache.contains("absence", "k")


def test_nested_values_round_trip(cache_dir: Path) -> None:
    value = {
        "grid": np.arange(6, dtype=np.float32).reshape(2, 3),
        (4, 2): [1, 2.5, float("nan"), float("-inf"), None, "x"],
        "roles": (("sparse", "lsh"), ("low_rank", "performer")),
        "flag": True,
    }
    result_cache.put("nested", "k", value)
    back = result_cache.get("nested", "k")
    np.testing.assert_array_equal(back["grid"], value["grid"])
    assert back["grid"].dtype == np.float32
    assert back["roles"] == value["roles"] and back["flag"] is True
    row = back[(4, 2)]
    assert row[:2] == [1, 2.5] and np.isnan(row[2]) and row[3] == float("-inf") and row[4:] == [None, "x"]


def test_array_shapes_survive_the_round_trip(cache_dir: Path) -> None:
    # A 0-d array (e.g. method_parts' block "factor") once came back as shape (1,), and int() of it then raised
    # on the Sparse + low rank page whenever the result was served from the disk cache.
    value = {"factor": np.asarray(4), "empty": np.zeros((0, 3)), "column": np.ones((3, 1)).T.T}
    result_cache.put("shapes", "k", value)
    back = result_cache.get("shapes", "k")
    for name, array in value.items():
        assert back[name].shape == array.shape, name
    assert int(back["factor"]) == 4


def test_the_parts_a_worker_sends_give_the_value_the_bytes_give() -> None:
    """``encode_parts``/``decode_parts`` (what a Dask worker sends back) rebuild what ``encode``/``decode`` do, with
    the same arrays' numbers, dtypes and shapes; parts holding anything but plain arrays are refused."""
    value = {
        "grid": np.arange(6, dtype=np.float32).reshape(2, 3).T,  # not contiguous: sent contiguous
        "factor": np.asarray(4),
        "t": torch.arange(3, dtype=torch.float64),
        "rows": (1, 2.5, float("nan"), None, "x"),
    }
    meta, arrays = result_cache.encode_parts(value)
    assert all(isinstance(a, np.ndarray) and a.flags.c_contiguous for a in arrays)
    via_parts, via_bytes = result_cache.decode_parts(meta, arrays), result_cache.decode(result_cache.encode(value))
    assert list(via_parts) == list(via_bytes) == list(value)
    for name in ("grid", "factor"):
        got, expected = via_parts[name], via_bytes[name]
        assert (got.dtype, got.shape, got.tobytes()) == (expected.dtype, expected.shape, expected.tobytes()), name
    assert torch.equal(via_parts["t"], via_bytes["t"])
    rows = via_parts["rows"]
    assert rows[:2] == (1, 2.5) and math.isnan(rows[2]) and rows[3:] == (None, "x")
    with pytest.raises(ValueError, match="plain arrays"):
        result_cache.decode_parts(meta, [np.array([object()], dtype=object), *arrays[1:]])


def test_large_values_are_written_in_few_chunks_not_line_by_line(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # diskcache writes a bytes value line by line (one write per 0x0A byte); beside busy page threads each write
    # that flushes waits for the GIL, and a 4 MB entry took seconds. Large values go in as a file in big chunks.
    chunks: list[int] = []
    original = diskcache.Disk._write

    def counting_write(self, full_path, iterator, mode, encoding=None):  # type: ignore[no-untyped-def]
        def counted():  # type: ignore[no-untyped-def]
            for chunk in iterator:
                chunks.append(len(chunk))
                yield chunk

        return original(self, full_path, counted(), mode, encoding)

    monkeypatch.setattr(diskcache.Disk, "_write", counting_write)
    value = np.random.default_rng(0).random((4, 256, 256)).astype(np.float32)  # 1 MiB, thousands of 0x0A bytes
    assert result_cache.put("big", "k", value)
    assert 1 <= len(chunks) <= 2 and sum(chunks) > value.nbytes, chunks[:5]
    np.testing.assert_array_equal(result_cache.get("big", "k"), value)
    chunks.clear()
    assert result_cache.put("small", "k", np.arange(4.0))  # small values stay inline in SQLite: no file
    assert chunks == [] and result_cache.get("small", "k").tolist() == [0.0, 1.0, 2.0, 3.0]


def test_stored_value_is_npz_bytes_never_a_pickle(cache_dir: Path) -> None:
    spec = small_spec()
    result_cache.put("exact", spec, compute.exact_now(views.ExactAttention(spec, 1.0, "cpu")))
    raw = diskcache.Cache(str(cache_dir))
    (key,) = list(raw.iterkeys())
    stored = raw.get(key)
    assert isinstance(stored, bytes)
    assert stored[:2] == b"PK"  # a zip (npz) archive; a pickle starts with b"\x80"
    with np.load(__import__("io").BytesIO(stored), allow_pickle=False) as archive:
        meta = json.loads(archive["__meta__"].tobytes())
    assert meta["__dc__"] == "service.compute:ExactResult"


def test_objects_that_are_not_plain_data_are_not_stored(cache_dir: Path) -> None:
    class Opaque:
        pass

    assert not result_cache.put("opaque", 1, {"x": Opaque()})
    assert result_cache.get("opaque", 1) is None
    assert len(diskcache.Cache(str(cache_dir))) == 0


def test_dataclasses_outside_the_project_are_refused(cache_dir: Path) -> None:
    import dataclasses

    @dataclasses.dataclass
    class Foreign:
        x: int

    Foreign.__module__ = "os"
    assert not result_cache.put("foreign", 1, Foreign(1))
    tampered = b'{"__dc__": "os:system", "fields": {}}'
    buffer = __import__("io").BytesIO()
    np.savez(buffer, __meta__=np.frombuffer(tampered, dtype=np.uint8))
    with pytest.raises(ValueError, match="refusing"):
        result_cache.decode(buffer.getvalue())


def test_engine_version_is_in_the_key(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert len(result_cache.ENGINE_VERSION) == 16
    before = result_cache.make_key("exact", (small_spec(), 1.0))
    result_cache.put("exact", (small_spec(), 1.0), {"a": 1})
    monkeypatch.setattr(result_cache, "ENGINE_VERSION", "0" * 16)
    assert result_cache.make_key("exact", (small_spec(), 1.0)) != before
    assert result_cache.get("exact", (small_spec(), 1.0)) is None


def test_key_distinguishes_settings(cache_dir: Path) -> None:
    keys = {
        result_cache.make_key("exact", (small_spec(0), 1.0)),
        result_cache.make_key("exact", (small_spec(1), 1.0)),
        result_cache.make_key("exact", (small_spec(0), 1.0000000001)),
        result_cache.make_key("run_method", (small_spec(0), 1.0)),
    }
    assert len(keys) == 4
    assert result_cache.make_key("x", {"a": 1, "b": 2}) == result_cache.make_key("x", {"b": 2, "a": 1})


def test_size_bound_evicts_least_recently_used(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTN_EXPLORER_CACHE_BYTES", str(1_200_000))
    rng = np.random.default_rng(0)
    blobs = {name: rng.standard_normal(40_000) for name in "abcd"}  # 320 kB each
    for name in "abc":
        assert result_cache.put("blob", name, blobs[name])
    assert result_cache.get("blob", "a") is not None  # a is now more recent than b
    assert result_cache.put("blob", "d", blobs["d"])
    assert result_cache.get("blob", "b") is None  # the least recently used one went
    for name in "acd":
        np.testing.assert_array_equal(result_cache.get("blob", name), blobs[name])
    assert result_cache.stats()["size_bytes"] <= 1_200_000


def test_cached_computes_once_and_counts_hits(cache_dir: Path) -> None:
    calls = []

    def work() -> dict[str, np.ndarray]:
        calls.append(1)
        return {"x": np.ones(3)}

    result_cache.clear()
    first = result_cache.cached("work", ("k", 1), work)
    second = result_cache.cached("work", ("k", 1), work)
    assert len(calls) == 1
    np.testing.assert_array_equal(first["x"], second["x"])
    stats = result_cache.stats()
    assert stats["hits"] == 1 and stats["misses"] == 1 and stats["size_bytes"] > 0
    assert diskcache.Cache(str(cache_dir)).stats() == (1, 1)  # readable by any process


CHILD = """
import sys, numpy as np
from service import compute, result_cache, views
spec = views.InputSpec("clustered", 64, 16, 2, 4, 0.3, 0)
view = views.ExactAttention(spec, 1.5, "cpu")
calls = []
def work():
    calls.append(1)
    return compute.exact_now(view)
value = result_cache.cached("exact", view.key(), work)
print(len(calls), float(value.entropy.sum()))
"""


def run_child(cache_dir: Path) -> tuple[int, float]:
    env = {**os.environ, "ATTN_EXPLORER_CACHE_DIR": str(cache_dir), "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", CHILD], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    computed, entropy = done.stdout.split()
    return int(computed), float(entropy)


def test_two_processes_share_hits(cache_dir: Path) -> None:
    computed_first, entropy_first = run_child(cache_dir)
    computed_second, entropy_second = run_child(cache_dir)
    assert computed_first == 1 and computed_second == 0  # the second process was served the first's result
    assert entropy_second == entropy_first
    hits, misses = diskcache.Cache(str(cache_dir)).stats()
    assert hits >= 1 and misses >= 1
    # and this process reads it too
    spec = small_spec()
    assert isinstance(views.lookup(views.ExactAttention(spec, 1.5, "cpu")), compute.ExactResult)


def test_a_repeat_served_from_memory_is_counted_as_a_hit(cache_dir: Path) -> None:
    spec = small_spec(11)
    params = (("features", 8),)
    before = result_cache.stats()
    first = compute.run_method_scheduled(MethodRun(spec, 3.0, "cpu", "performer", params, 0))
    middle = result_cache.stats()
    assert middle["memory_hits"] == before["memory_hits"]  # computed: not a hit
    again = compute.run_method_scheduled(MethodRun(spec, 3.0, "cpu", "performer", params, 0))
    after = result_cache.stats()
    assert after["memory_hits"] == middle["memory_hits"] + 1
    assert after["hits"] == middle["hits"]  # the disk cache was never asked
    np.testing.assert_array_equal(first.attention, again.attention)


def test_memory_hits_from_many_threads_are_counted_with_few_writes(cache_dir: Path) -> None:
    import threading

    store = result_cache.counters()
    writes: list[int] = []
    real_incr = store.incr

    def counting_incr(key: str, delta: int = 1, **kwargs: object) -> int:
        writes.append(delta)
        return real_incr(key, delta, **kwargs)

    store.incr = counting_incr  # this process's one handle on the counters
    try:
        before = result_cache.stats()["memory_hits"]
        writes.clear()
        threads = [
            threading.Thread(target=lambda: [result_cache.count_memory_hit() for _ in range(100)]) for _ in range(8)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        after = result_cache.stats()["memory_hits"]
    finally:
        del store.incr
    assert after - before == 800  # every hit counted, none lost between threads
    assert sum(writes) == 800
    assert len(writes) <= 10  # batched: one SQLite write per flush, not one per hit


def test_put_soon_serves_the_value_at_once_and_writes_it_to_disk_in_the_background(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    spec = small_spec(21)
    result = compute.run_method_now(MethodRun(spec, 2.0, "cpu", "performer", (("features", 8),), 0))
    release = threading.Event()
    real_put_key = result_cache.put_key

    def slow_put_key(full: str, value: object, expire: float | None = None) -> bool:
        release.wait(timeout=30)  # hold the writer: the value is not on disk yet
        return real_put_key(full, value, expire)

    monkeypatch.setattr(result_cache, "put_key", slow_put_key)
    result_cache.put_soon("run_method", (spec, "soon"), result)
    full = result_cache.make_key("run_method", (spec, "soon"))
    assert full not in diskcache.Cache(str(cache_dir))  # still waiting for the writer
    assert result_cache.get("run_method", (spec, "soon")) is result  # served from memory meanwhile
    release.set()
    result_cache.flush_writes()
    assert full in diskcache.Cache(str(cache_dir))  # another process sees it now
    monkeypatch.setattr(result_cache, "put_key", real_put_key)
    back = result_cache.get("run_method", (spec, "soon"))
    assert back is not result  # decoded from disk
    np.testing.assert_array_equal(back.attention, result.attention)


def test_put_soon_writes_in_the_caller_when_the_writer_falls_behind(
    cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(result_cache, "MAX_PENDING_WRITES", 0)  # the writer counts as full
    result_cache.put_soon("numbers", ("behind",), {"x": np.arange(3.0)})
    full = result_cache.make_key("numbers", ("behind",))
    assert full in diskcache.Cache(str(cache_dir))  # written before put_soon returned


# ------------------------------------------------------------------ the process's memory layer


def test_sessions_share_one_read_only_copy_of_a_method_result(cache_dir: Path) -> None:
    spec = small_spec(21)
    params = (("features", 8),)
    first = compute.run_method_scheduled(MethodRun(spec, 2.5, "cpu", "performer", params, 0))
    again = compute.run_method_scheduled(MethodRun(spec, 2.5, "cpu", "performer", params, 0))
    assert again is first  # no per-reader copy (st.cache_data unpickled one per call)
    for array in (first.attention, first.error, *first.metrics.values()):
        assert not array.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        first.attention[0, 0, 0] = 1.0
    # The disk cache holds the same numbers, for other processes and after a restart.
    result_cache.flush_writes()
    stored = views.lookup(MethodRun(spec, 2.5, "cpu", "performer", params, 0))
    np.testing.assert_array_equal(stored.attention, first.attention)


def test_the_memory_layer_is_bounded_in_bytes_least_recently_used_out_first() -> None:
    value = {"a": np.zeros(1000, np.float64)}  # 8,000 bytes of arrays
    size = result_cache.value_bytes(value)
    assert size == 8000 + result_cache.VALUE_OVERHEAD_BYTES
    layer = result_cache.MemoryLayer(limit=3 * size)
    for i in range(3):
        layer.put(f"k{i}", {"a": np.zeros(1000, np.float64)})
    assert layer.get("k0") is not None  # k0 is now the most recently used; k1 the least
    layer.put("k3", {"a": np.zeros(1000, np.float64)})
    assert layer.get("k1") is None
    assert all(layer.get(k) is not None for k in ("k0", "k2", "k3"))
    assert layer.bytes_used == 3 * size <= layer.limit
    huge = {"a": np.zeros(10_000, np.float64)}
    assert layer.put("huge", huge) is huge and layer.get("huge") is None  # served, not kept
    assert not huge["a"].flags.writeable  # frozen all the same: the caller may share it
    assert layer.bytes_used <= layer.limit


def test_callers_waiting_on_one_key_compute_it_once() -> None:
    import threading
    import time

    layer = result_cache.MemoryLayer(limit=10**6)
    calls: list[int] = []
    results: list[tuple[object, bool]] = []

    def produce() -> dict[str, np.ndarray]:
        calls.append(1)
        time.sleep(0.2)
        return {"a": np.ones(4)}

    threads = [threading.Thread(target=lambda: results.append(layer.remember("same", produce))) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1
    assert sum(not hit for _, hit in results) == 1 and len({id(value) for value, _ in results}) == 1


def test_a_value_produced_from_other_remembered_values_does_not_deadlock() -> None:
    """A method's run remembers exact attention, which remembers the inputs: nested keys, each waited for alone
    (with 65 nested keys, a lock shared by several keys would be taken twice by one thread)."""
    import threading

    layer = result_cache.MemoryLayer(limit=10**6)

    def nested(depth: int) -> dict[str, np.ndarray]:
        if depth == 0:
            return {"a": np.zeros(1)}
        inner, _ = layer.remember(f"key-{depth - 1}", lambda: nested(depth - 1))
        return {"a": inner["a"] + 1}

    results: list[tuple[object, bool]] = []
    thread = threading.Thread(target=lambda: results.append(layer.remember("key-65", lambda: nested(65))), daemon=True)
    thread.start()
    thread.join(20)
    assert not thread.is_alive(), "deadlocked"
    value, hit = results[0]
    assert isinstance(value, dict) and not hit and value["a"][0] == 65
    assert layer.remember("key-3", lambda: {"a": np.full(1, -1.0)})[0]["a"][0] == 3  # kept, not produced again


def test_a_zero_bound_turns_the_memory_layer_off(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTN_EXPLORER_MEMORY_CACHE_BYTES", "0")
    layer = result_cache.memory()
    assert layer.limit == 0 and layer.put("k", {"a": np.ones(3)}) is not None and layer.get("k") is None
    spec, params = small_spec(22), (("features", 8),)
    first = compute.run_method_scheduled(MethodRun(spec, 2.5, "cpu", "performer", params, 0))
    result_cache.flush_writes()
    again = compute.run_method_scheduled(MethodRun(spec, 2.5, "cpu", "performer", params, 0))
    assert again is not first  # decoded from the disk cache
    np.testing.assert_array_equal(again.attention, first.attention)
    for raw, expected in (("", result_cache.DEFAULT_MEMORY_BYTES), ("1e3", 1000)):
        monkeypatch.setenv("ATTN_EXPLORER_MEMORY_CACHE_BYTES", raw)
        assert result_cache.memory_limit() == expected
    for raw in ("junk", "-5", "1.5"):  # refused, naming the variable and its range, instead of a silent fallback
        monkeypatch.setenv("ATTN_EXPLORER_MEMORY_CACHE_BYTES", raw)
        with pytest.raises(ConfigError, match=f"ATTN_EXPLORER_MEMORY_CACHE_BYTES: '{raw}' is not allowed.*at least 0"):
            result_cache.memory_limit()
