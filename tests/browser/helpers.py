"""Real-browser test helpers: start the Streamlit app on a free port, wait for a rerun to finish, save screenshots.

Import in a browser test with ``from .helpers import wait_for_app, save_screenshot`` (fixtures live in conftest.py).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from playwright.sync_api import Page, ViewportSize

REPO_ROOT = Path(__file__).resolve().parents[2]
SCREENSHOT_DIR = REPO_ROOT / "artifacts" / "screenshots"
CHROMIUM = Path(os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium"))
CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
VIEWPORT: ViewportSize = {"width": 1400, "height": 1000}
SERVER_START_TIMEOUT_S = 60.0
APP_TIMEOUT_MS = 90_000  # first run of a page imports torch and computes; 2 slow cores in CI


@dataclass(frozen=True)
class StreamlitServer:
    url: str  # base URL without a trailing slash, e.g. http://127.0.0.1:40123
    process: subprocess.Popen[bytes]
    log_path: Path

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no server log)"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the server's process group, then SIGKILL what is left: no process outlives the test."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=15)
    except ProcessLookupError:
        pass


@contextmanager
def streamlit_server(script: str = "app.py", *, timeout_s: float = SERVER_START_TIMEOUT_S) -> Iterator[StreamlitServer]:
    """Start ``streamlit run <script>`` from the repo root on a free 127.0.0.1 port and stop it on exit.

    Each call is a fresh server, so the first request it gets is the first the app has ever seen
    (what a shared deep link hits after a deploy).
    """
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        script,
        "--server.headless",
        "true",
        "--server.address",
        "127.0.0.1",
        "--server.port",
        str(port),
        "--browser.gatherUsageStats",
        "false",
        "--server.fileWatcherType",
        "none",
    ]
    log = tempfile.NamedTemporaryFile(prefix=f"streamlit-{port}-", suffix=".log", delete=False)
    log_path = Path(log.name)
    process = subprocess.Popen(
        command,
        cwd=REPO_ROOT,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # own process group, so teardown reaches any child too
    )
    log.close()
    server = StreamlitServer(url=url, process=process, log_path=log_path)
    try:
        deadline = time.monotonic() + timeout_s
        while not _healthy(url):
            if process.poll() is not None:
                raise RuntimeError(f"streamlit exited with code {process.returncode}:\n{server.log_tail()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"streamlit not healthy at {url} after {timeout_s:.0f} s:\n{server.log_tail()}")
            time.sleep(0.2)
        yield server
    finally:
        _stop(process)
        log_path.unlink(missing_ok=True)


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
