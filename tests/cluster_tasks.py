"""Tasks for the cluster tests, importable on the test cluster's workers (their PYTHONPATH holds tests/).

Plain frozen dataclasses with ``compute(report)``, like the app's views, but not registered as views (the view
registry test lists the app's own).
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from typing import Any

import numpy as np


@dataclasses.dataclass(frozen=True)
class SlowTask:
    """Reports progress every ``step`` seconds for ``seconds``; the result names the process and worker that ran it."""

    seconds: float
    tag: str = ""
    device: str = "cpu"
    step: float = 0.05

    def compute(self, report: Any = None) -> dict[str, Any]:
        steps = max(1, round(self.seconds / self.step))
        for index in range(steps):
            if report is not None:
                report(index / steps, f"step {index} pid {os.getpid()}")
            time.sleep(self.step)
        return {"pid": os.getpid(), "worker": _worker_name(), "values": np.arange(4.0) * self.seconds}


@dataclasses.dataclass(frozen=True)
class ModulesAfter:
    """Computes ``view`` (one of the app's views) where it runs, then names the process, and the Streamlit modules that
    process has loaded by then (a worker preloads ``service.dask_client`` and unpickles the view's modules)."""

    view: Any

    def compute(self, report: Any = None) -> dict[str, Any]:
        result = self.view.compute(report)
        loaded = sorted(name for name in sys.modules if name == "streamlit" or name.startswith("streamlit."))
        return {
            "pid": os.getpid(),
            "worker": _worker_name(),
            "streamlit": loaded,
            "error_message": result.error_message,
            "attention_error": np.asarray(result.metrics["attention_error"]),
        }


def _worker_name() -> str:
    try:
        from distributed import get_worker

        return str(get_worker().name)
    except ValueError:  # not on a worker
        return ""
