"""Load benchmark: many concurrent sessions against a live app server, as a class opening one shared link.

    python -m benchmarks.load                      # 40 + 20 sessions x 3 waves, 3 of them in Chromium
    python -m benchmarks.load --baseline main      # the same scenarios against `main` too, side by side
    python -m benchmarks.load --quick --out /tmp/x # 3 + 2 websocket sessions, 1 wave (the test's smoke run)

Each target (the working tree, and with ``--baseline REF`` a temporary ``git worktree`` of REF run with the same
Python) gets its own fresh server, started as the README's app command (``streamlit run app.py --server.headless
true --server.address 127.0.0.1 --server.port P --server.fileWatcherType none``) with an empty result-cache folder.
Most sessions are clients that speak Streamlit's own protocol on ``/_stcore/stream`` (the ``BackMsg`` /
``ForwardMsg`` protobufs the streamlit package ships; one small coroutine each, so the driver costs the server
little); ``--browsers`` of them are headless Chromium contexts (Playwright, system Chromium).

Time to first chart: from opening the connection (or ``page.goto``) to the first delta carrying a chart element
(plotly_chart, vega_lite_chart, imgs, dataframe, arrow_data_frame) / the first chart node in the page. An error is an
exception element, a page-not-found, a socket closed before the run finished, a run that ends without a chart, or a
session over ``--timeout``. p50/p95 are over the websocket sessions (the server's part); Chromium runs on the
server's own cores here and adds its page load and chart drawing, so its times are reported apart (``*_browser_*``,
and a calibration: one setting computed, then opened again by both clients). ``done`` = until the run finished.

Scenarios (issue 10 targets on this 2-core machine):
  (a) ``--sessions`` sessions on the same default link (Compare): 0 errors, p95 <= 8 s, >= sessions - 1 cache hits;
  (b) ``--distinct`` sessions with as many different settings (seed varies; new seeds every wave): 0 errors,
      p95 <= 15 s;
  (c) a light page's time to first chart idle, then while a heavy link computes (opened, then abandoned like a
      closed tab): within 1 s of idle; also how long the server stays busy after the heavy link is abandoned;
  (d) server RSS (sum over its process tree) after the last wave within 10 % of after the first. Measured twice:
      at once when the wave's last session has finished (``d_rss_growth``, the target's reading), and again once
      the server is quiet, i.e. after the work done ahead and the idle trimmer (``d_rss_settled_growth``). The
      first also counts freed memory the allocator has not yet given back, and swings with the timing.
A wave is (a) then (b). Cache hits are engine calls (one per method and session) served from a cache: the hits of the
shared on-disk result cache (``diskcache.Cache(dir).stats()``) plus the app's count of calls a process answered from its
own memory cache (``<dir>/counters``), with ``<dir>`` = ``ATTN_EXPLORER_CACHE_DIR``; "n/a" when the server has no
such folder (code before the shared cache).
The server runs with its start-up warm-up off (``ATTN_EXPLORER_WARMUP=0``): the waves meet an empty cache with
nothing else running, so wave 1's one link is computed once while its sessions wait for it (the cache's coalescing),
and no wave or settle wait shares the cores with the warm-up's links. What the warm-up buys a first visitor is
``benchmarks.first_visit``'s to measure.
Results: ``benchmarks/results/<name>.json``, ``.csv`` and ``.md`` (name ``load_cpu`` by default).
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import math
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.harness import (
    CHROMIUM,
    RESULTS_DIR,
    ROOT,
    VIEWPORT,
    Server,
    app_server,
    baseline_tree,
    chromium_options,
    commit,
    machine_facts,
    server_rss,
    wait_quiet,
    write_results,
)

CHART_ELEMENTS = frozenset({"plotly_chart", "vega_lite_chart", "imgs", "dataframe", "arrow_data_frame"})
PLOTLY_COMPONENT = "attention_explorer.plotly_chart"  # ui/plotly_chart.py: the served app's Plotly figures
CHART_SELECTOR = ", ".join(
    f"[data-testid='{t}']"
    for t in ("stPlotlyChart", "aePlotlyChart", "stVegaLiteChart", "stImage", "stDataFrame", "stArrowVegaLiteChart")
)
# ScriptFinishedStatus values that mean the page did not run to the end.
COMPILE_ERROR = 1

TARGETS = {
    "a_errors": ("== 0", lambda v: v == 0),
    "a_p95_s": ("<= 8", lambda v: v <= 8),
    "b_errors": ("== 0", lambda v: v == 0),
    "b_p95_s": ("<= 15", lambda v: v <= 15),
    "c_slowdown_s": ("<= 1", lambda v: v <= 1),
    "d_rss_growth": ("<= 0.10", lambda v: v <= 0.10),
    "d_rss_settled_growth": ("<= 0.10", lambda v: v <= 0.10),
}


@dataclass
class Session:
    """One client's visit: what it opened and what it saw."""

    kind: str  # "ws" or "browser"
    path: str  # page path and query, e.g. "Compare?seed=3"
    first_chart_s: float | None = None
    finished_s: float | None = None
    error: str | None = None
    texts: list[str] = field(default_factory=list)  # websocket sessions: the markdown and alerts the page drew


# The servers measured here start without their warm-up (see the module's docstring).
WARMUP_OFF = {"ATTN_EXPLORER_WARMUP": "0"}
WARMUP_OFF_TEXT = (
    "Servers started with their start-up warm-up off (`ATTN_EXPLORER_WARMUP=0`): the first wave meets an empty "
    "cache, and nothing but the sessions runs."
)


@dataclass
class Config:
    sessions: int = 40
    distinct: int = 20
    waves: int = 3
    browsers: int = 3
    page: str = "Compare"
    query: str = ""  # added to every link (e.g. "n=128" in quick mode)
    light: str = "Compare"
    # Within the default limits (estimated about 30 s, so it runs rather than being refused up front).
    heavy: str = "Regime_map?n=384&nb=12&ns=8&seeds=1"
    heavy_lead_s: float = 3.0  # the heavy link computes alone this long before the light page opens
    light_repeats: int = 3
    timeout_s: float = 180.0
    settle_s: float = 60.0  # longest wait for the server's CPU to go quiet before a measurement
    extra: dict[str, Any] = field(default_factory=dict)


# ------------------------------------------------------------------ server


REDIS_COUNTERS = "attn-explorer:counters:"  # service.result_cache.RedisCounters' key prefix


def cache_stats(server: Server) -> dict[str, int] | None:
    """Hits and misses of the shared result cache, or None when the app has none (no folder, no diskcache).

    A server with a ``cache_url`` (the multi-host layout, benchmarks/load_cluster.py) counts in Redis instead.
    """
    cache_url = getattr(server, "cache_url", None)
    if cache_url:
        import redis

        client = redis.Redis.from_url(cache_url)
        try:
            hits, misses, memory_hits = (
                int(client.get(REDIS_COUNTERS + name) or 0) for name in ("hits", "misses", "memory_hits")
            )
        finally:
            client.close()
        return {"hits": hits + memory_hits, "misses": misses}
    if not server.cache_dir.is_dir():
        return None
    try:
        import diskcache  # type: ignore[import-untyped]
    except ImportError:
        return None
    with diskcache.Cache(str(server.cache_dir)) as cache:
        hits, misses = cache.stats()
    # Engine calls a server process answered from its own memory cache (service.result_cache.count_memory_hit) never
    # reach the disk cache's statistics; the app counts them in a small cache of their own.
    memory_hits = 0
    if (server.cache_dir / "counters").is_dir():
        with diskcache.Cache(str(server.cache_dir / "counters")) as store:
            memory_hits = int(store.get("memory_hits", 0))
    return {"hits": int(hits) + memory_hits, "misses": int(misses)}


# ------------------------------------------------------------------ clients


def _split(path: str) -> tuple[str, str]:
    page, _, query = path.partition("?")
    return page.strip("/"), query


def stream_url(base_url: str) -> str:
    """The websocket URL of Streamlit's session stream on a server at ``base_url`` (http://host:port)."""
    return base_url.replace("http://", "ws://", 1) + "/_stcore/stream"


async def ws_session(base_url: str, path: str, timeout_s: float) -> Session:
    """Open ``path`` the way the frontend does: connect, send rerun_script with the page and query, read deltas."""
    import websockets
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    result = Session("ws", path)
    page, query = _split(path)
    ws_url = stream_url(base_url)
    start = time.perf_counter()
    try:
        async with asyncio.timeout(timeout_s):
            # The frontend's subprotocol header: "streamlit", then the XSRF token (none without a cookie).
            async with websockets.connect(ws_url, subprotocols=["streamlit"], max_size=None) as ws:  # type: ignore[list-item]
                request = BackMsg()
                request.rerun_script.query_string = query
                request.rerun_script.page_name = page
                await ws.send(request.SerializeToString())
                async for data in ws:
                    msg = ForwardMsg()
                    msg.ParseFromString(data)
                    kind = msg.WhichOneof("type")
                    if kind == "page_not_found":
                        result.error = f"page not found: {page!r}"
                    elif kind == "delta" and msg.delta.WhichOneof("type") == "new_element":
                        element = msg.delta.new_element.WhichOneof("type")
                        if element == "bidi_component":
                            name = msg.delta.new_element.bidi_component.component_name
                            element = "plotly_chart" if name == PLOTLY_COMPONENT else element
                        if element in CHART_ELEMENTS and result.first_chart_s is None:
                            result.first_chart_s = time.perf_counter() - start
                        elif element == "exception" and result.error is None:
                            exc = msg.delta.new_element.exception
                            result.error = f"exception: {exc.type}: {exc.message}"[:300]
                        elif element in ("markdown", "alert"):
                            result.texts.append(getattr(msg.delta.new_element, element).body)
                    elif kind == "script_finished":
                        result.finished_s = time.perf_counter() - start
                        if msg.script_finished == COMPILE_ERROR and result.error is None:
                            result.error = "script failed to compile"
                        break
                else:
                    result.error = result.error or "socket closed before the run finished"
    except TimeoutError:
        result.error = result.error or f"timeout after {timeout_s:.0f} s"
    except (OSError, websockets.WebSocketException) as error:
        result.error = result.error or f"connection: {type(error).__name__}: {error}"[:300]
    if result.error is None and result.first_chart_s is None:
        result.error = "the run finished without a chart"
    return result


async def browser_session(browser: Any, base_url: str, path: str, timeout_s: float, *, chart: bool = True) -> Session:
    """The same visit in a fresh Chromium context: goto, first chart node attached, then the run finished."""
    result = Session("browser", path)
    context = await browser.new_context(viewport=VIEWPORT)
    page = await context.new_page()
    ms = timeout_s * 1000
    start = time.perf_counter()
    try:
        await page.goto(f"{base_url}/{path}", timeout=ms)
        if chart:
            await page.wait_for_selector(CHART_SELECTOR, state="attached", timeout=ms)
            result.first_chart_s = time.perf_counter() - start
        await page.wait_for_selector(
            "[data-testid='stApp'][data-test-script-state='notRunning']", state="attached", timeout=ms
        )
        result.finished_s = time.perf_counter() - start
        exceptions = page.locator("[data-testid='stException']")
        if await exceptions.count():
            result.error = f"exception: {(await exceptions.first.inner_text())[:300]}"
    except Exception as error:  # Playwright's timeouts and closed pages; counted, never fatal for the wave
        result.error = f"browser: {type(error).__name__}: {str(error).splitlines()[0][:300]}"
    finally:
        await context.close()
    return result


async def run_wave(server: Server, paths: list[str], browsers: int, browser: Any, timeout_s: float) -> list[Session]:
    """Open every path at once; the first ``browsers`` paths in Chromium, the rest over the websocket."""
    jobs = []
    for i, path in enumerate(paths):
        if i < browsers and browser is not None:
            jobs.append(browser_session(browser, server.url, path, timeout_s))
        else:
            jobs.append(ws_session(server.url, path, timeout_s))
    return list(await asyncio.gather(*jobs))


# ------------------------------------------------------------------ scenarios


def percentile(values: list[float], q: float) -> float | None:
    """Linear-interpolated percentile (q in 0..100); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    low, high = math.floor(pos), math.ceil(pos)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def summarise(sessions: list[Session]) -> dict[str, Any]:
    """Errors over every session; p50/p95 over the websocket sessions (the server's part), browsers apart.

    Chromium runs on the server's own cores here, so its times add the client's page load and chart drawing,
    which a student's own machine would do; they are reported under by_kind.
    """
    ws_only = any(s.kind == "ws" for s in sessions)
    times = [
        s.first_chart_s
        for s in sessions
        if s.error is None and s.first_chart_s is not None and (s.kind == "ws" or not ws_only)
    ]
    done = [s.finished_s for s in sessions if s.error is None and s.finished_s is not None and s.kind == "ws"]
    errors = [f"{s.kind} {s.path}: {s.error}" for s in sessions if s.error is not None]
    by_kind = {}
    for kind in ("ws", "browser"):
        own = [s.first_chart_s for s in sessions if s.kind == kind and s.error is None and s.first_chart_s]
        if own:
            by_kind[kind] = {"count": len(own), "p50_s": percentile(own, 50)}
    return {
        "sessions": len(sessions),
        "errors": len(errors),
        "error_messages": errors[:10],
        "p50_s": percentile(times, 50),
        "p95_s": percentile(times, 95),
        "max_s": max(times) if times else None,
        # until the run finished (every element sent), websocket sessions
        "done_p50_s": percentile(done, 50),
        "done_p95_s": percentile(done, 95),
        "by_kind": by_kind,
    }


def _with_query(path: str, extra: str) -> str:
    if not extra:
        return path
    return f"{path}{'&' if '?' in path else '?'}{extra}"


def _hits(before: dict[str, int] | None, after: dict[str, int] | None) -> int | None:
    if before is None and after is None:
        return None
    before = before or {"hits": 0, "misses": 0}
    after = after or {"hits": 0, "misses": 0}
    return after["hits"] - before["hits"]


async def run_target(root: Path, cfg: Config, label: str) -> dict[str, Any]:
    """Every scenario against one fresh server started from ``root``."""
    out: dict[str, Any] = {"target": label, "root": str(root), "commit": commit(root), "waves": []}
    browser = playwright = None
    if cfg.browsers > 0:
        from playwright.async_api import async_playwright

        playwright = await async_playwright().start()
        browser = await playwright.chromium.launch(**chromium_options())
    try:
        with app_server(root, env=WARMUP_OFF) as server:
            # One visit to Home first: the process imports torch and the app once, as any deployed server has.
            warm = await ws_session(server.url, _with_query("", cfg.query), cfg.timeout_s)
            out["warmup_s"] = warm.finished_s
            out["rss_start_mb"] = server_rss(server) / 2**20
            print(f"[{label}] server {server.url} warm in {warm.finished_s or float('nan'):.1f} s", flush=True)
            if browser is not None:
                out["calibration"] = await calibrate(server, browser, cfg, label)
            for wave in range(cfg.waves):
                record: dict[str, Any] = {"wave": wave + 1}
                record["settle_before_s"] = wait_quiet(server, cfg.settle_s)
                record["rss_before_mb"] = server_rss(server) / 2**20
                stats0 = cache_stats(server)
                same = [_with_query(cfg.page, cfg.query)] * cfg.sessions
                record["a"] = summarise(await run_wave(server, same, cfg.browsers, browser, cfg.timeout_s))
                stats1 = cache_stats(server)
                record["a"]["cache_hits"] = _hits(stats0, stats1)
                base = 1 + (wave + 1) * 1000  # fresh seeds every wave, so each wave computes new settings
                paths = [_with_query(f"{cfg.page}?seed={base + i}", cfg.query) for i in range(cfg.distinct)]
                record["b"] = summarise(await run_wave(server, paths, 0, None, cfg.timeout_s))
                record["b"]["cache_hits"] = _hits(stats1, cache_stats(server))
                record["rss_after_mb"] = server_rss(server) / 2**20
                record["load_average"] = [round(x, 2) for x in os.getloadavg()]
                record["settle_after_s"] = wait_quiet(server, cfg.settle_s)
                time.sleep(1.0)  # the idle trimmer polls every 0.5 s
                record["rss_settled_mb"] = server_rss(server) / 2**20
                out["waves"].append(record)
                print(f"[{label}] wave {wave + 1}: {_wave_line(record)}", flush=True)
            out["c"] = await scenario_c(server, cfg, label)
            out["rss_end_mb"] = server_rss(server) / 2**20
            out["server_log_tail"] = server.log_tail(1500)
    finally:
        if browser is not None:
            await browser.close()
        if playwright is not None:
            await playwright.stop()
    out["metrics"] = headline(out)
    return out


async def calibrate(server: Server, browser: Any, cfg: Config, label: str) -> dict[str, Any]:
    """Is the websocket client's time comparable with Chromium's? One setting, alone on a quiet server.

    The websocket client computes it first (cold); then Chromium and the websocket client open it again (cached), so
    the difference of the last two is what the browser adds (page, scripts, rendering) on top of the server's part.
    """
    path = _with_query(f"{cfg.page}?seed=9101", cfg.query)
    # Chromium's own start (Home has no chart)
    warm = await browser_session(browser, server.url, _with_query("", cfg.query), cfg.timeout_s, chart=False)
    wait_quiet(server, cfg.settle_s)
    ws_cold = await ws_session(server.url, path, cfg.timeout_s)
    wait_quiet(server, cfg.settle_s)
    browser_cached = await browser_session(browser, server.url, path, cfg.timeout_s)
    wait_quiet(server, cfg.settle_s)
    ws_cached = await ws_session(server.url, path, cfg.timeout_s)
    result: dict[str, Any] = {
        "path": path,
        "browser_warmup": asdict(warm),
        "ws_cold": asdict(ws_cold),
        "browser_cached": asdict(browser_cached),
        "ws_cached": asdict(ws_cached),
    }
    if browser_cached.first_chart_s is not None and ws_cached.first_chart_s is not None:
        result["browser_overhead_s"] = browser_cached.first_chart_s - ws_cached.first_chart_s
    print(
        f"[{label}] calibration: websocket cold {_fmt(ws_cold.first_chart_s)} s; cached: websocket "
        f"{_fmt(ws_cached.first_chart_s)} s, Chromium {_fmt(browser_cached.first_chart_s)} s to first chart",
        flush=True,
    )
    return result


async def scenario_c(server: Server, cfg: Config, label: str, *, quiet_below: float = 0.15) -> dict[str, Any]:
    """A light page idle, then while a heavy link computes; the heavy link is then abandoned like a closed tab.
    ``quiet_below``: the share of a core under which the server counts as quiet (more where idle processes, such as
    Dask's, use some)."""
    result: dict[str, Any] = {"light": cfg.light, "heavy": _with_query(cfg.heavy, cfg.query)}
    idle, busy = [], []
    for i in range(cfg.light_repeats):
        wait_quiet(server, cfg.settle_s, busy_below=quiet_below)
        visit = await ws_session(server.url, _with_query(f"{cfg.light}?seed={8001 + i}", cfg.query), cfg.timeout_s)
        idle.append(visit)
    wait_quiet(server, cfg.settle_s, busy_below=quiet_below)
    heavy = asyncio.create_task(ws_session(server.url, result["heavy"], cfg.timeout_s))
    await asyncio.sleep(cfg.heavy_lead_s)
    for i in range(cfg.light_repeats):
        visit = await ws_session(server.url, _with_query(f"{cfg.light}?seed={8101 + i}", cfg.query), cfg.timeout_s)
        busy.append(visit)
    heavy_done = heavy.done()
    heavy.cancel()  # closes its socket: the stranger closed the tab
    heavy_result = None
    try:
        heavy_result = await heavy
    except asyncio.CancelledError:
        pass
    abandoned_at = time.monotonic()
    # How long the server keeps computing for nobody (capped at settle_s).
    result["busy_after_abandon_s"] = wait_quiet(server, cfg.settle_s, busy_below=quiet_below)
    result["heavy_still_busy_at_end"] = time.monotonic() - abandoned_at >= cfg.settle_s
    result["heavy_finished_before_abandon"] = heavy_done
    result["heavy_error"] = heavy_result.error if heavy_result else None
    result["idle"] = summarise(idle)
    result["busy"] = summarise(busy)
    result["visits"] = [dict(asdict(v), phase=phase) for phase, vs in (("idle", idle), ("busy", busy)) for v in vs]
    ok = result["idle"]["p50_s"] is not None and result["busy"]["p50_s"] is not None
    result["slowdown_s"] = result["busy"]["p50_s"] - result["idle"]["p50_s"] if ok else None
    print(
        f"[{label}] (c) light page idle {_fmt(result['idle']['p50_s'])} s, during heavy {_fmt(result['busy']['p50_s'])}"
        f" s; busy {result['busy_after_abandon_s']:.1f} s after the heavy link was abandoned",
        flush=True,
    )
    return result


def headline(out: dict[str, Any]) -> dict[str, Any]:
    """The numbers the issue's targets are stated in (wave 1 for a and b; every wave for errors)."""
    waves = out["waves"]
    first, last = waves[0], waves[-1]
    growth = (last["rss_after_mb"] - first["rss_after_mb"]) / first["rss_after_mb"]
    calibration = out.get("calibration")
    metrics: dict[str, Any] = {
        "a_errors": sum(w["a"]["errors"] for w in waves),
        "a_p50_s": first["a"]["p50_s"],
        "a_p95_s": first["a"]["p95_s"],
        "a_done_p95_s": first["a"]["done_p95_s"],
        "a_p95_later_s": max((w["a"]["p95_s"] or 0.0) for w in waves[1:]) if len(waves) > 1 else None,
        "a_cache_hits": first["a"]["cache_hits"],
        "a_browser_p50_s": first["a"]["by_kind"].get("browser", {}).get("p50_s"),
        "a_ws_p50_s": first["a"]["by_kind"].get("ws", {}).get("p50_s"),
        "b_errors": sum(w["b"]["errors"] for w in waves),
        "b_p50_s": first["b"]["p50_s"],
        "b_p95_s": first["b"]["p95_s"],
        "b_done_p95_s": first["b"]["done_p95_s"],
        "b_p95_later_s": max((w["b"]["p95_s"] or 0.0) for w in waves[1:]) if len(waves) > 1 else None,
        "c_idle_s": out["c"]["idle"]["p50_s"],
        "c_busy_s": out["c"]["busy"]["p50_s"],
        "c_slowdown_s": out["c"]["slowdown_s"],
        "c_errors": out["c"]["idle"]["errors"] + out["c"]["busy"]["errors"],
        "c_busy_after_abandon_s": out["c"]["busy_after_abandon_s"],
        "d_rss_first_wave_mb": first["rss_after_mb"],
        "d_rss_last_wave_mb": last["rss_after_mb"],
        "d_rss_growth": growth,
        "d_rss_settled_first_wave_mb": first.get("rss_settled_mb"),
        "d_rss_settled_last_wave_mb": last.get("rss_settled_mb"),
        "d_rss_settled_growth": (
            (last["rss_settled_mb"] - first["rss_settled_mb"]) / first["rss_settled_mb"]
            if "rss_settled_mb" in first and "rss_settled_mb" in last
            else None
        ),
        "rss_start_mb": out["rss_start_mb"],
        "rss_end_mb": out["rss_end_mb"],
        "calibration_ws_cold_s": calibration["ws_cold"]["first_chart_s"] if calibration else None,
        "calibration_ws_cached_s": calibration["ws_cached"]["first_chart_s"] if calibration else None,
        "calibration_browser_cached_s": calibration["browser_cached"]["first_chart_s"] if calibration else None,
    }
    return metrics


def _fmt(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 10 else f"{value:.1f}"
    return str(value)


def _wave_line(record: dict[str, Any]) -> str:
    a, b = record["a"], record["b"]
    return (
        f"(a) {a['sessions']} same: errors {a['errors']}, p50 {_fmt(a['p50_s'])} s, p95 {_fmt(a['p95_s'])} s, "
        f"cache hits {_fmt(a['cache_hits'])}; (b) {b['sessions']} distinct: errors {b['errors']}, "
        f"p50 {_fmt(b['p50_s'])} s, p95 {_fmt(b['p95_s'])} s; RSS {record['rss_before_mb']:.0f} -> "
        f"{record['rss_after_mb']:.0f} MiB, settled {record.get('rss_settled_mb', float('nan')):.0f} MiB"
    )


# ------------------------------------------------------------------ baseline, output


def table_rows(targets: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per headline metric: a column per target, the ratio last/first when there are two, the target."""
    rows = []
    for key in targets[0]["metrics"]:
        row: dict[str, Any] = {"metric": key}
        for t in targets:
            row[t["target"]] = t["metrics"][key]
        if len(targets) == 2:
            first, second = targets[0]["metrics"][key], targets[1]["metrics"][key]
            ok = isinstance(first, int | float) and isinstance(second, int | float) and first not in (0, None)
            row["ratio"] = second / first if ok else None
        if key in TARGETS:
            row["target_value"] = TARGETS[key][0]
            row["met"] = {t["target"]: _met(key, t["metrics"][key]) for t in targets}
        rows.append(row)
    return rows


def _met(key: str, value: Any) -> str:
    if value is None:
        return "n/a"
    return "yes" if TARGETS[key][1](value) else "no"


def markdown(rows: list[dict[str, Any]], labels: list[str], command: str) -> str:
    head = ["metric", *labels] + (["ratio"] if len(labels) == 2 else []) + ["target", "met"]
    lines = [f"Command: `{command}`", "", WARMUP_OFF_TEXT, "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [row["metric"], *(_fmt(row[label]) for label in labels)]
        if len(labels) == 2:
            cells.append(_fmt(row["ratio"]))
        met = row.get("met", {})
        cells += [row.get("target_value", ""), " / ".join(met[label] for label in labels) if met else ""]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, Config]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, help="scenario (a): sessions on the same link (default 40)")
    parser.add_argument("--distinct", type=int, help="scenario (b): sessions with different settings (default 20)")
    parser.add_argument("--waves", type=int, help="waves of (a) + (b) (default 3)")
    parser.add_argument("--browsers", type=int, help="how many of (a)'s sessions are Chromium contexts (default 3)")
    parser.add_argument("--page", help="the page of (a) and (b) (default Compare)")
    parser.add_argument("--query", help="query added to every link, e.g. 'n=256'")
    parser.add_argument("--heavy", help="(c)'s heavy link (default Regime_map?n=4096&nb=16&ns=12)")
    parser.add_argument("--light", help="(c)'s light page (default Compare)")
    parser.add_argument("--light-repeats", type=int, help="(c)'s light visits idle and busy (default 3)")
    parser.add_argument("--timeout", type=float, help="per-session limit in seconds (default 180)")
    parser.add_argument("--settle", type=float, help="longest wait for a quiet server, seconds (default 60)")
    parser.add_argument("--baseline", help="git ref run first with the same scenarios, e.g. main")
    parser.add_argument("--quick", action="store_true", help="3 + 2 websocket sessions, 1 wave, n = 128")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR, help="output folder (default benchmarks/results)")
    parser.add_argument("--name", default="load_cpu", help="output file stem (default load_cpu)")
    args = parser.parse_args(argv)
    cfg = Config()
    if args.quick:
        cfg = Config(
            sessions=3, distinct=2, waves=1, browsers=0, query="n=128", heavy="Regime_map?nb=6&ns=4",
            heavy_lead_s=1.0, light_repeats=1, timeout_s=60.0, settle_s=8.0,
        )  # fmt: skip
    overrides = {
        "sessions": args.sessions, "distinct": args.distinct, "waves": args.waves, "browsers": args.browsers,
        "page": args.page, "query": args.query, "heavy": args.heavy, "light": args.light,
        "light_repeats": args.light_repeats, "timeout_s": args.timeout, "settle_s": args.settle,
    }  # fmt: skip
    for key, value in overrides.items():
        if value is not None:
            setattr(cfg, key, value)
    for key in ("sessions", "distinct", "waves", "light_repeats"):
        if getattr(cfg, key) < 1:
            parser.error(f"--{key.replace('_', '-')} must be at least 1, got {getattr(cfg, key)}")
    if not 0 <= cfg.browsers <= cfg.sessions:
        parser.error(f"--browsers must be between 0 and --sessions ({cfg.sessions}), got {cfg.browsers}")
    if cfg.browsers and not CHROMIUM.exists():
        parser.error(f"--browsers needs {CHROMIUM} (Debian chromium); use --browsers 0 without it")
    return args, cfg


def _run_async(coro: Any) -> Any:
    """asyncio.run in a thread of its own: the caller's thread may already run an event loop (Playwright's sync API,
    e.g. in the same pytest session as the browser tests), where asyncio.run refuses to start."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args, cfg = parse_args(argv)
    command = "python -m benchmarks.load " + " ".join(sys.argv[1:] if argv is None else argv)
    started, load_start = time.time(), os.getloadavg()
    targets = []
    if args.baseline:
        with baseline_tree(args.baseline) as tree:
            targets.append(_run_async(run_target(tree, cfg, f"baseline {args.baseline}")))
    targets.append(_run_async(run_target(ROOT, cfg, "working tree")))
    rows = table_rows(targets)
    result: dict[str, Any] = {
        "command": command.strip(),
        "config": asdict(cfg),
        "machine": machine_facts(load_start),
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "wall_s": time.time() - started,
        "targets": targets,
        "table": rows,
    }
    labels = [t["target"] for t in targets]
    fields = ["metric", *labels] + (["ratio"] if len(labels) == 2 else []) + ["target_value"]
    write_results(args.out, args.name, result, markdown(rows, labels, result["command"]), csv_rows=(fields, rows))
    for target in targets:
        for wave in target["waves"]:
            for scenario in ("a", "b"):
                for message in wave[scenario]["error_messages"]:
                    print(f"error [{target['target']}] wave {wave['wave']} ({scenario}): {message}")
        for phase in ("idle", "busy"):
            for message in target["c"][phase]["error_messages"]:
                print(f"error [{target['target']}] (c) {phase}: {message}")
    return result


if __name__ == "__main__":
    main()
