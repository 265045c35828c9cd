"""The suite's two parts (tests/conftest.py's --part option): scripts/test.sh runs the parallel part on pytest-xdist
workers, then the serial part alone. Serial are the tests that must have the machine to themselves: they time work
against a bound, count CPU seconds or resident memory, or drive Chromium against a server whose CPU or stop time they
measure. Mark a new one ``@pytest.mark.serial`` or add its file here."""

from __future__ import annotations

from pathlib import Path

import pytest

# The GPU check's dry run (tests/test_gpu_check.py) runs in the parallel part: its own watchdog holds every step to
# its share of the budget, and the test checks only what a loaded machine leaves it (the first steps' status, the
# rest as far as they got); the one test that times a stop in flight is marked serial.
# Browser tests run in the parallel part (each xdist worker has its own app server and Chromium) except the ones
# that measure their server's CPU or stop time. tests/browser/test_proxy.py (two replicas behind nginx) times nothing:
# it checks where requests went and the shared cache's hit and miss counts, so it runs in the parallel part.
PARTS = ("all", "parallel", "serial")
SERIAL_FILES = {
    "tests/test_cancel.py": "a cancelled job stops within a bound",
    "tests/test_cluster.py": "a stopped worker stops within a bound",
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
    "tests/browser/test_rooms_browser.py": "students follow the teacher within 2 s",
}


# The parallel part's longest files, longest first (docs/development.md, "Where CI's time goes"). scripts/test.sh
# hands pytest-xdist these first (tests/suite_order.py): `--dist loadfile` gives a worker whole files in queue order,
# and pytest-xdist's own order (most tests first) put files of few but long tests last, where one worker ran them
# while the other had nothing left to take.
LONGEST_FIRST = (
    "tests/browser/test_app_pages.py",
    "tests/browser/test_readable.py",
    "tests/browser/test_presenter_lessons.py",
    "tests/browser/test_fragments.py",
    "tests/browser/test_presenter.py",
    "tests/test_gpu_check.py",
    "tests/browser/test_proxy.py",
    "tests/browser/test_lessons_browser.py",
)


def longest_first(items: list[pytest.Item], root: Path) -> list[pytest.Item]:
    """``items`` file by file: the files of ``LONGEST_FIRST`` in its order, then the others by their number of tests,
    most first (pytest-xdist's own order), ties in collection order. A file's tests keep their order."""
    by_file: dict[str, list[pytest.Item]] = {}
    for item in items:
        by_file.setdefault(Path(item.path).resolve().relative_to(root).as_posix(), []).append(item)
    rank = {path: index for index, path in enumerate(LONGEST_FIRST)}
    files = sorted(by_file, key=lambda path: (rank.get(path, len(rank)), -len(by_file[path])))
    return [item for path in files for item in by_file[path]]


def is_serial(item: pytest.Item, root: Path) -> bool:
    """True for a test of the serial part: marker ``serial``, or its file (relative to ``root``) in ``SERIAL_FILES``."""
    relative = Path(item.path).resolve().relative_to(root).as_posix()
    return item.get_closest_marker("serial") is not None or relative in SERIAL_FILES


def holds_no_test_of(part: str, path: Path, root: Path) -> bool:
    """True when the test file ``path`` can hold no test of ``part``, so the part need not import it: a file of
    ``SERIAL_FILES`` holds only serial tests, and a file that never writes the serial marker only parallel ones (the
    marker is written in the file, as ``@pytest.mark.serial`` or ``pytestmark``; no conftest adds it)."""
    if part == "all" or path.suffix != ".py" or not path.name.startswith("test_"):
        return False
    whole_file_serial = path.resolve().relative_to(root).as_posix() in SERIAL_FILES
    if part == "parallel":
        return whole_file_serial
    return not whole_file_serial and "mark.serial" not in path.read_text(encoding="utf-8")
