"""What the tests need from the machine: under CI (``CI`` set) a missing tool, peer package or OS feature fails a
test, elsewhere it skips it, so CI can never pass by skipping. Every such skip goes through this module; the one
exception is a CUDA device (``tests/test_cuda.py``), which CI's machines never have."""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import NoReturn

import pytest

IN_CI = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def unavailable(message: str, *, allow_module_level: bool = False) -> NoReturn:
    """Fail under CI, skip elsewhere."""
    if IN_CI:
        pytest.fail(message, pytrace=False)
    pytest.skip(message, allow_module_level=allow_module_level)


def require(available: bool, message: str) -> None:
    """``unavailable(message)`` unless ``available``: for a tool or OS feature a test needs."""
    if not available:
        unavailable(message)


def import_or_unavailable(name: str) -> ModuleType:
    """The module ``name``, or ``unavailable`` naming the requirements file that provides it."""
    try:
        return importlib.import_module(name)
    except ImportError as error:
        unavailable(f"{name} is not installed ({error}); it comes with requirements-bench.txt")
