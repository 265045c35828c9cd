"""The import contracts (pyproject.toml's [tool.importlinter], run by ``lint-imports`` in scripts/test.sh) hold, and
they fail when an arrow is reversed: a module of the service that imports ``ui``, or Streamlit."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("benchmarks", "deploy", "ui", "service", "core")
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def copy_of_the_app(target: Path) -> Path:
    """The packages the contracts cover and pyproject.toml, copied into ``target`` (sources only)."""
    for package in PACKAGES:
        shutil.copytree(ROOT / package, target / package, ignore=shutil.ignore_patterns("__pycache__", "results"))
    shutil.copy(ROOT / "pyproject.toml", target / "pyproject.toml")
    return target


def lint_imports(where: Path) -> subprocess.CompletedProcess[str]:
    if not LINT_IMPORTS.exists():
        pytest.fail(f"{LINT_IMPORTS} is missing: pip install -r requirements-dev.txt (import-linter)")
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], cwd=where, capture_output=True, text=True, timeout=120, check=False
    )


def test_the_contracts_hold_on_the_app(tmp_path: Path) -> None:
    done = lint_imports(copy_of_the_app(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 kept, 0 broken" in done.stdout


def test_a_service_module_that_imports_ui_breaks_the_layers(tmp_path: Path) -> None:
    app = copy_of_the_app(tmp_path)
    (app / "service" / "reversed_arrow.py").write_text("from ui import widgets  # noqa: F401\n")
    done = lint_imports(app)
    assert done.returncode != 0
    assert "Layers: benchmarks -> deploy -> ui -> service -> core BROKEN" in done.stdout
    assert "service.reversed_arrow -> ui.widgets" in done.stdout


def test_a_service_module_that_imports_streamlit_is_refused(tmp_path: Path) -> None:
    app = copy_of_the_app(tmp_path)
    (app / "service" / "draws.py").write_text("import streamlit  # noqa: F401\n")
    done = lint_imports(app)
    assert done.returncode != 0
    assert "The service and the engine import no Streamlit BROKEN" in done.stdout
    assert "service.draws -> streamlit" in done.stdout


def test_the_engine_importing_deploy_breaks_the_layers(tmp_path: Path) -> None:
    app = copy_of_the_app(tmp_path)
    (app / "core" / "reversed_arrow.py").write_text("import deploy.processes  # noqa: F401\n")
    done = lint_imports(app)
    assert done.returncode != 0
    assert "core.reversed_arrow -> deploy.processes" in done.stdout
