"""Fixtures for real-browser tests: a Streamlit server (shared or fresh) and a Playwright page in system Chromium.

Under CI (CI=true) a missing Chromium or Playwright is a test failure, never a skip, so browser tests always run there.
Elsewhere they skip with the reason. Every test in this folder gets the ``browser`` marker.
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
from ci_env import unavailable

from .helpers import CHROMIUM, CHROMIUM_ARGS, VIEWPORT, StreamlitServer, save_screenshot, streamlit_server

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.path).startswith(here + os.sep):
            item.add_marker(pytest.mark.browser)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[Any]:
    # Remember the call outcome so the page fixture can screenshot failures.
    report = yield
    if report.when == "call":
        item.stash[_CALL_FAILED] = report.failed
    return report


_CALL_FAILED = pytest.StashKey[bool]()


def _browser_unavailable() -> str | None:
    if not CHROMIUM.exists():
        return f"{CHROMIUM} not found (install Debian chromium: apt-get install -y chromium)"
    if importlib.util.find_spec("playwright") is None:
        return "the playwright package is not installed (pip install -r requirements-dev.txt)"
    return None


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    reason = _browser_unavailable()
    if reason is not None:
        unavailable(f"browser tests must run in CI: {reason}")
    from playwright.sync_api import sync_playwright

    playwright = sync_playwright().start()
    try:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=list(CHROMIUM_ARGS))
        yield launched
        launched.close()
    finally:
        playwright.stop()


@pytest.fixture
def page(browser: Browser, request: pytest.FixtureRequest) -> Iterator[Page]:
    """A fresh browser context per test. On failure the page is saved as artifacts/screenshots/FAILED-<test>.png."""
    context = browser.new_context(viewport=VIEWPORT)
    new_page = context.new_page()
    yield new_page
    if request.node.stash.get(_CALL_FAILED, False):
        try:
            save_screenshot(new_page, "FAILED-" + re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name))
        except Exception as error:  # a screenshot must never hide the real failure
            print(f"could not save failure screenshot: {error}")
    context.close()


@pytest.fixture(scope="session")
def app_server() -> Iterator[str]:
    """Base URL of one app server shared by the whole session (cheapest; the app has seen earlier requests)."""
    with streamlit_server() as server:
        yield server.url


@pytest.fixture
def fresh_app_server() -> Iterator[StreamlitServer]:
    """A newly started server for this test only: its first request is the test's (deep-link behaviour).

    For one fresh server per module, use ``with streamlit_server() as server:`` in a module-scoped fixture.
    """
    with streamlit_server() as server:
        yield server
