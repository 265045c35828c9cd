"""The many-host layout on this machine's loopback: Redis, a Dask scheduler, workers, app replicas behind nginx.

    python -m deploy.loopback --replicas 2 --workers 2 --port 8080     # then open http://127.0.0.1:8080
    python -m deploy.loopback --workers 1 --gpu-workers 1               # on a GPU host: one worker takes CUDA jobs

What it starts, each as its own process group, stopped together on exit (Ctrl-C, SIGTERM, or leaving
``loopback_deployment()``):
- ``redis-server`` on a free port, without persistence, ``maxmemory`` bounded with ``allkeys-lru``: the result cache
  every replica and worker shares (``ATTN_EXPLORER_CACHE_URL``);
- ``dask scheduler`` with ``distributed.scheduler.allowed-failures`` = 1, so a job whose worker dies is retried once
  on another worker, then fails with a message;
- ``dask worker`` processes, one thread each (``--workers`` CPU ones, ``--gpu-workers`` advertising ``GPU=1``), each
  with its share of the cores as torch threads;
- the app replicas behind nginx with sticky sessions (``deploy/replicas.py``), given ``ATTN_EXPLORER_SCHEDULER``: their
  schedulers admit and queue the heavy jobs, the workers compute them.

On real hosts the same pieces run on separate machines: deploy/docker-compose.cluster.yml, and docs/deploying.md.
The scheduler's port runs the code it is sent: keep it and Redis on a private network.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from deploy.processes import Process, free_port, spawn, stop
from deploy.replicas import Deployment, _raise_on_sigterm, deployment

REPO_ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT_S = 90.0
REDIS_MAXMEMORY = "1gb"  # a class's distinct links fill 512 MB, and allkeys-lru then evicts the hit counters too
ALLOWED_FAILURES = 1  # a dead worker's job is retried once elsewhere


@dataclass
class Cluster:
    """Handles of everything ``loopback_deployment`` started."""

    run_dir: Path
    redis_url: str
    scheduler_address: str
    redis: Process
    scheduler: Process
    workers: list[Process] = field(default_factory=list)
    web: Deployment | None = None

    @property
    def url(self) -> str:
        """The proxy in front of the replicas ("" before they start)."""
        return self.web.url if self.web is not None else ""

    def client(self):  # type: ignore[no-untyped-def]
        """A Dask client of the scheduler (the caller closes it)."""
        from distributed import Client

        return Client(self.scheduler_address, timeout=10, set_as_default=False)


def _port_answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _wait(check, what: str, process: Process, timeout_s: float) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not check():
        if process.process.poll() is not None:
            raise RuntimeError(f"{what} exited with code {process.process.returncode}:\n{process.log_tail()}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not start in {timeout_s:.0f} s:\n{process.log_tail()}")
        time.sleep(0.1)


def start_redis(run_dir: Path, env: dict[str, str], maxmemory: str = REDIS_MAXMEMORY) -> tuple[Process, str]:
    import shutil

    binary = shutil.which("redis-server") or "/usr/bin/redis-server"
    port = free_port()
    command = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    command += ["--maxmemory", maxmemory, "--maxmemory-policy", "allkeys-lru"]
    process = spawn(f"redis :{port}", command, run_dir / "redis.log", f"redis://127.0.0.1:{port}", env)
    _wait(lambda: _port_answers(port), "redis-server", process, 15)
    return process, f"redis://127.0.0.1:{port}/0"


def start_scheduler(run_dir: Path, env: dict[str, str]) -> tuple[Process, str]:
    port = free_port()
    command = [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", str(port)]
    command += ["--no-dashboard"]
    scheduler_env = {**env, "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": str(ALLOWED_FAILURES)}
    address = f"tcp://127.0.0.1:{port}"
    process = spawn(f"dask scheduler :{port}", command, run_dir / "scheduler.log", address, scheduler_env)
    _wait(lambda: _port_answers(port), "dask scheduler", process, 30)
    return process, address


def start_worker(
    run_dir: Path, env: dict[str, str], scheduler_address: str, name: str, *, gpu: bool, torch_threads: int
) -> Process:
    """One ``dask worker`` (under its nanny, which restarts it if it dies) with one task thread."""
    command = [sys.executable, "-m", "distributed.cli.dask_worker", scheduler_address, "--name", name]
    command += ["--nthreads", "1", "--no-dashboard", "--host", "127.0.0.1", "--preload", "service.dask_client"]
    if gpu:
        command += ["--resources", "GPU=1"]
    worker_env = {
        **env,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH", "")])),
        "OMP_NUM_THREADS": str(torch_threads),
    }
    return spawn(f"worker {name}", command, run_dir / f"worker-{name}.log", scheduler_address, worker_env)


def wait_for_workers(address: str, count: int, workers: Sequence[Process], timeout_s: float) -> None:
    from distributed import Client

    deadline = time.monotonic() + timeout_s
    with Client(address, timeout=10, set_as_default=False) as client:
        while len(client.scheduler_info(n_workers=-1).get("workers", {})) < count:
            for worker in workers:
                if worker.process.poll() is not None:
                    raise RuntimeError(f"{worker.name} exited:\n{worker.log_tail()}")
            if time.monotonic() > deadline:
                tails = "\n".join(f"--- {w.name}\n{w.log_tail()}" for w in workers)
                raise TimeoutError(f"fewer than {count} workers joined in {timeout_s:.0f} s\n{tails}")
            time.sleep(0.2)


@contextmanager
def loopback_deployment(
    replicas: int = 2,
    workers: int = 2,
    gpu_workers: int = 0,
    port: int = 0,
    *,
    run_dir: Path | None = None,
    web: bool = True,
    timeout_s: float = START_TIMEOUT_S,
    extra_env: dict[str, str] | None = None,
) -> Iterator[Cluster]:
    """Start Redis, the scheduler, the workers and (with ``web``) the replicas behind nginx; stop all on exit.
    ``extra_env``: more environment variables for every process it starts, the replicas included."""
    if not 0 <= workers + gpu_workers <= 64 or workers < 0 or gpu_workers < 0:
        raise ValueError(f"workers: {workers} + gpu_workers: {gpu_workers} must be within 0..64")
    with ExitStack() as stack:
        if run_dir is None:
            run_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="attn-cluster-")))
        run_dir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **(extra_env or {})}
        redis, redis_url = start_redis(run_dir, env)
        stack.callback(stop, redis.process)
        scheduler, address = start_scheduler(run_dir, env)
        stack.callback(stop, scheduler.process)
        from core import config

        shared = {config.variable("cache_url"): redis_url, config.variable("scheduler"): address}
        env.update(shared)
        cores = len(os.sched_getaffinity(0))
        count = workers + gpu_workers
        torch_threads = max(1, cores // max(1, count))
        cluster = Cluster(run_dir, redis_url, address, redis, scheduler)
        for index in range(count):
            gpu = index >= workers
            name = f"{'gpu' if gpu else 'cpu'}-{index + 1}"
            worker = start_worker(run_dir, env, address, name, gpu=gpu, torch_threads=torch_threads)
            stack.callback(stop, worker.process)
            cluster.workers.append(worker)
        if count:
            wait_for_workers(address, count, cluster.workers, timeout_s)
        if web:
            replica_env = {**(extra_env or {}), **shared}
            cluster.web = stack.enter_context(
                deployment(replicas, port, run_dir=run_dir / "web", timeout_s=timeout_s, env=replica_env)
            )
        yield cluster


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replicas", type=int, default=2, help="app processes behind nginx (default 2)")
    parser.add_argument("--workers", type=int, default=2, help="CPU workers (default 2)")
    parser.add_argument("--gpu-workers", type=int, default=0, help="workers that advertise GPU=1 (default 0)")
    parser.add_argument("--port", type=int, default=8080, help="the proxy's port (default 8080; 0: a free one)")
    parser.add_argument("--run-dir", type=Path, help="where configs and logs go (default: a temp dir)")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _raise_on_sigterm)
    with loopback_deployment(args.replicas, args.workers, args.gpu_workers, args.port, run_dir=args.run_dir) as c:
        print(
            f"serving {c.url}; redis {c.redis_url}; scheduler {c.scheduler_address}; "
            f"{len(c.workers)} worker(s); logs {c.run_dir}",
            flush=True,
        )
        processes = [c.redis, c.scheduler, *c.workers]
        try:
            while all(p.process.poll() is None for p in processes):
                time.sleep(1)
        except KeyboardInterrupt:
            return 0
    print("a process exited; everything was stopped", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
