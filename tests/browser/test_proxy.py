"""Two app processes behind nginx (deploy/replicas.py), driven through the proxy in headless Chromium.

Checks what a hosted class depends on: a fresh browser gets the sticky cookie from nginx, different browsers land on
different replicas, every request of one browser (static files, the /_stcore/stream websocket) goes to one replica,
pages render through the proxy, and a result computed by one replica is a cache hit on the other.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from ci_env import unavailable
from playwright.sync_api import expect

from deploy.replicas import COOKIE, Deployment, core_shares, deployment, nginx_binary

from .helpers import PLOTLY_CHART, VIEWPORT, save_screenshot, settings_file_input, wait_for_app

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext

# Probes before giving up on finding a second replica: random keys land on one of two replicas with p = 1/2 each,
# so all 24 on the same one has probability 2**-23.
MAX_PROBES = 24


@pytest.fixture(scope="module")
def proxied(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    try:
        nginx_binary()
    except FileNotFoundError as error:
        unavailable(f"the proxy test must run in CI: {error}")
    cache_dir = tmp_path_factory.mktemp("shared-cache")
    with deployment(2, cache_dir=cache_dir, run_dir=tmp_path_factory.mktemp("replicas")) as running:
        yield running


def log_entries(running: Deployment) -> list[dict[str, Any]]:
    lines = running.access_log.read_text().splitlines() if running.access_log.exists() else []
    return [json.loads(line) for line in lines if line.strip()]


def upstreams_of(running: Deployment, key: str) -> set[str]:
    return {entry["upstream"] for entry in log_entries(running) if entry["key"] == key and entry["upstream"]}


def sticky_cookie(context: BrowserContext) -> str:
    values = [cookie["value"] for cookie in context.cookies() if cookie["name"] == COOKIE]
    assert len(values) == 1, f"expected one {COOKIE} cookie, got {context.cookies()}"
    return values[0]


def new_browser_on_a_replica(browser: Browser, running: Deployment, avoid: str | None = None) -> tuple[Any, str, str]:
    """A fresh browser context whose first request got nginx's cookie; with ``avoid``, one on another replica."""
    for _ in range(MAX_PROBES):
        context = browser.new_context(viewport=VIEWPORT)
        response = context.request.get(running.url + "/_stcore/health")
        assert response.ok, f"health through the proxy answered {response.status}"
        set_cookie = response.headers.get("set-cookie", "")
        assert re.search(rf"^{COOKIE}=[0-9a-f]{{32}}; Path=/; HttpOnly; SameSite=Lax$", set_cookie, re.M), set_cookie
        key = sticky_cookie(context)
        logged = wait_for_log(running, lambda e, k=key: e["key"] == k and e["upstream"])
        (backend,) = {entry["upstream"] for entry in logged}
        assert backend in running.backends, f"{backend} is not one of {running.backends}"
        if backend != avoid:
            return context, key, backend
        context.close()
    pytest.fail(f"{MAX_PROBES} fresh browsers all landed on {avoid}: the cookie does not spread browsers")


def wait_for_log(running: Deployment, predicate: Any, timeout_s: float = 20.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout_s
    while True:
        matching = [entry for entry in log_entries(running) if predicate(entry)]
        if matching or time.monotonic() > deadline:
            return matching
        time.sleep(0.25)


def test_sessions_through_the_proxy_stay_on_one_replica_and_spread_over_both(
    browser: Browser, proxied: Deployment, tmp_path: Path
) -> None:
    # Each replica runs on its own share of the cores (when there are enough cores and taskset).
    for replica, share in zip(proxied.replicas, core_shares(len(proxied.replicas)), strict=True):
        assert os.sched_getaffinity(replica.process.pid) == set(share or os.sched_getaffinity(0)), replica.name

    first, first_key, first_backend = new_browser_on_a_replica(browser, proxied)
    second, second_key, second_backend = new_browser_on_a_replica(browser, proxied, avoid=first_backend)
    assert first_backend != second_backend and first_key != second_key

    for context, name in ((first, "first"), (second, "second")):
        page = context.new_page()
        response = page.goto(f"{proxied.url}/Compare?n=64&heads=1&methods=performer")
        assert response is not None and response.ok
        again = response.headers.get("set-cookie", "")
        assert COOKIE not in again, f"the sticky cookie must be set once, not on every response: {again}"
        wait_for_app(page)
        expect(page.locator(PLOTLY_CHART).first).to_be_visible(timeout=60_000)
        assert page.get_by_role("slider", name="Sequence length n").input_value() == "64"
        # A changed link on the same session: the new slider value is applied and the page recomputes.
        page.goto(f"{proxied.url}/Compare?n=96&heads=1&methods=performer&tau=0.5")
        wait_for_app(page)
        assert page.get_by_role("slider", name="Sequence length n").input_value() == "96"
        expect(page.locator(PLOTLY_CHART).first).to_be_visible(timeout=60_000)
        # An upload (a settings file) is a separate HTTP request that must reach the session's own replica.
        settings = tmp_path / f"{name}.json"
        settings.write_text(json.dumps({"version": 1, "page": "Compare", "params": {"n": "112"}}))
        settings_file_input(page).set_input_files(str(settings))
        wait_for_app(page)
        expect(page.get_by_text("Loaded 1 setting(s) from the file.")).to_be_visible(timeout=30_000)
        assert page.get_by_role("slider", name="Sequence length n").input_value() == "112"
        save_screenshot(page, f"proxy_{name}_browser")
        context.close()  # closes the websocket; nginx logs a websocket when it ends

    for key, backend in ((first_key, first_backend), (second_key, second_backend)):
        streams = wait_for_log(
            proxied, lambda e, k=key: e["key"] == k and e["request"].startswith("GET /_stcore/stream")
        )
        assert streams, f"no websocket through the proxy for key {key}"
        assert all(e["status"] == "101" and e["upgrade"].lower() == "websocket" for e in streams), streams
        served_by = upstreams_of(proxied, key)
        assert served_by == {backend}, f"one browser's requests went to {served_by}, not only {backend}"
        requests = [e["request"] for e in log_entries(proxied) if e["key"] == key]
        assert any("/static/" in r for r in requests) and len(requests) >= 5, requests
        assert any("/_stcore/upload_file/" in r for r in requests), f"no upload through the proxy: {requests}"


def _cache_stats(cache_dir: Path) -> tuple[int, int]:
    import diskcache  # the shared result cache (service/result_cache.py) is a diskcache.Cache

    with diskcache.Cache(str(cache_dir)) as cache:
        hits, misses = cache.stats()
    return int(hits), int(misses)


def test_a_link_computed_on_one_replica_is_a_cache_hit_on_the_other(browser: Browser, proxied: Deployment) -> None:
    assert os.path.isdir(proxied.cache_dir)
    link = f"{proxied.url}/Compare?n=80&heads=1&seed=11&methods=performer&methods=lsh"
    first, _, first_backend = new_browser_on_a_replica(browser, proxied)
    second, _, second_backend = new_browser_on_a_replica(browser, proxied, avoid=first_backend)

    before = _cache_stats(proxied.cache_dir)
    page = first.new_page()
    page.goto(link)
    wait_for_app(page)
    expect(page.locator(PLOTLY_CHART).first).to_be_visible(timeout=60_000)
    computed = _cache_stats(proxied.cache_dir)
    first.close()
    assert computed[1] > before[1], f"the first replica computed the link without a cache miss: {before} -> {computed}"

    page = second.new_page()
    page.goto(link)
    wait_for_app(page)
    expect(page.locator(PLOTLY_CHART).first).to_be_visible(timeout=60_000)
    reused = _cache_stats(proxied.cache_dir)
    second.close()
    assert reused[0] > computed[0], (
        f"{second_backend} did not hit the cache entry {first_backend} wrote: (hits, misses) {computed} -> {reused}"
    )
