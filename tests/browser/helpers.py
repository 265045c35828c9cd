"""Real-browser test helpers: start the Streamlit app on a free port, wait for a rerun to finish, save screenshots.

Import in a browser test with ``from .helpers import wait_for_app, save_screenshot`` (fixtures live in conftest.py).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

# The browser and its settings are the benchmarks' own (one Chromium for both); re-exported for the tests.
from benchmarks.harness import CHROMIUM as CHROMIUM
from benchmarks.harness import CHROMIUM_ARGS as CHROMIUM_ARGS
from benchmarks.harness import on_script_finished as on_script_finished
from deploy.processes import Process, app_server

if TYPE_CHECKING:
    from playwright.sync_api import Page, ViewportSize

REPO_ROOT = Path(__file__).resolve().parents[2]
SCREENSHOT_DIR = REPO_ROOT / "artifacts" / "screenshots"
VIEWPORT: ViewportSize = {"width": 1400, "height": 1000}
SERVER_START_TIMEOUT_S = 60.0
APP_TIMEOUT_MS = 90_000  # first run of a page imports torch and computes; 2 slow cores in CI


StreamlitServer = Process  # name, url, process, log_path, log_tail()


@contextmanager
def streamlit_server(
    script: str | None = None, *, timeout_s: float = SERVER_START_TIMEOUT_S
) -> Iterator[StreamlitServer]:
    """Start ``streamlit run <script>`` (default: deploy/serve.py, as the README's command) from the repo root on a
    free 127.0.0.1 port and stop it on exit.

    Each call is a fresh server, so the first request it gets is the first the app has ever seen
    (what a shared deep link hits after a deploy).
    """
    with app_server(REPO_ROOT, script=script, timeout_s=timeout_s) as server:
        yield server


def wait_for_app(page: Page, *, timeout_ms: int = APP_TIMEOUT_MS, check_exceptions: bool = True) -> None:
    """Wait until the current script run has finished (Streamlit's own e2e pattern), then check for exceptions.

    Call it after ``page.goto`` and after every interaction that triggers a rerun. ``data-test-script-state`` goes
    initial -> running -> notRunning; the short first pause lets a rerun triggered by a widget (debounced) start.
    """
    page.wait_for_timeout(250)
    page.wait_for_selector(
        "[data-testid='stApp'][data-test-connection-state='CONNECTED']", state="attached", timeout=timeout_ms
    )
    page.wait_for_selector(
        "[data-testid='stApp'][data-test-script-state='notRunning']", state="attached", timeout=timeout_ms
    )
    page.wait_for_timeout(150)
    if check_exceptions:
        assert_no_exception(page)


def assert_no_exception(page: Page) -> None:
    exceptions = page.locator("[data-testid='stException']")
    if exceptions.count():
        raise AssertionError(f"the app shows an exception on {page.url}:\n{exceptions.first.inner_text()}")


def save_screenshot(page: Page, name: str, *, full_page: bool = True) -> Path:
    """Save ``artifacts/screenshots/<name>.png`` (gitignored) and return its path."""
    SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOT_DIR / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path


# The sidebar's share box (ui/share_box.py): its script fills the link in after the element mounts.
SHARE_BOX = "[data-testid='stSidebar'] [data-testid='aeShareLink']"
SHARE_LINK = f"{SHARE_BOX} .ae-share-url"
# A Plotly figure: the served app's component (ui/plotly_chart.py), or Streamlit's chart under `streamlit run app.py`.
PLOTLY_CHART = ":is([data-testid='aePlotlyChart'], [data-testid='stPlotlyChart'])"


def settings_file_input(page: Page) -> Any:
    """The sidebar's "Load settings (JSON)" file input (the sidebar also holds the heads uploader)."""
    uploader = page.locator("[data-testid='stSidebar'] [data-testid='stFileUploader']").filter(
        has_text="Load settings (JSON)"
    )
    return uploader.locator("input[type='file']")


def share_link(page: Page, *, containing: str = "", timeout_ms: int = 30_000) -> str:
    """The link in the sidebar's share box, once it is filled in (and holds ``containing``)."""
    page.wait_for_function(
        "([selector, part]) => [...document.querySelectorAll(selector)]"
        ".some(e => e.textContent.length > 0 && e.textContent.includes(part))",
        arg=[SHARE_LINK, containing],
        timeout=timeout_ms,
    )
    return page.locator(SHARE_LINK).last.inner_text()


_READ_TILES = """() => Array.from(document.querySelectorAll("[data-testid='stMetric']"), (metric) => [
    metric.querySelector("[data-testid='stMetricLabel']")?.innerText ?? null,
    metric.querySelector("[data-testid='stMetricValue']")?.innerText ?? null,
])"""


def metric_tiles(page: Page) -> dict[str, str]:
    """Each metric's label and value, read together in one pass over the DOM (two separate reads could straddle a
    rerun that redraws the tiles); a tile caught half drawn is read again, for up to 5 s."""
    deadline = time.monotonic() + 5.0
    while True:
        pairs = page.evaluate(_READ_TILES)
        if pairs and all(label is not None and value is not None for label, value in pairs):
            return {label.strip(): value.strip() for label, value in pairs}
        if time.monotonic() > deadline:
            raise AssertionError(f"metric tiles not fully drawn after 5 s: {pairs}")
        page.wait_for_timeout(100)
