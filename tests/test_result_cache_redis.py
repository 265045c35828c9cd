"""The result cache on Redis (``ATTN_EXPLORER_CACHE_URL``), against a real ``redis-server`` on a loopback port.

The disk backend's suite (tests/test_result_cache.py) runs here again with the URL set: its tests are imported and
this module's ``cache_dir`` fixture points the cache at Redis. The tests of that suite that open the diskcache folder
directly have their Redis counterparts below, next to what only Redis has: a server that goes away and comes back,
its own LRU bound, and hosts sharing entries.
"""

from __future__ import annotations

import io
import json
import logging
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import test_result_cache as disk_suite
from redis_server import RedisServer

from core.errors import ConfigError
from service import compute, result_cache, views

# The disk backend's tests that do not open the diskcache folder, run against Redis by the fixture below.
test_method_result_round_trip = disk_suite.test_method_result_round_trip
test_contains_answers_without_decoding = disk_suite.test_contains_answers_without_decoding
test_nested_values_round_trip = disk_suite.test_nested_values_round_trip
test_array_shapes_survive_the_round_trip = disk_suite.test_array_shapes_survive_the_round_trip
test_dataclasses_outside_the_project_are_refused = disk_suite.test_dataclasses_outside_the_project_are_refused
test_engine_version_is_in_the_key = disk_suite.test_engine_version_is_in_the_key
test_a_repeat_served_from_memory_is_counted_as_a_hit = disk_suite.test_a_repeat_served_from_memory_is_counted_as_a_hit
test_memory_hits_from_many_threads_are_counted_with_few_writes = (
    disk_suite.test_memory_hits_from_many_threads_are_counted_with_few_writes
)
test_sessions_share_one_read_only_copy_of_a_method_result = (
    disk_suite.test_sessions_share_one_read_only_copy_of_a_method_result
)
test_a_zero_bound_turns_the_memory_layer_off = disk_suite.test_a_zero_bound_turns_the_memory_layer_off
small_spec = disk_suite.small_spec
RESULT_LOG = "service.result_cache"


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer().start()
    yield server
    server.stop()


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, redis_server: RedisServer) -> Iterator[Path]:
    """The result cache on a fresh Redis database (and a folder that must stay empty)."""
    where = tmp_path / "cache"
    monkeypatch.setenv("ATTN_EXPLORER_CACHE_DIR", str(where))
    monkeypatch.delenv("ATTN_EXPLORER_CACHE_BYTES", raising=False)
    monkeypatch.setenv("ATTN_EXPLORER_CACHE_URL", redis_server.url)
    redis_server.client().flushall()
    result_cache.memory().clear()  # values another test (or the disk suite) left in this process's memory layer
    yield where
    result_cache.flush_writes()
    assert not where.exists(), "the on-disk cache was used although ATTN_EXPLORER_CACHE_URL was set"


def stored_keys(server: RedisServer) -> list[str]:
    return sorted(key.decode() for key in server.client().scan_iter(match=result_cache.REDIS_RESULTS + "*"))


def test_the_url_chooses_redis_and_nothing_is_written_to_the_folder(cache_dir: Path, redis_server: RedisServer) -> None:
    assert result_cache.redis_store() is not None and result_cache.backend_problem() is None
    assert result_cache.put("numbers", 1, {"x": np.arange(3.0)})
    full = result_cache.make_key("numbers", 1)
    assert stored_keys(redis_server) == [result_cache.REDIS_RESULTS + full]
    assert not cache_dir.exists()  # no diskcache was opened


def test_without_the_url_the_folder_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ATTN_EXPLORER_CACHE_URL", raising=False)
    monkeypatch.setenv("ATTN_EXPLORER_CACHE_DIR", str(tmp_path / "cache"))
    assert result_cache.redis_store() is None and result_cache.backend_problem() is None
    assert result_cache.put("numbers", 2, {"x": np.arange(3.0)})
    assert (tmp_path / "cache" / "cache.db").is_file()


def test_a_url_that_is_not_redis_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    for raw in ("http://127.0.0.1:6379", "127.0.0.1:6379", "redis://"):
        monkeypatch.setenv("ATTN_EXPLORER_CACHE_URL", raw)
        with pytest.raises(ConfigError, match="ATTN_EXPLORER_CACHE_URL: .* is not allowed.*redis://"):
            result_cache.cache_url()


def test_stored_value_is_the_same_npz_bytes_never_a_pickle(cache_dir: Path, redis_server: RedisServer) -> None:
    spec = small_spec()
    value = compute.exact_now(views.ExactAttention(spec, 1.0, "cpu"))
    result_cache.put("exact", spec, value)
    stored = redis_server.client().get(result_cache.REDIS_RESULTS + result_cache.make_key("exact", spec))
    assert stored == result_cache.encode(value)  # byte for byte what the disk backend stores
    assert stored[:2] == b"PK"  # a zip (npz) archive; a pickle starts with b"\x80"
    with np.load(io.BytesIO(stored), allow_pickle=False) as archive:
        meta = json.loads(archive["__meta__"].tobytes())
    assert meta["__dc__"] == "service.compute:ExactResult"


def test_an_unreadable_entry_is_a_miss_and_is_dropped(cache_dir: Path, redis_server: RedisServer) -> None:
    full = result_cache.make_key("numbers", "tampered")
    redis_server.client().set(result_cache.REDIS_RESULTS + full, b"\x80\x04not an archive")
    assert result_cache.get("numbers", "tampered") is None
    assert stored_keys(redis_server) == []


def test_objects_that_are_not_plain_data_are_not_stored(cache_dir: Path, redis_server: RedisServer) -> None:
    class Opaque:
        pass

    assert not result_cache.put("opaque", 1, {"x": Opaque()})
    assert result_cache.get("opaque", 1) is None
    assert stored_keys(redis_server) == []


def test_cached_computes_once_and_counts_hits(cache_dir: Path, redis_server: RedisServer) -> None:
    calls = []

    def work() -> dict[str, np.ndarray]:
        calls.append(1)
        return {"x": np.ones(3)}

    result_cache.put("other", 1, {"y": 1})
    result_cache.get("other", 1)
    result_cache.clear()  # drops entries and resets hits and misses
    first = result_cache.cached("work", ("k", 1), work)
    second = result_cache.cached("work", ("k", 1), work)
    assert len(calls) == 1
    np.testing.assert_array_equal(first["x"], second["x"])
    stats = result_cache.stats()
    assert stats["hits"] == 1 and stats["misses"] == 1
    assert stats["size_bytes"] == len(redis_server.client().get(stored_keys(redis_server)[0]))
    counters = redis_server.client().mget([result_cache.REDIS_COUNTERS + name for name in ("hits", "misses")])
    assert counters == [b"1", b"1"]  # readable by any process on any host


def test_another_process_is_served_this_ones_entry_and_counts_its_hit(
    cache_dir: Path, redis_server: RedisServer
) -> None:
    view = views.ExactAttention(small_spec(), 1.5, "cpu")  # what disk_suite.CHILD computes
    value = result_cache.cached("exact", view.key(), lambda: compute.exact_now(view))
    before = result_cache.stats()
    other_host_folder = cache_dir.parent / "elsewhere"
    computed, entropy = disk_suite.run_child(other_host_folder)  # inherits ATTN_EXPLORER_CACHE_URL
    assert computed == 0 and entropy == float(value.entropy.sum())  # a put here is a hit there
    assert not cache_dir.exists() and not other_host_folder.exists()  # neither process used a folder
    assert result_cache.stats()["hits"] == before["hits"] + 1  # its hit is in the shared counters


def test_put_soon_serves_the_value_at_once_and_writes_it_in_the_background(
    cache_dir: Path, redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    release = threading.Event()
    real_put_key = result_cache.put_key

    def slow_put_key(full: str, value: object, expire: float | None = None) -> bool:
        release.wait(timeout=30)
        return real_put_key(full, value, expire)

    monkeypatch.setattr(result_cache, "put_key", slow_put_key)
    value = {"x": np.arange(5.0)}
    result_cache.put_soon("numbers", "soon", value)
    assert stored_keys(redis_server) == []  # still waiting for the writer
    assert result_cache.get("numbers", "soon") is value  # served from memory meanwhile
    release.set()
    result_cache.flush_writes()
    assert len(stored_keys(redis_server)) == 1  # every host sees it now
    monkeypatch.setattr(result_cache, "put_key", real_put_key)
    back = result_cache.get("numbers", "soon")
    assert back is not value
    np.testing.assert_array_equal(back["x"], value["x"])


def test_put_soon_writes_in_the_caller_when_the_writer_falls_behind(
    cache_dir: Path, redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(result_cache, "MAX_PENDING_WRITES", 0)
    result_cache.put_soon("numbers", ("behind",), {"x": np.arange(3.0)})
    assert len(stored_keys(redis_server)) == 1  # written before put_soon returned


# ------------------------------------------------------------------ Redis's own bound, and a server that goes away


def test_redis_maxmemory_lru_evicts_old_entries_and_reads_stay_correct(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    bound = ("--maxmemory", "6mb", "--maxmemory-policy", "allkeys-lru", "--maxmemory-samples", "10")
    server = RedisServer(None, *bound).start()
    # The counters' background flush is a write, and at maxmemory any write may evict: one landing between the
    # reads below would evict an entry that `kept` still lists (seen in a CI run). This test's counts are flushed
    # in `finally`, to its own server.
    monkeypatch.setattr(result_cache, "_flush_quietly", lambda: None)
    try:
        monkeypatch.setenv("ATTN_EXPLORER_CACHE_URL", server.url)
        rng = np.random.default_rng(0)
        blobs = [rng.standard_normal(40_000) for _ in range(20)]  # 320 kB each: 8 old ones fit, all 20 do not
        with caplog.at_level(logging.WARNING, logger=RESULT_LOG):
            for i in range(8):
                assert result_cache.put("blob", i, blobs[i])
            assert all(result_cache.contains("blob", i) for i in range(8))
            time.sleep(1.3)  # Redis's LRU clock counts whole seconds: the old entries must be a second older
            for i in range(8, 20):
                assert result_cache.put("blob", i, blobs[i])  # never refused: Redis evicts to make room
        assert not [r for r in caplog.records if "maxmemory" in r.getMessage()]  # bounded: no warning
        kept = [i for i in range(20) if result_cache.contains("blob", i)]
        assert kept[-12:] == list(range(8, 20)) and len(kept) < 20, kept  # only old entries went
        for i in range(20):
            back = result_cache.get("blob", i)
            assert (back is None) == (i not in kept) and (back is None or np.array_equal(back, blobs[i])), i
        assert result_cache.stats()["size_bytes"] <= 6 * 2**20
    finally:
        result_cache.flush_counters()
        server.stop()


def test_an_unbounded_server_gets_one_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    server = RedisServer().start()  # maxmemory 0: grows until the host runs out
    try:
        monkeypatch.setenv("ATTN_EXPLORER_CACHE_URL", server.url)
        with caplog.at_level(logging.WARNING, logger=RESULT_LOG):
            for i in range(3):
                assert result_cache.put("numbers", i, {"x": np.arange(3.0)})
        warnings = [r.getMessage() for r in caplog.records if "maxmemory" in r.getMessage()]
        assert len(warnings) == 1 and "allkeys-lru" in warnings[0]
    finally:
        server.stop()


def test_redis_going_away_degrades_to_misses_says_so_once_and_recovers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(result_cache, "REDIS_RETRY_S", 0.5)
    server = RedisServer(None, "--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru").start()
    try:
        monkeypatch.setenv("ATTN_EXPLORER_CACHE_DIR", str(tmp_path / "cache"))
        monkeypatch.setenv("ATTN_EXPLORER_CACHE_URL", server.url)
        value = {"x": np.arange(4.0)}
        assert result_cache.put("numbers", "before", value)
        server.stop()
        calls: list[int] = []
        with caplog.at_level(logging.WARNING, logger=RESULT_LOG):
            started = time.monotonic()
            assert result_cache.get("numbers", "before") is None  # a miss, not an exception
            assert not result_cache.put("numbers", "during", value)
            assert not result_cache.contains("numbers", "before")
            back = result_cache.cached("numbers", "computed", lambda: calls.append(1) or value)
            assert back is value and calls == [1]  # the page computes without the cache
            assert result_cache.stats()["size_bytes"] == 0
            assert time.monotonic() - started < 2 * result_cache.REDIS_TIMEOUT_S
            problem = result_cache.backend_problem()
            assert problem is not None and f"127.0.0.1:{server.port}" in problem
            time.sleep(result_cache.REDIS_RETRY_S + 0.1)
            assert result_cache.get("numbers", "before") is None  # retried after the back-off: still down
            assert result_cache.backend_problem() is not None
        # This server's outage: counts an earlier test left pending for its own, stopped server may be flushed now.
        outage = [
            r
            for r in caplog.records
            if r.levelno == logging.WARNING
            and "does not answer" in r.getMessage()
            and f"127.0.0.1:{server.port}" in r.getMessage()
        ]
        assert len(outage) == 1  # said once per outage, not once per call

        server.start()  # same port, empty (no persistence)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger=RESULT_LOG):
            time.sleep(result_cache.REDIS_RETRY_S + 0.1)
            assert result_cache.backend_problem() is None  # asked again after the back-off: back
            assert result_cache.put("numbers", "after", value)
            np.testing.assert_array_equal(result_cache.get("numbers", "after")["x"], value["x"])
        assert any("answers again" in r.getMessage() for r in caplog.records)
    finally:
        server.stop()


def test_a_server_that_never_answers_does_not_hold_a_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A listening socket nobody reads: connections open, replies never come (a hung or overloaded server).
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        monkeypatch.setenv("ATTN_EXPLORER_CACHE_URL", f"redis://127.0.0.1:{silent.getsockname()[1]}/0")
        started = time.monotonic()
        assert result_cache.get("numbers", "hung") is None
        waited = time.monotonic() - started
        assert waited < 1.5, waited  # one short socket timeout (0.5 s), not redis-py's default of 5 s
        assert result_cache.backend_problem() is not None
        started = time.monotonic()
        assert not result_cache.put("numbers", "hung", {"x": np.arange(2.0)})  # within the back-off: no wait
        assert time.monotonic() - started < 0.1


def test_a_restart_between_two_calls_is_not_an_outage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    server = RedisServer(None, "--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru").start()
    try:
        monkeypatch.setenv("ATTN_EXPLORER_CACHE_URL", server.url)
        assert result_cache.put("numbers", "kept", {"x": np.arange(2.0)})
        server.stop()
        server.start()  # the pooled connection is now stale: it is reopened, not taken for a dead server
        with caplog.at_level(logging.WARNING, logger=RESULT_LOG):
            assert result_cache.get("numbers", "kept") is None  # empty after the restart
            assert result_cache.put("numbers", "kept", {"x": np.arange(2.0)})
        assert result_cache.backend_problem() is None and not caplog.records
    finally:
        server.stop()


def test_a_page_without_its_redis_computes_and_says_so_once(monkeypatch: pytest.MonkeyPatch, open_page) -> None:
    """Redis gone (nothing listens on the port): the page still draws its charts, and names the cache once."""
    import socket

    with socket.socket() as probe:  # a free loopback port, closed again: connections are refused
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("ATTN_EXPLORER_CACHE_URL", f"redis://127.0.0.1:{port}/0")
    at = open_page("pages/1_Compare.py", n="64", seed="11")
    assert not at.exception, [e.value for e in at.exception]
    assert at.get("plotly_chart"), "the page computed without the cache"
    notices = [w.value for w in at.warning if "Result cache" in w.value]
    assert len(notices) == 1, [w.value for w in at.warning]
    at.run()
    assert len([w.value for w in at.warning if "Result cache" in w.value]) <= 1
