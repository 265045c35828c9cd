"""ui/streamlit_compat.py: the private Streamlit and diskcache APIs the app uses are the ones the installed versions
have, and ``import ui`` changes nothing in Streamlit (the server's installs happen in deploy/serve.py)."""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import diskcache
import pytest
import streamlit

from ui import streamlit_compat

REPO_ROOT = Path(__file__).resolve().parent.parent


def _recheck_message(library: str, installed: str, checked: str) -> str:
    internals = [name for name, (owner, _) in streamlit_compat.INTERNALS.items() if owner == library]
    listed = "\n".join(f"  {name}: {streamlit_compat.INTERNALS[name][1]}" for name in internals)
    return (
        f"{library} is {installed}, ui/streamlit_compat.py was checked against {checked}: re-check these "
        f"{len(internals)} internals, then update the version there:\n{listed}"
    )


def test_streamlit_is_the_version_the_internals_were_checked_against() -> None:
    installed = streamlit.__version__
    assert installed == streamlit_compat.STREAMLIT_VERSION, _recheck_message(
        "streamlit", installed, streamlit_compat.STREAMLIT_VERSION
    )


def test_diskcache_is_the_version_the_internals_were_checked_against() -> None:
    installed = diskcache.__version__
    assert installed == streamlit_compat.DISKCACHE_VERSION, _recheck_message(
        "diskcache", installed, streamlit_compat.DISKCACHE_VERSION
    )


def test_the_recorded_versions_are_the_pinned_ones() -> None:
    pins = dict(
        line.split("==", 1) for line in (REPO_ROOT / "requirements.txt").read_text().splitlines() if "==" in line
    )
    assert pins["streamlit"].strip() == streamlit_compat.STREAMLIT_VERSION
    assert pins["diskcache"].strip() == streamlit_compat.DISKCACHE_VERSION


def _instance_for(owner: type, tmp_path: Path) -> Any:
    """An instance of a class whose internal is an attribute set in ``__init__``."""
    if owner is diskcache.Cache:
        return diskcache.Cache(str(tmp_path / "cache"))
    return owner()


def _resolve(dotted: str, tmp_path: Path) -> None:
    """Import the longest importable prefix of ``dotted``, then find each further name as a module or class
    attribute, a dataclass field, or an attribute of a fresh instance. Raises AttributeError naming what is gone."""
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        try:
            target: Any = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        break
    else:
        raise AttributeError(f"no module of {dotted} imports")
    for name in parts[split:]:
        if hasattr(target, name):
            target = getattr(target, name)
        elif dataclasses.is_dataclass(target) and name in {f.name for f in dataclasses.fields(target)}:
            return
        elif isinstance(target, type) and hasattr(_instance_for(target, tmp_path), name):
            return
        else:
            raise AttributeError(f"{dotted}: {name} is gone")


@pytest.mark.parametrize("dotted", sorted(streamlit_compat.INTERNALS))
def test_each_internal_still_exists(dotted: str, tmp_path: Path) -> None:
    library, use = streamlit_compat.INTERNALS[dotted]
    try:
        _resolve(dotted, tmp_path)
    except AttributeError as gone:
        pytest.fail(f"{gone} ({library}; used for {use}): adapt ui/streamlit_compat.py")


def test_no_module_of_the_app_reaches_into_streamlit_or_diskcache_internals_itself() -> None:
    offenders = []
    patterns = ("from streamlit.runtime", "import streamlit.runtime", "from streamlit import runtime")
    patterns += ("streamlit.proto", "._config_options", "._initial_query_params", "._sql(", "._rerun_data")
    patterns += ("get_script_run_ctx(", "ThreadState.get(", "get_session_state(", "AppSession.handle_backmsg =")
    for folder in ("core", "ui", "deploy", "pages"):
        for path in sorted((REPO_ROOT / folder).rglob("*.py")):
            if path.name == "streamlit_compat.py":
                continue
            text = path.read_text()
            offenders += [f"{path.relative_to(REPO_ROOT)}: {p}" for p in patterns if p in text]
    assert not offenders, "go through ui/streamlit_compat.py instead:\n" + "\n".join(offenders)


IMPORT_UI_PROBE = """
import gc, json, threading
from streamlit import config
from streamlit.runtime.app_session import AppSession
before = (config.get_option, config.get_options_for_section, AppSession.handle_backmsg)
threads_before = {t.name for t in threading.enumerate()}
import ui
after = (config.get_option, config.get_options_for_section, AppSession.handle_backmsg)
print(json.dumps({
    "same": [a is b for a, b in zip(before, after)],
    "frozen": gc.get_freeze_count(),
    "new_threads": sorted({t.name for t in threading.enumerate()} - threads_before),
}))
"""


def test_importing_ui_changes_nothing_in_streamlit(tmp_path: Path) -> None:
    env = dict(os.environ, ATTN_EXPLORER_CACHE_DIR=str(tmp_path / "cache"), ATTN_EXPLORER_TRIM="1")
    out = subprocess.run(
        [sys.executable, "-c", IMPORT_UI_PROBE], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    facts = json.loads(out.stdout.strip().splitlines()[-1])
    assert facts["same"] == [True, True, True], (
        "import ui replaced get_option, get_options_for_section or handle_backmsg"
    )
    assert facts["frozen"] == 0, "import ui froze the garbage collector's heap"
    assert "attn-idle-trim" not in facts["new_threads"], "import ui started the idle trimmer"


def test_serve_py_installs_ui_serving_in_its_lifespan() -> None:
    source = (REPO_ROOT / "deploy" / "serve.py").read_text()
    assert "serving.install()" in source and "lifespan=lifespan" in source
