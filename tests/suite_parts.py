"""The suite's two parts (tests/conftest.py's --part option): scripts/test.sh runs the parallel part on pytest-xdist
workers, then the serial part alone. Serial are the tests that must have the machine to themselves: they time work
against a bound, count CPU seconds or resident memory, or drive Chromium against a server whose CPU or stop time they
measure. Mark a new one ``@pytest.mark.serial`` or add its file here."""

from __future__ import annotations

from pathlib import Path

import pytest

# Browser tests run in the parallel part (each xdist worker has its own app server and Chromium) except the ones
# that measure their server's CPU or stop time.
PARTS = ("all", "parallel", "serial")
SERIAL_FILES = {
    "tests/test_cancel.py": "a cancelled job stops within a bound",
    "tests/test_cluster.py": "a stopped worker stops within a bound",
    "tests/test_gpu_check.py": "the dry run finishes inside its budget",
    "tests/test_hostile_urls.py": "a hostile link's run ends within the run limit",
    "tests/test_huge_urls.py": "a huge link's job stays within its seconds and memory",
    "tests/test_jobs.py": "the scheduler's limits, estimates and stop times",
    "tests/test_limits.py": "a job finishes within its estimate",
    "tests/test_load_bench.py": "latencies and resident memory of a loaded server",
    "tests/test_multihost.py": "CPU seconds of replicas and workers",
    "tests/test_placement.py": "a worker's CPU seconds against the replica's",
    "tests/test_result_cache_redis.py": "Redis timeouts and the LRU clock",
    "tests/test_serving_trim.py": "this process's resident memory",
    "tests/test_warmup.py": "the warm-up's timings",
    "tests/browser/test_cancel_browser.py": "the server's CPU rate after a tab closes",
    "tests/browser/test_heavy_links.py": "the server's CPU rate and the job limit",
    "tests/browser/test_proxy.py": "two replicas' sessions and cache hits",
    "tests/browser/test_rooms_browser.py": "students follow the teacher within 2 s",
}


def is_serial(item: pytest.Item, root: Path) -> bool:
    """True for a test of the serial part: marker ``serial``, or its file (relative to ``root``) in ``SERIAL_FILES``."""
    relative = Path(item.path).resolve().relative_to(root).as_posix()
    return item.get_closest_marker("serial") is not None or relative in SERIAL_FILES
