"""Every ``ATTN_EXPLORER_*`` environment variable of the app, declared once: type, allowed range, default, help.

    >>> from core import config
    >>> config.read("job_seconds")        # ATTN_EXPLORER_JOB_SECONDS, checked; 60.0 when unset or blank
    >>> config.validate_environment()     # all of them at once: deploy/serve.py calls it at the server's start

One error policy: a value outside its allowed range is refused with ``core.errors.ConfigError`` (a
``ParameterError``), whose message names the variable, the value and what is allowed. Nothing falls back silently;
an unset or blank variable means its default.

Values are read when asked for, not once per process, so a host or a test (``monkeypatch.setenv``) may change them at
run time. Each variable's parsed value is kept per raw string, so a read costs a dictionary lookup.

    python -m core.config             # the Markdown table of every variable
    python -m core.config --readme    # ... written into README.md, between its config-table markers
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from annotated_types import Ge, Gt, Le
from pydantic import BeforeValidator, Field, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from core.errors import ConfigError

PREFIX = "ATTN_EXPLORER_"
REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CACHE_DIR = REPO_ROOT / ".cache" / "results"
MIB = 2**20
GIB = 2**30
MMAP_BYTES_MAX = 32 * MIB  # glibc's largest mmap threshold on 64-bit systems (core.profiling.MMAP_THRESHOLD_MAX)
ON_WORDS = frozenset({"1", "true", "yes", "on"})
OFF_WORDS = frozenset({"0", "false", "no", "off"})


def _switch(raw: Any) -> Any:
    if isinstance(raw, str):
        word = raw.strip().lower()
        if word in ON_WORDS:
            return True
        if word in OFF_WORDS:
            return False
        raise ValueError("not an on/off word")
    return raw


def _number(raw: Any) -> Any:
    if isinstance(raw, str):
        value = float(raw.strip())
        if not math.isfinite(value):
            raise ValueError("not a finite number")
        return value
    return raw


def _whole_number(raw: Any) -> Any:
    """An integer written either way: ``1048576`` or ``1e6`` (byte counts are often written so)."""
    value = _number(raw)
    if isinstance(value, float):
        if value != int(value):
            raise ValueError("not a whole number")
        return int(value)
    return value


REDIS_SCHEMES = ("redis://", "rediss://", "unix://")
DASK_SCHEMES = ("tcp://", "tls://")


def _dask_address(raw: Any) -> Any:
    if isinstance(raw, str):
        address = raw.strip()
        if not address.startswith(DASK_SCHEMES) or ":" not in address.split("://", 1)[1]:
            raise ValueError("not a Dask scheduler address")
        return address
    return raw


def _redis_url(raw: Any) -> Any:
    if isinstance(raw, str):
        url = raw.strip()
        if not url.startswith(REDIS_SCHEMES) or not url.split("://", 1)[1]:
            raise ValueError("not a Redis URL")
        return url
    return raw


Switch = Annotated[bool, BeforeValidator(_switch)]
Seconds = Annotated[float, BeforeValidator(_number), Gt(0)]
SlotCount = Annotated[int, BeforeValidator(_whole_number), Ge(1), Le(64)]

SWITCH_ALLOWED = "on (1, true, yes, on) or off (0, false, no, off)"


def _declare(default: Any, help: str, kind: str, allowed: str, default_text: str | None = None) -> Any:
    """A field with the table's columns: ``kind`` (its type in words), ``allowed`` (also in every error message)
    and ``default_text`` (the default as the table shows it, where the value itself does not say it)."""
    extra: dict[str, Any] = {"kind": kind, "allowed": allowed, "default_text": default_text or ""}
    return Field(default=default, description=help, json_schema_extra=extra)


class AppConfig(BaseSettings):
    """The app's environment. Field ``x`` is the variable ``ATTN_EXPLORER_X``."""

    model_config = SettingsConfigDict(env_prefix=PREFIX, env_ignore_empty=True, extra="ignore", frozen=True)

    cache_dir: Path | None = _declare(
        None,
        "Where the shared on-disk result cache lives; every server process on the host shares it.",
        "path",
        "a directory (created when missing)",
        "`.cache/results` in the repository",
    )
    cache_url: Annotated[str, BeforeValidator(_redis_url)] | None = _declare(
        None,
        "A Redis server that holds the result cache instead of the folder, shared by every host that names it "
        "(`redis://host:6379/0`). Bound its memory with Redis's `maxmemory` and `maxmemory-policy allkeys-lru`.",
        "URL",
        "a redis://, rediss:// or unix:// URL, or unset",
        "unset (the on-disk cache folder)",
    )
    cache_bytes: Annotated[int, BeforeValidator(_whole_number), Ge(1)] = _declare(
        GIB,
        "Size bound of the on-disk result cache; the least recently used entries go first.",
        "bytes",
        "a whole number of bytes, at least 1 (1e9 is accepted)",
        "1073741824 (1 GiB)",
    )
    memory_cache_bytes: Annotated[int, BeforeValidator(_whole_number), Ge(0)] = _declare(
        384 * MIB,
        "Bound of each server process's in-memory layer of decoded results; 0 turns the layer off.",
        "bytes",
        "a whole number of bytes, at least 0 (1e9 is accepted)",
        "402653184 (384 MiB)",
    )
    memory_limit: Annotated[int, BeforeValidator(_whole_number), Ge(1)] = _declare(
        4 * GIB,
        "Bytes one computation may use: settings estimated above it are refused or reduced before they start.",
        "bytes",
        "a positive whole number of bytes (4e9 is accepted)",
        "4294967296 (4 GiB)",
    )
    job_seconds: Seconds = _declare(
        60.0,
        "Seconds one computation may take: settings estimated above it are refused, and a job still running then "
        "stops.",
        "seconds",
        "a positive number of seconds",
        "60",
    )
    upload_mb: Annotated[float, BeforeValidator(_number), Gt(0), Le(1024)] = _declare(
        64.0,
        "Largest file of q, k, v (or logits) a visitor may upload, and at most an eighth of the memory limit "
        "above. Only that uploader takes it: every other upload keeps the 1 MB cap of `.streamlit/config.toml`.",
        "MB",
        "a number of MB above 0, at most 1024",
        "64",
    )
    upload_hours: Seconds = _declare(
        24.0,
        "How long the shared result cache keeps an uploaded file; a link to it then says that it has expired.",
        "hours",
        "a positive number of hours",
        "24",
    )
    slots: SlotCount | None = _declare(
        None,
        "How many heavy jobs the process-wide scheduler runs at once.",
        "integer",
        "an integer from 1 to 64",
        "one per GPU, else half the CPU cores (at least 1)",
    )
    scheduler: Annotated[str, BeforeValidator(_dask_address)] | None = _declare(
        None,
        "A Dask scheduler whose workers compute the heavy jobs (`tcp://host:8786`); the app keeps admission, the "
        "queue and progress. Workers started with `--resources GPU=1` take the jobs that run on CUDA.",
        "address",
        "a tcp:// or tls:// address with a port, or unset",
        "unset (jobs compute in the app's own process)",
    )
    light_slots: SlotCount | None = _declare(
        None,
        "How many light computations (a method at the page's settings, exact attention) run at once.",
        "integer",
        "an integer from 1 to 64",
        "one per CPU core",
    )
    prefetch: Switch = _declare(
        True,
        "Compute the neighbouring temperatures of a page ahead, while the server is idle.",
        "on/off",
        SWITCH_ALLOWED,
        "on",
    )
    warmup: Switch = _declare(
        True,
        "Compute every page's default link, preset and lesson step once, in the background, when the server starts.",
        "on/off",
        SWITCH_ALLOWED,
        "on",
    )
    trim: Switch = _declare(
        True,
        "Give freed memory back to the system (`malloc_trim`) when the server is idle; glibc only.",
        "on/off",
        SWITCH_ALLOWED,
        "on",
    )
    developer: Switch = _declare(
        False,
        "Let browsers send the developer menu's messages (clear every cache, run on save, git info).",
        "on/off",
        SWITCH_ALLOWED,
        "off",
    )
    malloc_mmap_bytes: Annotated[int, BeforeValidator(_whole_number), Ge(0), Le(MMAP_BYTES_MAX)] | None = _declare(
        None,
        "glibc maps every allocation of at least this size on its own and unmaps it at free: a lower memory peak "
        "while a class computes, for fresh pages on each large array.",
        "bytes",
        f"a whole number of bytes from 0 to {MMAP_BYTES_MAX} (32 MiB), e.g. 1048576",
        "unset (glibc's own threshold)",
    )
    plotly_bundle: Literal["served"] | None = _declare(
        None,
        "Set by `deploy/serve.py` for its own pages: figures load the Plotly bundle that server serves. Not for "
        "users to set.",
        "text",
        "served, or unset",
        "unset",
    )

    @model_validator(mode="before")
    @classmethod
    def _blank_is_unset(cls, values: Any) -> Any:
        if isinstance(values, dict):
            return {k: v for k, v in values.items() if not (isinstance(v, str) and not v.strip())}
        return values


NAMES: tuple[str, ...] = tuple(AppConfig.model_fields)


def variable(name: str) -> str:
    """The environment variable of field ``name``: ``variable("job_seconds") == "ATTN_EXPLORER_JOB_SECONDS"``."""
    if name not in AppConfig.model_fields:
        raise KeyError(f"{name!r} is not declared in core/config.py (declared: {', '.join(NAMES)})")
    return PREFIX + name.upper()


def default(name: str) -> Any:
    """The value of field ``name`` when its variable is unset."""
    return AppConfig.model_fields[name].default


def allowed(name: str) -> str:
    """What field ``name`` accepts, in words (the text of its error message and of the table)."""
    extra = AppConfig.model_fields[name].json_schema_extra
    assert isinstance(extra, dict)
    return str(extra["allowed"])


def _problems(error: ValidationError, raw_by_name: Mapping[str, str]) -> list[tuple[str, str, str]]:
    names = []
    for item in error.errors():
        name = str(item["loc"][0]) if item["loc"] else ""
        if name in AppConfig.model_fields and name not in names:
            names.append(name)
    return [(variable(name), raw_by_name.get(name, ""), allowed(name)) for name in names]


# (name, raw string or None) -> parsed value. Bounded: only tests change values often.
_parsed: dict[tuple[str, str | None], Any] = {}
_PARSED_MAX = 512


def read(name: str, environ: Mapping[str, str] | None = None) -> Any:
    """The value of ``ATTN_EXPLORER_<NAME>`` in ``environ`` (default: this process's environment, read now), or its
    default when unset or blank. Raises ``ConfigError`` naming the variable, its value and the allowed range."""
    raw = (os.environ if environ is None else environ).get(variable(name))
    try:
        return _parsed[(name, raw)]
    except KeyError:
        pass
    try:
        value = getattr(AppConfig.model_validate({} if raw is None else {name: raw}), name)
    except ValidationError as error:
        raise ConfigError(_problems(error, {name: raw or ""})) from None
    if len(_parsed) >= _PARSED_MAX:
        _parsed.clear()
    _parsed[(name, raw)] = value
    return value


def load() -> AppConfig:
    """Every variable of this process's environment at once (through pydantic-settings). Raises ``ConfigError``
    naming every bad one."""
    try:
        return AppConfig()
    except ValidationError as error:
        raw_by_name = {name: os.environ.get(variable(name), "") for name in NAMES}
        raise ConfigError(_problems(error, raw_by_name)) from None


def unknown_variables(environ: Mapping[str, str] | None = None) -> list[str]:
    """``ATTN_EXPLORER_*`` variables that are set but declared nowhere (a typo reads as unset)."""
    declared = {variable(name) for name in NAMES}
    return sorted(k for k in (os.environ if environ is None else environ) if k.startswith(PREFIX) and k not in declared)


def validate_environment() -> AppConfig:
    """Check the whole configuration (at a server's start, so a bad value stops it with the message instead of
    failing later in a page). Raises ``ConfigError``."""
    return load()


def markdown_table() -> str:
    """The table of every variable: name, type, default, allowed values, what it does."""
    rows = ["| variable | type | default | allowed | what it does |", "|---|---|---|---|---|"]
    for name, field in AppConfig.model_fields.items():
        extra = field.json_schema_extra
        assert isinstance(extra, dict)
        default = extra["default_text"] or str(field.default)
        cells = [f"`{variable(name)}`", extra["kind"], default, extra["allowed"], field.description or ""]
        rows.append("| " + " | ".join(str(cell).replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(rows) + "\n"


README_START = "<!-- config-table:start -->"
README_END = "<!-- config-table:end -->"


def readme_block(readme: str) -> str | None:
    """What README.md holds between its config-table markers (None without them)."""
    start, end = readme.find(README_START), readme.find(README_END)
    if start < 0 or end < start:
        return None
    return readme[start + len(README_START) : end].strip("\n") + "\n"


def write_readme_table(path: Path = REPO_ROOT / "README.md") -> bool:
    """Replace the block between README.md's config-table markers by ``markdown_table()``. False without them."""
    readme = path.read_text()
    if readme_block(readme) is None:
        return False
    head, rest = readme.split(README_START, 1)
    _, tail = rest.split(README_END, 1)
    path.write_text(f"{head}{README_START}\n{markdown_table()}{README_END}{tail}")
    return True


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["--readme"]:  # python -m core.config --readme: README.md's table, rewritten in place
        if not write_readme_table():
            sys.exit(f"README.md has no {README_START} ... {README_END} block")
    else:
        print(markdown_table(), end="")
