"""benchmarks.load end to end in --quick mode: a real server, 3 + 2 websocket sessions, 1 wave, then (c).

No timing thresholds (the machine is shared); the run must finish without errors, every time must be positive, and
the JSON, CSV and markdown files must carry the fields the lead reads. The pure helpers are checked on their own.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks import load


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    out = tmp_path_factory.mktemp("load")
    result = load.main(["--quick", "--out", str(out), "--name", "load_quick"])
    return result, out


@pytest.mark.timeout(150)
def test_quick_run_has_no_errors_and_positive_times(quick_run: tuple[dict[str, Any], Path]) -> None:
    result, _ = quick_run
    (target,) = result["targets"]
    assert target["target"] == "working tree"
    (wave,) = target["waves"]
    assert wave["a"]["sessions"] == 3 and wave["b"]["sessions"] == 2
    for scenario in (wave["a"], wave["b"], target["c"]["idle"], target["c"]["busy"]):
        assert scenario["errors"] == 0, scenario["error_messages"]
        assert 0 < scenario["p50_s"] <= scenario["p95_s"] <= scenario["max_s"]
        assert scenario["p50_s"] <= scenario["done_p50_s"] <= scenario["done_p95_s"]
    metrics = target["metrics"]
    assert metrics["a_errors"] == 0 and metrics["b_errors"] == 0 and metrics["c_errors"] == 0
    for key in ("a_p50_s", "a_p95_s", "b_p95_s", "c_idle_s", "c_busy_s"):
        assert metrics[key] > 0, key
    # The server's resident memory is read from its process tree: a Python process with torch is well over 50 MiB.
    assert 50 < metrics["rss_start_mb"] and 50 < metrics["d_rss_first_wave_mb"]
    assert metrics["d_rss_growth"] == 0.0  # one wave: the last wave is the first
    # Today's app has no shared result cache, so hits are "n/a" (None); once it has one they are counted.
    if metrics["a_cache_hits"] is not None:
        assert metrics["a_cache_hits"] >= 0
    assert target["c"]["heavy"].startswith("Regime_map")
    assert [v["phase"] for v in target["c"]["visits"]] == ["idle", "busy"]
    assert all(v["first_chart_s"] > 0 and v["error"] is None for v in target["c"]["visits"])


@pytest.mark.timeout(150)
def test_quick_run_writes_json_csv_and_markdown(quick_run: tuple[dict[str, Any], Path]) -> None:
    result, out = quick_run
    stored = json.loads((out / "load_quick.json").read_text())
    assert stored["config"]["sessions"] == 3 and stored["config"]["waves"] == 1
    assert stored["targets"][0]["metrics"] == pytest.approx(result["targets"][0]["metrics"], nan_ok=True)
    assert stored["machine"]["cpus"] >= 1
    with open(out / "load_quick.csv", newline="") as handle:
        rows = {row["metric"]: row for row in csv.DictReader(handle)}
    assert float(rows["a_errors"]["working tree"]) == 0
    assert float(rows["a_p95_s"]["working tree"]) > 0 and rows["a_p95_s"]["target_value"] == "<= 8"
    assert rows["a_cache_hits"]["working tree"] in ("", "0") or int(rows["a_cache_hits"]["working tree"]) >= 0
    md = (out / "load_quick.md").read_text()
    assert md.startswith("Command: `python -m benchmarks.load --quick")
    assert "| metric | working tree | target | met |" in md and "| a_p95_s |" in md


@pytest.fixture(scope="module")
def quick_server() -> Iterator[load.Server]:
    with load.app_server(load.ROOT) as server:
        yield server


@pytest.mark.timeout(150)
def test_websocket_client_counts_a_missing_page_as_an_error(quick_server: load.Server) -> None:
    missing = load._run_async(load.ws_session(quick_server.url, "No_such_page", 60))
    assert missing.error is not None and "page not found" in missing.error
    home = load._run_async(load.ws_session(quick_server.url, "?n=128", 60))
    assert home.finished_s is not None and home.finished_s > 0
    assert home.error == "the run finished without a chart"  # Home has no chart: a chart page that lost it fails
    compare = load._run_async(load.ws_session(quick_server.url, "Compare?n=128", 60))
    assert compare.error is None and 0 < compare.first_chart_s <= compare.finished_s
    assert load.server_rss(quick_server) > 50 * 2**20


def test_percentile_and_targets() -> None:
    assert load.percentile([], 50) is None
    assert load.percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert load.percentile([1.0, 2.0, 3.0, 4.0, 5.0], 95) == pytest.approx(4.8)
    sessions = [load.Session("ws", "x", first_chart_s=t, finished_s=t) for t in (1.0, 2.0, 3.0)]
    sessions.append(load.Session("ws", "x", error="timeout after 1 s"))
    sessions.append(load.Session("browser", "x", first_chart_s=30.0, finished_s=30.0))
    summary = load.summarise(sessions)
    assert summary["errors"] == 1 and summary["p50_s"] == 2.0 and summary["max_s"] == 3.0
    assert summary["by_kind"]["browser"]["p50_s"] == 30.0
    assert load._met("a_p95_s", 8.5) == "no" and load._met("a_p95_s", 7.9) == "yes"
    assert load._met("a_errors", None) == "n/a"


def test_bad_sizes_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        load.parse_args(["--sessions", "0"])
    assert "--sessions must be at least 1" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        load.parse_args(["--sessions", "2", "--browsers", "3"])
    assert "--browsers must be between 0 and --sessions (2)" in capsys.readouterr().err
    _, cfg = load.parse_args(["--quick", "--sessions", "4"])
    assert cfg.sessions == 4 and cfg.waves == 1 and cfg.browsers == 0 and cfg.query == "n=128"


def test_cache_stats_reads_the_redis_counters_the_app_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """benchmarks/load_cluster.py counts the multi-host layout's hits in Redis, where service.result_cache counts
    them."""
    import numpy as np

    from benchmarks.load_cluster import LayoutServer
    from service import result_cache
    from tests.redis_server import RedisServer

    server = RedisServer().start()
    try:
        monkeypatch.setenv("ATTN_EXPLORER_CACHE_URL", server.url)
        monkeypatch.setenv("ATTN_EXPLORER_CACHE_DIR", str(tmp_path / "unused"))
        result_cache.memory().clear()
        layout = LayoutServer("http://127.0.0.1:1", tmp_path / "unused", cache_url=server.url)
        assert load.cache_stats(layout) == {"hits": 0, "misses": 0}
        assert result_cache.get("numbers", 1) is None  # a miss
        assert result_cache.put("numbers", 1, {"x": np.arange(3.0)})
        result_cache.memory().clear()
        assert result_cache.get("numbers", 1) is not None  # a hit in Redis
        result_cache.flush_counters()
        stats = load.cache_stats(layout)
        assert stats is not None and stats["hits"] >= 1 and stats["misses"] >= 1
        assert stats["hits"] == result_cache.stats()["hits"] + result_cache.stats()["memory_hits"]
    finally:
        result_cache.memory().clear()
        server.stop()
