"""A class opening one cached link at once: how long the last students wait, and what each session costs the server.

    python -m benchmarks.class_wave --baseline df19186          # that commit and the working tree, in one run
    python -m benchmarks.class_wave --quick --out /tmp/bench     # smoke run: 3 sessions, one round, this tree

Each tree's server is the README's app command (``deploy/serve.py``) with an empty result cache and no warm-up. The
link is opened once first, unmeasured, so every measured session finds its results cached: what remains is the
server's work per session (the page's script run, its messages, Streamlit's bookkeeping), all of it in one Python
process. Then ``--rounds`` rounds; in each, every tree gets one wave of ``--sessions`` protocol clients
(``benchmarks.load.ws_session``) opening the link together, the trees taking turns first. Per wave: time to the first
chart (p50, p95) and to the run's end (the last session), the server's CPU seconds per session from the wave's start
until the server is quiet again and has made its idle pass, and its resident memory then. The table gives the
medians over the rounds. Nothing else should run on the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import (
    RESULTS_DIR,
    ROOT,
    Server,
    app_server,
    commit,
    machine_facts,
    server_cpu_seconds,
    server_rss,
    trees,
    wait_quiet,
    write_results,
)
from benchmarks.load import ws_session

SESSION_TIMEOUT_S = 180.0
QUIET_LIMIT_S = 60.0
IDLE_PASS_S = 1.5  # the server's idle pass (ui/serving.py) polls every 0.5 s once it is quiet
KEYS = ("first_chart_p50_s", "first_chart_p95_s", "last_done_s", "cpu_per_session_s", "rss_quiet_mb")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def _wave(url: str, link: str, sessions: int) -> list[Any]:
    return await asyncio.gather(*(ws_session(url, link, SESSION_TIMEOUT_S) for _ in range(sessions)))


def wave(server: Server, link: str, sessions: int) -> dict[str, Any]:
    """One wave of ``sessions`` clients opening ``link`` together on a quiet server."""
    cpu_before = server_cpu_seconds(server)
    results = asyncio.run(_wave(server.url, link, sessions))
    errors = [r.error for r in results if r.error]
    firsts = [r.first_chart_s for r in results if r.first_chart_s is not None]
    dones = [r.finished_s for r in results if r.finished_s is not None]
    wait_quiet(server, QUIET_LIMIT_S)
    time.sleep(IDLE_PASS_S)
    # Until the server is quiet and has made its idle pass: work it moved out of the runs (a garbage collection
    # once idle) counts too.
    cpu = server_cpu_seconds(server) - cpu_before
    return {
        "errors": len(errors),
        "first_error": errors[0] if errors else None,
        "first_chart_p50_s": statistics.median(firsts) if firsts else float("inf"),
        "first_chart_p95_s": percentile(firsts, 0.95) if firsts else float("inf"),
        "last_done_s": max(dones) if len(dones) == sessions else float("inf"),
        "cpu_per_session_s": cpu / sessions,
        "rss_quiet_mb": server_rss(server) / 2**20,
    }


def markdown(result: dict[str, Any], command: str) -> str:
    labels = list(result["trees"])
    lines = [
        "# A class opening one cached link at once",
        "",
        f"Command: `{command}`. Commit {result['commit']}; {result['machine']}. Link `{result['link']}`, its results"
        f" cached; {result['rounds']} rounds of one wave of {result['sessions']} protocol sessions per tree, the trees"
        " taking turns first; medians over the rounds.",
        "",
        "| tree | first chart p50 s | first chart p95 s | last session done s | server CPU s per session |"
        " server memory when quiet MiB | errors |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for label in labels:
        m = result["medians"][label]
        lines.append(
            f"| {label} | {m['first_chart_p50_s']:.2f} | {m['first_chart_p95_s']:.2f} | {m['last_done_s']:.2f} |"
            f" {m['cpu_per_session_s']:.3f} | {m['rss_quiet_mb']:.0f} | {result['errors'][label]} |"
        )
    lines.append("")
    if len(labels) == 2:
        before, after = (result["medians"][label] for label in labels)
        for key, name in (("first_chart_p95_s", "first chart p95"), ("cpu_per_session_s", "server CPU per session")):
            lines.append(f"- {name}, this tree against {labels[0]}: {after[key] / before[key]:.2f}×.")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", help="a commit measured in the same run, beside this tree")
    parser.add_argument("--sessions", type=int, default=40, help="sessions per wave (default 40)")
    parser.add_argument("--rounds", type=int, default=5, help="waves per tree (default 5)")
    parser.add_argument("--link", default="Compare", help="page and query, e.g. 'Compare?n=256' (default Compare)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 3 sessions, one round")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    parser.add_argument("--name", default="class_wave")
    args = parser.parse_args(argv)
    if args.quick:
        args.sessions, args.rounds = 3, 1
    if args.sessions < 1 or args.rounds < 1:
        parser.error("--sessions and --rounds must be at least 1")
    load_start = os.getloadavg()
    waves: dict[str, list[dict[str, Any]]] = {}
    with trees(args.baseline) as found, contextlib.ExitStack() as stack:
        servers = {
            label: stack.enter_context(app_server(root, env={"ATTN_EXPLORER_WARMUP": "0"}))
            for label, root in found.items()
        }
        for server in servers.values():  # the results every measured session will find cached
            asyncio.run(_wave(server.url, args.link, 1))
        for server in servers.values():
            wait_quiet(server, QUIET_LIMIT_S)
        labels = list(servers)
        for round_index in range(args.rounds):
            for label in labels[round_index % len(labels) :] + labels[: round_index % len(labels)]:
                waves.setdefault(label, []).append(wave(servers[label], args.link, args.sessions))
                print(f"round {round_index + 1} {label}: {waves[label][-1]}", file=sys.stderr)
    result: dict[str, Any] = {
        "trees": {label: "the working tree" if label == "this tree" else f"commit {label}" for label in waves},
        "link": args.link,
        "sessions": args.sessions,
        "rounds": args.rounds,
        "medians": {label: {k: statistics.median(w[k] for w in runs) for k in KEYS} for label, runs in waves.items()},
        "errors": {label: sum(w["errors"] for w in runs) for label, runs in waves.items()},
        "waves": waves,
        "commit": commit(ROOT),
        "machine_facts": machine_facts(load_start),
    }
    facts = result["machine_facts"]
    result["machine"] = (
        f"{facts['cpus']} CPU cores, {facts['platform']}, load at start {facts['load_average_at_start']}"
    )
    command = "python -m benchmarks.class_wave" + (" " + " ".join(argv) if argv else "")
    write_results(args.out, args.name, result, markdown(result, command))
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
