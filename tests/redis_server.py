"""A real ``redis-server`` (Debian's package) for tests, on a free loopback port, without persistence.

Under CI (``CI=true``) a missing ``redis-server`` fails the test instead of skipping it, as for Chromium and nginx.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time

from ci_env import unavailable

START_TIMEOUT_S = 10.0


def redis_server_binary() -> str:
    """The path of ``redis-server``; skips the test (fails it under CI) when it is not installed."""
    found = shutil.which("redis-server")
    if found is None:
        unavailable("redis-server is not installed (Debian: apt-get install -y redis-server)")
    return found


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class RedisServer:
    """One ``redis-server`` process on ``127.0.0.1:port``; ``stop`` and ``start`` again keep the port."""

    def __init__(self, port: int | None = None, *extra: str) -> None:
        self.binary = redis_server_binary()
        self.port = port or free_port()
        self.extra = extra
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        command = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        self.process = subprocess.Popen(
            [*command, *self.extra], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._answers():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"redis-server did not start on port {self.port}")
            time.sleep(0.02)
        return self

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as connection:
                connection.sendall(b"PING\r\n")
                return connection.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def client(self):  # type: ignore[no-untyped-def]
        import redis

        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5)
