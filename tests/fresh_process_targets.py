"""Functions tests/test_benchmarks.py runs by name in benchmarks.harness.in_fresh_process."""

from __future__ import annotations

import os
import time
from typing import Any

CALLS: list[int] = []  # a module global: a fresh process sees it empty


def count_calls(argument: int) -> dict[str, Any]:
    CALLS.append(argument)
    import torch

    torch.set_num_threads(1)  # a change a later fresh process must not inherit
    return {"calls": list(CALLS), "pid": os.getpid(), "torch_loaded_before": True}


def raise_error(argument: str) -> None:
    raise ValueError(argument)


def sleep(seconds: float) -> None:
    time.sleep(seconds)


def die(code: int) -> None:
    os._exit(code)
