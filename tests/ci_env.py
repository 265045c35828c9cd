"""What the tests need from the machine: under CI (``CI`` set) a missing tool or OS feature fails a test, elsewhere it
skips it, so CI can never pass by skipping."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

IN_CI = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def unavailable(message: str, *, allow_module_level: bool = False) -> NoReturn:
    """Fail under CI, skip elsewhere."""
    if IN_CI:
        pytest.fail(message)
    pytest.skip(message, allow_module_level=allow_module_level)
