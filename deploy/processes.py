"""Start, health-check and stop app processes on loopback: shared by the replica launcher, the browser tests and
the benchmarks, so each starts the app with the README's command and nothing outlives its caller."""

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
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Process:
    name: str
    url: str  # base URL without a trailing slash, e.g. http://127.0.0.1:40123
    process: subprocess.Popen[bytes]
    log_path: Path

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no log)"


def free_port(address: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((address, 0))
        return int(sock.getsockname()[1])


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def stop(process: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    """Signal the process group, then SIGKILL what is left after 15 s."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, sig)
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=15)
    except ProcessLookupError:
        pass


def spawn(
    name: str, command: list[str], log_path: Path, url: str, env: Mapping[str, str], cwd: Path = REPO_ROOT
) -> Process:
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            command,
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # own process group, so stopping reaches its children too
        )
    return Process(name=name, url=url, process=process, log_path=log_path)


def wait_healthy(processes: Sequence[Process], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    waiting = list(processes)
    while waiting:
        for item in list(waiting):
            if item.process.poll() is not None:
                raise RuntimeError(f"{item.name} exited with code {item.process.returncode}:\n{item.log_tail()}")
            if healthy(item.url):
                waiting.remove(item)
        if waiting and time.monotonic() > deadline:
            tails = "\n".join(f"--- {item.name}\n{item.log_tail()}" for item in waiting)
            raise TimeoutError(f"not healthy after {timeout_s:.0f} s: {[w.name for w in waiting]}\n{tails}")
        if waiting:
            time.sleep(0.2)


SERVER_SCRIPT = "deploy/serve.py"  # st.App around app.py (see deploy/serve.py)


def server_script(root: Path = REPO_ROOT) -> str:
    """What ``streamlit run`` starts in the tree at ``root``: deploy/serve.py, or app.py in trees older than it (a
    benchmark's baseline commit)."""
    return SERVER_SCRIPT if (root / SERVER_SCRIPT).is_file() else "app.py"


def app_command(port: int, script: str = SERVER_SCRIPT, python: str = sys.executable) -> list[str]:
    """The README's app command (headless, loopback, no file watcher) on ``port``."""
    return [
        python, "-m", "streamlit", "run", script,
        "--server.headless", "true", "--server.address", "127.0.0.1", "--server.port", str(port),
        "--server.fileWatcherType", "none", "--browser.gatherUsageStats", "false",
    ]  # fmt: skip


@contextmanager
def app_server(
    root: Path = REPO_ROOT,
    *,
    script: str | None = None,
    env: Mapping[str, str] | None = None,
    timeout_s: float = 90.0,
    keep_log: bool = False,
) -> Iterator[Process]:
    """A fresh app process from ``root`` on a free loopback port, healthy on entry and stopped on exit."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    handle, name = tempfile.mkstemp(prefix=f"streamlit-{port}-", suffix=".log")
    os.close(handle)
    log_path = Path(name)
    server = spawn(
        f"app :{port}", app_command(port, script or server_script(root)), log_path, url, env or os.environ, cwd=root
    )
    try:
        wait_healthy([server], timeout_s)
        yield server
    finally:
        stop(server.process)
        if not keep_log:
            log_path.unlink(missing_ok=True)
