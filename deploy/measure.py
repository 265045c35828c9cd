"""Open a few browsers on one link through the proxy and report where they landed, replica memory and cache stats.

    python -m deploy.measure --replicas 2 --browsers 4 "/Compare?n=256&heads=2"

Each browser is a fresh headless Chromium context (its own sticky cookie), opened one after another; the link is
loaded until the page's script run ends. Printed: the replica each browser landed on and its load time, each
replica's resident memory (VmRSS of the process group) at idle and after the loads, and the shared cache's
(hits, misses). Sizes the memory per replica in docs/deploying.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from deploy.replicas import COOKIE, Deployment, deployment

CHROMIUM = Path(os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium"))
CHROMIUM_ARGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage")


def group_rss_bytes(pid: int) -> int:
    """Resident memory of every process in ``pid``'s process group (the replica and any child it started)."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.getpgid(int(entry)) != pid:
                continue
            for line in Path(f"/proc/{entry}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except (OSError, ProcessLookupError, ValueError):
            continue
    return total


def replica_rss(running: Deployment) -> dict[str, int]:
    return {r.url.removeprefix("http://"): group_rss_bytes(r.process.pid) for r in running.replicas}


def backend_of(running: Deployment, key: str, timeout_s: float = 10.0) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for line in running.access_log.read_text().splitlines():
            entry = json.loads(line)
            if entry["key"] == key and entry["upstream"]:
                return str(entry["upstream"])
        time.sleep(0.2)
    return "?"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("link", help="path and query to open, e.g. '/Compare?n=256'")
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--browsers", type=int, default=4)
    args = parser.parse_args(argv)

    import diskcache  # type: ignore[import-untyped]
    from playwright.sync_api import sync_playwright

    with (
        tempfile.TemporaryDirectory(prefix="attn-measure-cache-") as cache,
        deployment(args.replicas, cache_dir=Path(cache)) as running,
        sync_playwright() as playwright,
    ):
        time.sleep(2)
        print(f"idle rss MiB: { {k: round(v / 2**20) for k, v in replica_rss(running).items()} }")
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=list(CHROMIUM_ARGS))
        for index in range(args.browsers):
            context = browser.new_context(viewport={"width": 1400, "height": 1000})
            page = context.new_page()
            start = time.perf_counter()
            page.goto(running.url + args.link)
            page.wait_for_timeout(250)
            page.wait_for_selector("[data-testid='stApp'][data-test-script-state='notRunning']", timeout=600_000)
            seconds = time.perf_counter() - start
            key = next(c["value"] for c in context.cookies() if c["name"] == COOKIE)
            print(f"browser {index}: replica {backend_of(running, key)}, page done in {seconds:.1f} s")
            context.close()
        browser.close()
        print(f"after rss MiB: { {k: round(v / 2**20) for k, v in replica_rss(running).items()} }")
        with diskcache.Cache(cache) as stats_cache:
            hits, misses = stats_cache.stats()
        print(f"shared cache (hits, misses): ({hits}, {misses})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
