"""Run several Attention Explorer processes on loopback ports behind one nginx, with sticky sessions and one cache.

    python -m deploy.replicas --replicas 2 --port 8080            # then open http://127.0.0.1:8080
    python -m deploy.replicas --print-config --server app1:8501 --server app2:8501 --listen 80 \\
        --error-log /dev/stderr --access-log /dev/stdout --temp-dir /tmp   # a config for another host

The launcher starts N ``streamlit run deploy/serve.py`` processes on free 127.0.0.1 ports, all with the same
``ATTN_EXPLORER_CACHE_DIR`` (so a result computed by one is a cache hit on the others) and the same cookie secret,
renders ``deploy/nginx.conf.template`` into a run directory, starts ``nginx`` there as a foreground (no root needed)
process, waits until every replica and the proxy answer ``/_stcore/health``, and on exit (Ctrl-C, SIGTERM, or
leaving the ``deployment()`` context) stops nginx and every replica's process group. Each replica is pinned to its
own share of the cores (``taskset``; ``--no-pin`` to let all replicas use every core), so the replicas' job
schedulers together do not oversubscribe the CPU.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from deploy.processes import SERVER_SCRIPT, Process, free_port, spawn, stop, wait_healthy

REPO_ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = Path(__file__).with_name("nginx.conf.template")
COOKIE = "ae_replica"
START_TIMEOUT_S = 90.0


def render_nginx_conf(
    servers: Sequence[str],
    listen: str,
    *,
    error_log: str,
    access_log: str,
    temp_dir: str,
    cookie: str = COOKIE,
) -> str:
    """The nginx config for ``servers`` (``host:port`` each) behind ``listen`` (``port`` or ``address:port``)."""
    if not servers:
        raise ValueError("servers: give at least one host:port")
    for server in servers:
        host, _, port = server.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"servers: {server!r} is not host:port with a port in 1..65535")
    if not cookie.replace("_", "").isalnum():
        raise ValueError(f"cookie: {cookie!r} must be letters, digits and underscores")
    lines = "\n".join(f"        server {server} max_fails=3 fail_timeout=10s;" for server in servers)
    text = TEMPLATE.read_text()
    for key, value in {
        "@SERVERS@": lines,
        "@LISTEN@": listen,
        "@ERROR_LOG@": error_log,
        "@ACCESS_LOG@": access_log,
        "@TEMP_DIR@": temp_dir,
        "@COOKIE@": cookie,
    }.items():
        text = text.replace(key, value)
    return text


def nginx_binary() -> str:
    """``$NGINX``, else ``nginx`` on PATH, else Debian's /usr/sbin/nginx (not on a normal user's PATH)."""
    for candidate in (os.environ.get("NGINX"), shutil.which("nginx"), "/usr/sbin/nginx"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise FileNotFoundError("nginx not found: install Debian's nginx (apt-get install -y nginx) or set NGINX=/path")


def nginx_command(conf: Path, run_dir: Path, *extra: str) -> list[str]:
    # -e: the early error log, before the config's error_log is read (the built-in path is root-only).
    return [nginx_binary(), "-p", str(run_dir), "-c", str(conf), "-e", str(run_dir / "error.log"), *extra]


def check_nginx_conf(conf: Path, run_dir: Path) -> subprocess.CompletedProcess[str]:
    """``nginx -t`` on ``conf``: returncode 0 when nginx accepts it; its verdict is in stderr."""
    command = nginx_command(conf, run_dir, "-t", "-g", f"pid {run_dir / 'nginx.pid'};")
    return subprocess.run(command, capture_output=True, text=True, timeout=30)


def core_shares(replicas: int) -> list[list[int] | None]:
    """The cores each replica is pinned to: disjoint, contiguous shares of this process's cores.

    Each replica's job scheduler (service/scheduler.py) sizes its slots and torch threads from the cores it sees, so
    without pinning N replicas would each plan for every core and oversubscribe them N times. ``None`` (no pinning) when
    there are fewer cores than replicas or no ``taskset``.
    """
    cores = sorted(os.sched_getaffinity(0))
    if replicas > len(cores) or shutil.which("taskset") is None:
        return [None] * replicas
    base, extra = divmod(len(cores), replicas)
    shares: list[list[int] | None] = []
    start = 0
    for index in range(replicas):
        size = base + (1 if index < extra else 0)
        shares.append(cores[start : start + size])
        start += size
    return shares


@dataclass
class Deployment:
    url: str  # the proxy, e.g. http://127.0.0.1:8080
    run_dir: Path  # nginx.conf, nginx.pid, error.log, access.log, replica-<port>.log, temp dirs
    cache_dir: Path
    replicas: list[Process] = field(default_factory=list)
    nginx: Process | None = None

    @property
    def access_log(self) -> Path:
        return self.run_dir / "access.log"

    @property
    def backends(self) -> list[str]:
        """``127.0.0.1:port`` of each replica, as nginx writes it in ``$upstream_addr``."""
        return [replica.url.removeprefix("http://") for replica in self.replicas]


@contextmanager
def deployment(
    replicas: int = 2,
    port: int = 0,
    *,
    address: str = "127.0.0.1",
    cache_dir: Path | None = None,
    run_dir: Path | None = None,
    python: str = sys.executable,
    timeout_s: float = START_TIMEOUT_S,
    pin: bool = True,
    env: Mapping[str, str] | None = None,
) -> Iterator[Deployment]:
    """Start ``replicas`` app processes and nginx on ``address:port`` (0: a free port); stop all of them on exit.

    With ``pin``, each replica runs on its own share of the cores (see ``core_shares``). ``env``: more variables for
    the replicas (deploy/loopback.py gives them the Redis cache and the Dask scheduler).
    """
    if not 1 <= replicas <= 64:
        raise ValueError(f"replicas: {replicas} is outside 1..64")
    if not 0 <= port < 65536:
        raise ValueError(f"port: {port} is outside 0..65535")
    with ExitStack() as stack:
        if run_dir is None:
            run_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="attn-replicas-")))
        run_dir.mkdir(parents=True, exist_ok=True)
        temp_dir = run_dir
        if os.geteuid() == 0:
            # Started as root, nginx's workers run as `nobody`: request bodies they buffer (uploads) need a
            # directory nobody can reach, which a private run dir (mode 700 parents) is not.
            temp_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="attn-nginx-temp-")))
            temp_dir.chmod(0o755)
        from core import config  # here, not at the top: core loads torch, which only the servers need

        if cache_dir is None:
            configured = config.read("cache_dir")
            cache_dir = Path(configured) if configured is not None else config.DEFAULT_CACHE_DIR
        cache_dir.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            **(env or {}),
            config.variable("cache_dir"): str(cache_dir),
            # One secret for all replicas, so a cookie Streamlit signs on one is valid on the others.
            "STREAMLIT_SERVER_COOKIE_SECRET": secrets.token_hex(32),
            "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false",
        }
        shares = core_shares(replicas) if pin else [None] * replicas
        result = Deployment(url="", run_dir=run_dir, cache_dir=cache_dir)
        stack.callback(_stop_all, result)
        for share in shares:
            replica_port = free_port()
            command = ["taskset", "--cpu-list", ",".join(map(str, share))] if share else []
            command += [python, "-m", "streamlit", "run", SERVER_SCRIPT, "--server.headless", "true"]
            command += ["--server.address", "127.0.0.1", "--server.port", str(replica_port)]
            command += ["--server.fileWatcherType", "none"]
            result.replicas.append(
                spawn(
                    f"replica :{replica_port}",
                    command,
                    run_dir / f"replica-{replica_port}.log",
                    f"http://127.0.0.1:{replica_port}",
                    env,
                )
            )
        wait_healthy(result.replicas, timeout_s)  # before nginx, which would mark a starting replica as down
        listen_port = port or free_port(address)
        conf = run_dir / "nginx.conf"
        conf.write_text(
            render_nginx_conf(
                result.backends,
                f"{address}:{listen_port}",
                error_log=str(run_dir / "error.log"),
                access_log=str(run_dir / "access.log"),
                temp_dir=str(temp_dir),
            )
        )
        checked = check_nginx_conf(conf, run_dir)
        if checked.returncode != 0:
            raise RuntimeError(f"nginx rejected {conf}:\n{checked.stderr}")
        result.url = f"http://{address}:{listen_port}"
        command = nginx_command(conf, run_dir, "-g", f"daemon off; pid {run_dir / 'nginx.pid'};")
        result.nginx = spawn("nginx", command, run_dir / "nginx.out", result.url, env)
        wait_healthy([result.nginx], timeout_s)
        yield result


def _stop_all(result: Deployment) -> None:
    if result.nginx is not None:
        stop(result.nginx.process)  # SIGTERM is nginx's fast shutdown: open websockets do not hold it up
    for replica in result.replicas:
        stop(replica.process)


def _raise_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # unwinds the context managers, so everything is stopped


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replicas", type=int, default=2, help="app processes to start (default 2)")
    parser.add_argument("--port", type=int, default=8080, help="the proxy's port (default 8080; 0: a free one)")
    parser.add_argument("--address", default="127.0.0.1", help="the proxy's address (0.0.0.0 to serve the LAN)")
    parser.add_argument("--cache-dir", type=Path, help="shared result cache (default $ATTN_EXPLORER_CACHE_DIR)")
    parser.add_argument("--run-dir", type=Path, help="where the config, logs and pid go (default: a temp dir)")
    parser.add_argument("--no-pin", action="store_true", help="do not pin each replica to its share of the cores")
    parser.add_argument("--print-config", action="store_true", help="print an nginx config and exit")
    parser.add_argument("--server", action="append", default=[], help="with --print-config: a backend host:port")
    parser.add_argument("--listen", default="80", help="with --print-config: the listen directive's value")
    parser.add_argument("--error-log", default="/var/log/nginx/error.log", help="with --print-config")
    parser.add_argument("--access-log", default="/var/log/nginx/access.log", help="with --print-config")
    parser.add_argument("--temp-dir", default="/var/cache/nginx", help="with --print-config")
    args = parser.parse_args(argv)
    if args.print_config:
        print(
            render_nginx_conf(
                args.server,
                args.listen,
                error_log=args.error_log,
                access_log=args.access_log,
                temp_dir=args.temp_dir,
            ),
            end="",
        )
        return 0
    from core import config
    from core.errors import ConfigError

    try:  # each replica checks it too, but one message here beats N replicas failing to start
        config.validate_environment()
    except ConfigError as error:
        print(f"not started, a setting is out of range (python -m core.config lists them):\n{error}", file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _raise_on_sigterm)
    with deployment(
        args.replicas,
        args.port,
        address=args.address,
        cache_dir=args.cache_dir,
        run_dir=args.run_dir,
        pin=not args.no_pin,
    ) as d:
        print(f"serving {d.url} -> {', '.join(d.backends)}; cache {d.cache_dir}; logs {d.run_dir}", flush=True)
        try:
            while all(p.process.poll() is None for p in [*d.replicas, *([d.nginx] if d.nginx else [])]):
                time.sleep(1)
        except KeyboardInterrupt:
            return 0
    print("a replica or nginx exited; everything was stopped", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
