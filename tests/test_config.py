"""core.config: every ATTN_EXPLORER_* variable declared once, read fresh, refused with one error when out of range,
read nowhere else, and listed in README.md's generated table."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from core import config
from core.errors import ConfigError, ParameterError

REPO_ROOT = Path(__file__).resolve().parent.parent

# One value outside its range per variable (cache_dir takes any path, so it has none).
BAD_VALUES = {
    "cache_bytes": ["0", "junk", "1.5"],
    "memory_cache_bytes": ["-5", "junk"],
    "memory_limit": ["0", "-1", "abc", "inf"],
    "job_seconds": ["0", "-1", "nan", "inf", "abc"],
    "upload_mb": ["0", "-3", "2000", "nan", "abc"],
    "upload_hours": ["0", "-1", "inf", "abc"],
    "slots": ["0", "65", "zero", "2.5"],
    "light_slots": ["0", "999", "junk"],
    "prefetch": ["maybe", "2"],
    "warmup": ["maybe"],
    "trim": ["enabled"],
    "developer": ["sure"],
    "malloc_mmap_bytes": ["-1", "1.5", str(32 * 2**20 + 1), "junk"],
    "plotly_bundle": ["cdn"],
    "cache_url": ["http://127.0.0.1:6379", "127.0.0.1:6379", "redis://"],
    "scheduler": ["127.0.0.1:8786", "http://127.0.0.1:8786", "tcp://", "tcp://scheduler"],
}
GOOD_VALUES = {
    "cache_dir": [("/tmp/somewhere", Path("/tmp/somewhere"))],
    "cache_bytes": [("1e9", 10**9), ("1", 1)],
    "memory_cache_bytes": [("0", 0), ("1e3", 1000)],
    "memory_limit": [(str(2**31), 2**31), (" 4e9 ", 4 * 10**9)],
    "job_seconds": [("7.5", 7.5), ("60", 60.0)],
    "upload_mb": [("64", 64.0), ("0.5", 0.5), ("1024", 1024.0)],
    "upload_hours": [("24", 24.0), ("0.25", 0.25)],
    "slots": [("1", 1), ("64", 64)],
    "light_slots": [("3", 3)],
    "prefetch": [("0", False), ("On", True)],
    "warmup": [("no", False), ("yes", True)],
    "trim": [("false", False), ("1", True)],
    "developer": [(" Yes ", True), ("off", False)],
    "malloc_mmap_bytes": [("1048576", 1048576), (" 2e6 ", 2_000_000), ("0", 0)],
    "plotly_bundle": [("served", "served")],
    "cache_url": [
        (" redis://cache:6379/0 ", "redis://cache:6379/0"),
        ("unix:///run/redis.sock", "unix:///run/redis.sock"),
    ],
    "scheduler": [(" tcp://scheduler:8786 ", "tcp://scheduler:8786"), ("tls://10.0.0.5:8786", "tls://10.0.0.5:8786")],
}


def test_every_variable_is_declared_with_a_type_a_range_a_default_and_help() -> None:
    assert set(config.NAMES) == set(GOOD_VALUES)
    for name, field in config.AppConfig.model_fields.items():
        extra = field.json_schema_extra
        assert isinstance(extra, dict) and extra["kind"] and extra["allowed"], name
        assert field.description and len(field.description) > 20, name


@pytest.mark.parametrize(("name", "raw"), [(n, raw) for n, values in BAD_VALUES.items() for raw in values])
def test_a_bad_value_is_refused_naming_the_variable_the_value_and_the_range(
    name: str, raw: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(config.variable(name), raw)
    with pytest.raises(ConfigError) as refused:
        config.read(name)
    assert isinstance(refused.value, ParameterError) and refused.value.parameter == config.variable(name)
    assert str(refused.value) == f"{config.variable(name)}: {raw!r} is not allowed; it must be {config.allowed(name)}"


@pytest.mark.parametrize(("name", "raw", "value"), [(n, r, v) for n, pairs in GOOD_VALUES.items() for r, v in pairs])
def test_a_good_value_is_read(name: str, raw: str, value: object, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(config.variable(name), raw)
    assert config.read(name) == value
    assert config.read(name, {config.variable(name): raw}) == value


@pytest.mark.parametrize("name", config.NAMES)
def test_unset_or_blank_means_the_default(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(config.variable(name), raising=False)
    assert config.read(name) == config.default(name)
    for blank in ("", "  "):
        monkeypatch.setenv(config.variable(name), blank)
        assert config.read(name) == config.default(name)


def test_values_are_read_fresh_when_the_environment_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTN_EXPLORER_JOB_SECONDS", "20")
    assert config.read("job_seconds") == 20
    monkeypatch.setenv("ATTN_EXPLORER_JOB_SECONDS", "30")
    assert config.read("job_seconds") == 30
    monkeypatch.setenv("ATTN_EXPLORER_JOB_SECONDS", "-3")
    with pytest.raises(ConfigError):
        config.read("job_seconds")
    monkeypatch.delenv("ATTN_EXPLORER_JOB_SECONDS")
    assert config.read("job_seconds") == 60


def test_the_whole_configuration_loads_as_each_variable_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in config.NAMES:
        monkeypatch.delenv(config.variable(name), raising=False)
    for name, pairs in GOOD_VALUES.items():
        monkeypatch.setenv(config.variable(name), pairs[0][0])
    loaded = config.validate_environment()  # through pydantic-settings' own environment source
    assert {name: getattr(loaded, name) for name in config.NAMES} == {name: config.read(name) for name in config.NAMES}


def test_validation_names_every_bad_variable_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTN_EXPLORER_SLOTS", "zero")
    monkeypatch.setenv("ATTN_EXPLORER_TRIM", "maybe")
    with pytest.raises(ConfigError) as refused:
        config.validate_environment()
    assert {variable for variable, _, _ in refused.value.problems} == {"ATTN_EXPLORER_SLOTS", "ATTN_EXPLORER_TRIM"}
    assert "'zero' is not allowed" in str(refused.value) and "'maybe' is not allowed" in str(refused.value)


def test_a_misspelt_variable_is_reported() -> None:
    assert config.unknown_variables({"ATTN_EXPLORER_SLOT": "2", "ATTN_EXPLORER_SLOTS": "2", "HOME": "/"}) == [
        "ATTN_EXPLORER_SLOT"
    ]


def test_the_server_refuses_to_start_with_a_bad_value(tmp_path: Path) -> None:
    import os

    env = dict(os.environ, ATTN_EXPLORER_LIGHT_SLOTS="lots", ATTN_EXPLORER_CACHE_DIR=str(tmp_path / "cache"))
    command = [sys.executable, "-m", "streamlit", "run", "deploy/serve.py", "--server.headless", "true"]
    command += ["--server.port", "0"]
    done = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "ATTN_EXPLORER_LIGHT_SLOTS: 'lots' is not allowed; it must be an integer from 1 to 64" in done.stderr


ENV_READ = re.compile(r"(?:os\.environ\.get|os\.getenv|environ\.get)\(\s*([^,)]+)|os\.environ\[([^\]]+)\](?!\s*=[^=])")


def test_the_variables_are_read_only_through_core_config() -> None:
    sources = [REPO_ROOT / "app.py"]
    for folder in ("core", "ui", "deploy", "pages"):
        sources += sorted((REPO_ROOT / folder).rglob("*.py"))
    offenders = []
    for path in sources:
        if path == REPO_ROOT / "core" / "config.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for match in ENV_READ.finditer(line):
                argument = match.group(1) or match.group(2)
                if "ATTN_EXPLORER" in argument or argument.strip().endswith(("_VARIABLE", "_ENV", "VARIABLE")):
                    offenders.append(f"{path.relative_to(REPO_ROOT)}:{number}: {line.strip()}")
    assert not offenders, "read these through core.config:\n" + "\n".join(offenders)


def test_every_variable_the_code_names_is_declared() -> None:
    named: set[str] = set()
    for folder in ("core", "ui", "deploy", "pages"):
        for path in (REPO_ROOT / folder).rglob("*.py"):
            if path == REPO_ROOT / "core" / "config.py":  # its docstring speaks of ATTN_EXPLORER_X in general
                continue
            named |= set(re.findall(r"ATTN_EXPLORER_[A-Z_]*[A-Z]", path.read_text()))
    assert named <= {config.variable(name) for name in config.NAMES}, named


def test_readme_shows_the_generated_table() -> None:
    block = config.readme_block((REPO_ROOT / "README.md").read_text())
    assert block is not None, f"README.md lost its {config.README_START} ... {config.README_END} block"
    assert block == config.markdown_table(), (
        "README.md's configuration table differs from core/config.py: run `.venv/bin/python -m core.config --readme`"
    )


def test_the_table_lists_every_variable_once() -> None:
    table = config.markdown_table()
    for name in config.NAMES:
        assert table.count(f"`{config.variable(name)}`") == 1
    assert len(table.splitlines()) == 2 + len(config.NAMES)
