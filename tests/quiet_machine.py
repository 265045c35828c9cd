"""For the serial tests that time work against an estimate: wait until what ran before them (a browser test's
replicas, workers and Chromium shutting down) has left the machine, so the measurement is of the work alone."""

from __future__ import annotations

import time

import psutil


def wait_for_a_quiet_machine(timeout_s: float = 60.0, busy_below: float = 25.0) -> float:
    """Wait until the whole machine's CPU use is under ``busy_below`` percent in two half-second samples in a row, at
    most ``timeout_s``; returns the last sample (the measurement goes on either way, and its assertion says why)."""
    deadline = time.monotonic() + timeout_s
    quiet = 0
    sample = psutil.cpu_percent(interval=0.5)
    while time.monotonic() < deadline:
        quiet = quiet + 1 if sample < busy_below else 0
        if quiet >= 2:
            break
        sample = psutil.cpu_percent(interval=0.5)
    return sample
