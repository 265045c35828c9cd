"""The GPU check's engine steps need no Streamlit: ``benchmarks.gpu``, the modules its fork server imports ahead of
the engine's steps, and the Compare defaults it reads load no ``streamlit`` (the ``ui`` package's ``__init__``
imports it, so the plain data they read lives in ``service/fields.py``). Only the pages step (AppTest) needs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from benchmarks import gpu
from service import fields

ROOT = Path(__file__).resolve().parent.parent

ENGINE_STEPS_SCRIPT = """
import sys

import benchmarks.gpu as gpu
assert "streamlit" not in sys.modules, "import benchmarks.gpu loaded streamlit"
for name in gpu.preloaded_modules([step for step in gpu.STEPS if step != "pages"]):
    __import__(name)
    assert "streamlit" not in sys.modules, f"the fork server's {name} loaded streamlit"
spec, beta, runs = gpu.compare_runs(gpu.Plan.make(dry_run=True))
assert "streamlit" not in sys.modules, "the compare step's defaults loaded streamlit"
print(spec.n, spec.d, spec.heads, beta, *[run.method for run in runs])
"""


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_importing_the_gpu_check_loads_no_streamlit() -> None:
    done = run_python("import benchmarks.gpu, sys; assert 'streamlit' not in sys.modules")
    assert done.returncode == 0, done.stderr


def test_the_engine_steps_read_the_page_defaults_without_streamlit() -> None:
    done = run_python(ENGINE_STEPS_SCRIPT)
    assert done.returncode == 0, done.stderr
    defaults = fields.DEFAULTS
    expected = [256, defaults["d"], defaults["heads"], 1 / defaults["tau"], *fields.COMPARE_METHODS]
    assert done.stdout.split() == [str(value) for value in expected]


def test_the_check_reads_the_defaults_the_pages_read() -> None:
    from ui import fields as ui_fields
    from ui import presets

    assert ui_fields.DEFAULTS is fields.DEFAULTS and ui_fields.SHARED_FIELDS is fields.SHARED_FIELDS
    assert presets.COMPARE_METHODS is fields.COMPARE_METHODS
    assert presets.EVE_METHODS is fields.EVE_METHODS and presets.MAX_REDRAWS == fields.MAX_REDRAWS


def test_only_the_pages_step_preloads_streamlit() -> None:
    assert "ui.page_registry" in gpu.preloaded_modules(gpu.STEPS)  # as before: AppTest's imports ahead of its clock
    assert not [m for m in gpu.preloaded_modules(("compare", "cluster")) if m.split(".")[0] == "ui"]
    assert {"service.compute", "service.views", "service.fields"} <= set(gpu.preloaded_modules(("compare",)))
