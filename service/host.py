"""What this host gives the service: the CPUs this process may use (the scheduler's slots and the Dask worker's torch
threads are both sized from it)."""

from __future__ import annotations

import os


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity on Linux, else the machine's count), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)
