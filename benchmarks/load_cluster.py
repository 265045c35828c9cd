"""Load benchmark of the two deployment layouts side by side, in one run, with benchmarks/load.py's clients.

    python -m benchmarks.load_cluster                 # 80 sessions on one link, 40 distinct links, a heavy job
    python -m benchmarks.load_cluster --quick         # seconds-scale smoke run (6 + 3 sessions, n = 128)

Layouts (each started fresh, one after the other, on this machine's loopback):
- ``replicas``: today's single host, deploy/replicas.py: 2 app replicas behind nginx sharing a diskcache folder;
  heavy jobs compute inside the replica that admitted them.
- ``cluster``: the many-host layout, deploy/loopback.py: Redis (the shared cache), a Dask scheduler, 2 CPU workers,
  2 app replicas behind nginx; heavy jobs compute on the workers.

Protocol clients have no cookie jar: each opens its websocket without nginx's sticky cookie, so nginx draws a new
``$request_id`` key for it and the sessions spread over the replicas at random (deploy/nginx.conf.template), as
browsers that each visit once do. On a 2-core machine both "hosts" share the same cores: this measures the protocol
and the design (cache sharing, where the heavy job's CPU goes), not added capacity. As in benchmarks/load.py, the
layouts start with their warm-up off: each wave meets the cache the earlier waves left, and nothing else runs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.harness import RESULTS_DIR, machine_facts, tree_cpu_seconds, wait_quiet, write_results
from benchmarks.load import (
    WARMUP_OFF,
    WARMUP_OFF_TEXT,
    Config,
    _fmt,
    _hits,
    _run_async,
    _with_query,
    cache_stats,
    run_wave,
    scenario_c,
    summarise,
    ws_session,
)

LAYOUTS = ("replicas", "cluster")
TARGETS = {
    "one_link_errors": ("== 0", lambda v: v == 0),
    "one_link_hits": (">= sessions - 1", None),
    "one_link_p95_s": ("<= 8", lambda v: v <= 8),
    "distinct_errors": ("== 0", lambda v: v == 0),
}
COUNTER_FLUSH_S = 1.0  # service.result_cache flushes each process's counters every 0.25 s


@dataclass
class _Pid:
    pid: int


QUIET_CORES = 0.15  # as benchmarks.load: under this share of a core the layout counts as quiet
CLUSTER_IDLE_CORES = 0.15  # what the idle scheduler, nannies and workers add (measured 0.12)
SETTLE_S = 240.0  # longest wait for a quiet layout (the heavy job's abandoned work, a slow worker start)


@dataclass
class LayoutServer:
    """What load.py's scenarios need of a server: the proxy URL and a process tree to watch (this process, whose
    children are every process the layout started), plus the result cache to count hits in."""

    url: str
    cache_dir: Path
    cache_url: str | None = None
    log_path: Path = Path("/dev/null")
    process: _Pid = field(default_factory=lambda: _Pid(os.getpid()))
    app_pids: list[int] = field(default_factory=list)
    worker_pids: list[int] = field(default_factory=list)

    def log_tail(self, chars: int = 3000) -> str:
        return ""


@contextmanager
def start_layout(layout: str, run_dir: Path) -> Iterator[LayoutServer]:
    from deploy.loopback import loopback_deployment
    from deploy.replicas import deployment

    if layout == "replicas":
        with deployment(2, 0, cache_dir=run_dir / "results", run_dir=run_dir / "web", env=WARMUP_OFF) as web:
            yield LayoutServer(web.url, web.cache_dir, app_pids=[r.process.pid for r in web.replicas])
    else:
        with loopback_deployment(2, 2, 0, 0, run_dir=run_dir, extra_env=WARMUP_OFF) as cluster:
            assert cluster.web is not None
            yield LayoutServer(
                cluster.url,
                run_dir / "no-disk-cache",
                cache_url=cluster.redis_url,
                app_pids=[r.process.pid for r in cluster.web.replicas],
                worker_pids=[w.process.pid for w in cluster.workers],
            )


async def _counted_wave(server: LayoutServer, paths: list[str], timeout_s: float) -> dict[str, Any]:
    before = cache_stats(server)  # type: ignore[arg-type]
    record = summarise(await run_wave(server, paths, 0, None, timeout_s))  # type: ignore[arg-type]
    await asyncio.sleep(COUNTER_FLUSH_S)
    hits = _hits(before, cache_stats(server))  # type: ignore[arg-type]
    # Redis's allkeys-lru may evict the counters themselves under memory pressure: a fall is a reset, not a count.
    record["cache_hits"] = hits if hits is None or hits >= 0 else None
    record["counters_reset"] = hits is not None and hits < 0
    return record


async def run_layout(layout: str, cfg: Config, run_dir: Path) -> dict[str, Any]:
    out: dict[str, Any] = {"layout": layout}
    started = time.monotonic()
    with start_layout(layout, run_dir) as server:
        out["start_s"] = time.monotonic() - started
        # Each protocol client lands on a random replica: a few Home visits warm both (imports, first script run).
        warm = [await ws_session(server.url, _with_query("", cfg.query), cfg.timeout_s) for _ in range(4)]
        out["warm_errors"] = [w.error for w in warm if w.error and "without a chart" not in w.error]  # Home: none
        # Quiet: the Home visits' work has finished. The idle Dask processes use about 0.12 of a core between
        # them (heartbeats), so the cluster layout's threshold is that much higher.
        quiet = QUIET_CORES + (CLUSTER_IDLE_CORES if server.worker_pids else 0.0)
        out["settle_waits_s"] = [wait_quiet(server, cfg.settle_s, busy_below=quiet)]  # type: ignore[arg-type]
        out["one_link"] = await _counted_wave(server, [_with_query(cfg.page, cfg.query)] * cfg.sessions, cfg.timeout_s)
        print(f"[{layout}] one link: {_line(out['one_link'])}", flush=True)
        out["settle_waits_s"].append(wait_quiet(server, cfg.settle_s, busy_below=quiet))  # type: ignore[arg-type]
        paths = [_with_query(f"{cfg.page}?seed={2001 + i}", cfg.query) for i in range(cfg.distinct)]
        out["distinct"] = await _counted_wave(server, paths, cfg.timeout_s)
        print(f"[{layout}] distinct: {_line(out['distinct'])}", flush=True)
        app0, workers0 = tree_cpu_seconds(server.app_pids), tree_cpu_seconds(server.worker_pids)
        out["heavy"] = await scenario_c(server, cfg, layout, quiet_below=quiet)  # type: ignore[arg-type]
        out["heavy"]["app_cpu_s"] = tree_cpu_seconds(server.app_pids) - app0
        out["heavy"]["worker_cpu_s"] = tree_cpu_seconds(server.worker_pids) - workers0
    return out


def _line(record: dict[str, Any]) -> str:
    return (
        f"{record['sessions']} sessions, {record['errors']} errors, {record['cache_hits']} hits, first chart p50 "
        f"{_fmt(record['p50_s'])} s p95 {_fmt(record['p95_s'])} s"
    )


def markdown(result: dict[str, Any]) -> str:
    cfg = result["config"]
    lines = [
        "# Load: single-host replicas vs the many-host layout (loopback)",
        "",
        f"`{result['command']}` on {result['machine']['cpus']} cores ({result['machine']['platform']}), "
        f"load average at start {result['machine'].get('load_average_at_start')}.",
        "",
        'Both layouts ran on the same cores (the "hosts" share them): this measures the protocol and the design '
        "(one shared cache, where the heavy job's CPU goes), not added capacity. Protocol clients carry no cookie, so "
        "nginx spreads them over the 2 replicas at random. Times are medians (p50) and p95 of the websocket "
        "clients' time to first chart, in seconds; each layout ran once.",
        "",
        f"Workloads: one link = {cfg['sessions']} sessions on `{_with_query(cfg['page'], cfg['query'])}`; distinct = "
        f"{cfg['distinct']} sessions on distinct seeds; heavy = `{_with_query(cfg['heavy'], cfg['query'])}` with "
        f"{cfg['light_repeats']} light `{cfg['light']}` visits idle and while it computes.",
        "",
        WARMUP_OFF_TEXT
        + " Before each of the first two waves the layout was left until quiet; seconds waited: "
        + "; ".join(
            f"{r['layout']} {', '.join(f'{w:.0f}' for w in r.get('settle_waits_s', []))}" for r in result["layouts"]
        )
        + ".",
        "",
        "| layout | workload | errors | cache hits | p50 s | p95 s | light delay s | app CPU s | worker CPU s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for out in result["layouts"]:
        for key in ("one_link", "distinct"):
            r = out[key]
            lines.append(
                f"| {out['layout']} | {key.replace('_', ' ')} | {r['errors']} | {_fmt(r['cache_hits'])} | "
                f"{_fmt(r['p50_s'])} | {_fmt(r['p95_s'])} | | | |"
            )
        h = out["heavy"]
        lines.append(
            f"| {out['layout']} | heavy + light | {h['idle']['errors'] + h['busy']['errors']} | | "
            f"{_fmt(h['busy']['p50_s'])} | {_fmt(h['busy']['p95_s'])} | {_fmt(h['slowdown_s'])} | "
            f"{_fmt(h['app_cpu_s'])} | {_fmt(h['worker_cpu_s'])} |"
        )
    lines += ["", "| target | " + " | ".join(o["layout"] for o in result["layouts"]) + " |", "|---|---|---|"]
    for name, (text, _) in TARGETS.items():
        lines.append(f"| {name} {text} | " + " | ".join(_fmt(o["metrics"][name]) for o in result["layouts"]) + " |")
    lines += [
        "",
        "light delay: the light page's median time to first chart while the heavy job computes minus idle. "
        "CPU: user + system seconds of the app replicas and of the Dask workers over the heavy workload. "
        "Cache hits are the cache's own counters (hits + memory hits) over the wave: a page makes several engine "
        "calls, so a wave served wholly from the cache counts several hits per session. With Redis they are keys "
        "under `maxmemory` + `allkeys-lru` like the results, so Redis may evict them under memory pressure (a "
        "negative count says the counter restarted from zero during the wave).",
        "",
    ]
    return "\n".join(lines)


def metrics(out: dict[str, Any]) -> dict[str, Any]:
    one, distinct = out["one_link"], out["distinct"]
    return {
        "one_link_errors": one["errors"],
        "one_link_hits": one["cache_hits"],
        "one_link_p95_s": one["p95_s"],
        "distinct_errors": distinct["errors"],
    }


def parse_args(argv: list[str] | None) -> tuple[argparse.Namespace, Config]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=80, help="sessions on one link (default 80)")
    parser.add_argument("--distinct", type=int, default=40, help="sessions on distinct links (default 40)")
    parser.add_argument("--layout", choices=LAYOUTS, action="append", help="only this layout (repeatable)")
    parser.add_argument("--quick", action="store_true", help="6 + 3 sessions, n = 128, a small heavy job")
    parser.add_argument("--timeout", type=float, default=180.0, help="per-session limit in seconds (default 180)")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR, help="output folder (default benchmarks/results)")
    parser.add_argument("--name", default="load_cluster", help="output file stem (default load_cluster)")
    args = parser.parse_args(argv)
    for key in ("sessions", "distinct"):
        if not 1 <= getattr(args, key) <= 500:
            parser.error(f"--{key} must be within 1..500, got {getattr(args, key)}")
    cfg = Config(sessions=args.sessions, distinct=args.distinct, timeout_s=args.timeout, settle_s=SETTLE_S)
    if args.quick:
        cfg.sessions, cfg.distinct, cfg.query, cfg.light_repeats = 6, 3, "n=128", 1
        cfg.heavy, cfg.heavy_lead_s, cfg.settle_s = "Regime_map?nb=6&ns=4&seeds=1", 1.0, 10.0
    return args, cfg


def main(argv: list[str] | None = None) -> dict[str, Any]:
    import tempfile

    args, cfg = parse_args(argv)
    command = "python -m benchmarks.load_cluster " + " ".join(sys.argv[1:] if argv is None else argv)
    started, load_start = time.time(), os.getloadavg()
    layouts = []
    for layout in args.layout or LAYOUTS:
        with tempfile.TemporaryDirectory(prefix=f"load-{layout}-") as run_dir:
            out = _run_async(run_layout(layout, cfg, Path(run_dir)))
        out["metrics"] = metrics(out)
        layouts.append(out)
    result: dict[str, Any] = {
        "command": command.strip(),
        "config": asdict(cfg),
        "machine": machine_facts(load_start),
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "wall_s": time.time() - started,
        "layouts": layouts,
    }
    write_results(args.out, args.name, result, markdown(result))
    return result


if __name__ == "__main__":
    main()
