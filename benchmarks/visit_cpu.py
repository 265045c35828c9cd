"""Where a page visit's CPU goes: the browser's processes against the app server's, for each page's default link
opened in fresh Chromium contexts. It says what a visit costs the visitor's machine and what it costs the server,
and why the browser tests take most of CI's time on two cores.

    python -m benchmarks.visit_cpu --baseline dd61dc6       # that commit and the working tree, in one run
    python -m benchmarks.visit_cpu --quick --out /tmp/bench  # smoke run: Compare, one context, this tree

Each tree's server is the README's app command (``deploy/serve.py``) with an empty result cache and no warm-up. Every
page is opened once first, unmeasured, so the measured visits find their results cached: the server's CPU is then
its page runs and the browser's is drawing. Then ``--contexts`` fresh browser contexts per page and tree, alternating
between the trees' servers. Each visit is measured from navigation to one second after every chart on the page has
been drawn with data: the CPU seconds of Chromium's processes by type (renderer, GPU process: the software
compositor, browser and the rest) and of the server's process tree. Nothing else should run on the machine.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import psutil

from benchmarks.first_visit import FIRST_DATA
from benchmarks.harness import (
    RESULTS_DIR,
    ROOT,
    VIEWPORT,
    Server,
    app_server,
    chromium_options,
    commit,
    machine_facts,
    page_paths,
    server_cpu_seconds,
    trees,
    wait_quiet,
    write_results,
)

KINDS = ("renderer", "gpu-process", "other")  # Chromium's process types as counted here
VISIT_TIMEOUT_S = 60.0
SETTLE_S = 1.0  # after the last chart is drawn: the frames and layout that follow it
ALL_DRAWN = """() => [...document.querySelectorAll('.js-plotly-plot')].every((p) => p.querySelector('.main-svg'))
  && window.__firstData !== null"""


def chromium_cpu() -> dict[str, float]:
    """CPU seconds of every running Chromium process, summed by type."""
    totals = dict.fromkeys(KINDS, 0.0)
    for proc in psutil.process_iter(["exe", "cmdline"]):
        try:
            if not str(proc.info["exe"] or "").endswith("/chromium"):  # Debian's: /usr/lib/chromium/chromium
                continue
            found = re.search(r"--type=(\S+)", " ".join(proc.info["cmdline"] or []))
            kind = found.group(1) if found and found.group(1) in KINDS else "other"
            times = proc.cpu_times()
            totals[kind] += times.user + times.system
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return totals


def visit(browser: Any, server: Server, path: str) -> dict[str, float]:
    """One visit in a new browser context: its wall seconds (inf when a chart with data did not come within
    VISIT_TIMEOUT_S) and the CPU seconds it cost, by process."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    context = browser.new_context(viewport=VIEWPORT)
    try:
        context.add_init_script(FIRST_DATA)
        page = context.new_page()
        browser_before, server_before, started = chromium_cpu(), server_cpu_seconds(server), time.monotonic()
        page.goto(f"{server.url}/{path}")
        try:
            page.wait_for_function(ALL_DRAWN, timeout=VISIT_TIMEOUT_S * 1000, polling=50)
            wall = time.monotonic() - started
        except PlaywrightTimeout:
            wall = math.inf
        page.wait_for_timeout(SETTLE_S * 1000)
        browser_after, server_after = chromium_cpu(), server_cpu_seconds(server)
    finally:
        context.close()
    spent = {kind: browser_after[kind] - browser_before[kind] for kind in KINDS}
    return {"wall_s": wall, **spent, "chromium": sum(spent.values()), "server": server_after - server_before}


def markdown(result: dict[str, Any], command: str) -> str:
    labels = list(result["trees"])
    lines = [
        "# A page visit's CPU: the browser against the server",
        "",
        f"Command: `{command}`. Commit {result['commit']}; {result['machine']}. {result['contexts']} fresh browser"
        " contexts per page and tree after one unmeasured visit (the results cached), alternating between the trees'"
        " servers; medians, in CPU seconds from navigation to one second after every chart was drawn.",
        "",
        "| page | tree | wall s | Chromium CPU s (renderer / GPU process / other) | server CPU s | Chromium / server |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for page, by_tree in result["pages"].items():
        for label in labels:
            m = by_tree[label]
            parts = " / ".join(f"{m[kind]:.2f}" for kind in KINDS)
            ratio = m["chromium"] / m["server"] if m["server"] > 0 else float("inf")
            lines.append(
                f"| {page} | {label} | {m['wall_s']:.2f} | {m['chromium']:.2f} ({parts}) | {m['server']:.2f} |"
                f" {ratio:.1f}× |"
            )
    lines.append("")
    for label in labels:
        total = result["totals"][label]
        lines.append(
            f"- {label}: all pages, the medians summed: Chromium {total['chromium']:.2f} s, server"
            f" {total['server']:.2f} s of CPU per visit of each page."
        )
    if len(labels) == 2:
        before, after = (result["totals"][label]["chromium"] for label in labels)
        lines.append(f"- Chromium's CPU, this tree against {labels[0]}: {after / before:.2f}×.")
    lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", help="a commit measured in the same run, before this tree")
    parser.add_argument("--contexts", type=int, default=3, help="fresh browser contexts per page and tree")
    parser.add_argument("--pages", help="comma-separated URL paths (default: every page but Home)")
    parser.add_argument("--quick", action="store_true", help="smoke run: Compare (or --pages), one context")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    parser.add_argument("--name", default="visit_cpu")
    args = parser.parse_args(argv)
    if args.quick:
        args.contexts, args.pages = 1, args.pages or "Compare"
    if args.contexts < 1:
        parser.error("--contexts must be at least 1")
    paths = args.pages.split(",") if args.pages else list(page_paths().values())
    from playwright.sync_api import sync_playwright

    load_start = os.getloadavg()
    samples: dict[str, dict[str, list[dict[str, float]]]] = {path: {} for path in paths}
    with trees(args.baseline) as found, contextlib.ExitStack() as stack:
        servers = {
            label: stack.enter_context(app_server(root, env={"ATTN_EXPLORER_WARMUP": "0"}))
            for label, root in found.items()
        }
        playwright = stack.enter_context(sync_playwright())
        browser = playwright.chromium.launch(**chromium_options())
        stack.callback(browser.close)
        for path in paths:  # the results each visit will find cached
            for server in servers.values():
                visit(browser, server, path)
        for server in servers.values():
            wait_quiet(server, 30.0)
        for path in paths:
            for _ in range(args.contexts):
                for label, server in servers.items():
                    samples[path].setdefault(label, []).append(visit(browser, server, path))
                    print(f"{path} {label}: {samples[path][label][-1]}", file=sys.stderr)
    keys = ("wall_s", *KINDS, "chromium", "server")
    medians = {
        path: {label: {k: statistics.median(v[k] for v in runs) for k in keys} for label, runs in by_tree.items()}
        for path, by_tree in samples.items()
    }
    labels = list(servers)
    result: dict[str, Any] = {
        "trees": {label: "the working tree" if label == "this tree" else f"commit {label}" for label in labels},
        "contexts": args.contexts,
        "pages": medians,
        "totals": {
            label: {k: sum(medians[p][label][k] for p in paths) for k in ("chromium", "server")} for label in labels
        },
        "samples": samples,
        "commit": commit(ROOT),
        "machine_facts": machine_facts(load_start),
    }
    facts = result["machine_facts"]
    result["machine"] = (
        f"{facts['cpus']} CPU cores, {facts['platform']}, load at start {facts['load_average_at_start']}"
    )
    command = "python -m benchmarks.visit_cpu" + (" " + " ".join(argv) if argv else "")
    write_results(args.out, args.name, result, markdown(result, command))
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
