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


# Each case writes one module that reverses an arrow, and names the contract and the import lint-imports must report.
REVERSED_ARROWS = {
    "a service module importing ui": (
        "service/reversed_arrow.py",
        "from ui import widgets  # noqa: F401\n",
        ("Layers: benchmarks -> deploy -> ui -> service -> core BROKEN", "service.reversed_arrow -> ui.widgets"),
    ),
    "a service module importing streamlit": (
        "service/draws.py",
        "import streamlit  # noqa: F401\n",
        ("The service and the engine import no Streamlit BROKEN", "service.draws -> streamlit"),
    ),
    "the engine importing deploy": (
        "core/reversed_arrow.py",
        "import deploy.processes  # noqa: F401\n",
        ("Layers: benchmarks -> deploy -> ui -> service -> core BROKEN", "core.reversed_arrow -> deploy.processes"),
    ),
}


@pytest.mark.parametrize("case", sorted(REVERSED_ARROWS))
def test_a_reversed_arrow_breaks_a_contract(tmp_path: Path, case: str) -> None:
    module, source, reported = REVERSED_ARROWS[case]
    app = copy_of_the_app(tmp_path)
    (app / module).write_text(source)
    done = lint_imports(app)
    assert done.returncode != 0, done.stdout
    for line in reported:
        assert line in done.stdout, done.stdout
