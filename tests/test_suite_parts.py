"""scripts/test.sh runs pytest in two parts (tests/conftest.py's --part): the parallel part under pytest-xdist, then
the serial part alone. Together they must be the whole suite, and neither may lose a test to the other."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from suite_parts import LONGEST_FIRST, PARTS, SERIAL_FILES, holds_no_test_of, longest_first

REPO_ROOT = Path(__file__).resolve().parent.parent

# One serial file, one plain engine file, one parallel browser file and one serial browser file.
SAMPLE = [
    "tests/test_limits.py",
    "tests/test_palette.py",
    "tests/browser/test_share_box.py",
    "tests/browser/test_cancel_browser.py",
]


def collected(*args: str, files: list[str] = SAMPLE) -> tuple[set[str], int]:
    """The test ids a part selects from ``files``, and how many tests the files hold in all (pytest's "N/M tests
    collected": M counts the deselected too)."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args, *files],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTEST_ADDOPTS": ""},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    total = re.search(r"(?:\d+/)?(\d+) tests? collected", done.stdout)
    assert total, done.stdout[-3000:]
    return {line for line in done.stdout.splitlines() if "::" in line}, int(total.group(1))


def test_every_serial_file_exists() -> None:
    for path, reason in SERIAL_FILES.items():
        assert (REPO_ROOT / path).is_file(), path
        assert reason, path


def test_the_two_parts_are_disjoint_and_together_the_whole_suite() -> None:
    # One collection per part (each starts a pytest that imports torch: about 5 s): the sample files, and
    # tests/test_benchmarks.py, a file the serial marker splits (its limits calibration, a measured sweep held under
    # the estimate, is serial; the rest parallel). Each part's collection also counts every test of the files.
    files = [*SAMPLE, "tests/test_benchmarks.py"]
    parallel, everything = collected("--part", "parallel", files=files)
    serial, everything_again = collected("--part", "serial", files=files)
    assert parallel and serial and everything == everything_again
    assert not parallel & serial
    assert len(parallel) + len(serial) == everything  # disjoint, so together they are every test of the files
    calibration = (
        "tests/test_benchmarks.py::test_limits_calibration_benchmark_puts_both_estimates_beside_a_measured_sweep"
    )
    whole_files = {test.split("::")[0] for test in serial if test != calibration}
    assert whole_files == {p for p in SAMPLE if p in SERIAL_FILES}
    # The marked test alone goes serial from its file; the file's other tests stay parallel.
    assert calibration in serial
    assert any(test.startswith("tests/test_benchmarks.py::") for test in parallel)


def test_the_check_runs_both_parts() -> None:
    test_sh = (Path(REPO_ROOT) / "scripts" / "test.sh").read_text()
    parallel = 'pytest_part parallel -n "$workers" --dist loadfile --no-loadscope-reorder -p tests.suite_order "$@"'
    assert parallel in " ".join(test_sh.replace("\\\n", " ").split())
    assert 'pytest_part serial "$@"' in test_sh
    requirements = (Path(REPO_ROOT) / "requirements-dev.txt").read_text().splitlines()
    assert any(line.startswith("pytest-xdist==") for line in requirements)


def test_the_longest_files_go_first_then_the_most_tests() -> None:
    def items(path: str, count: int) -> list[SimpleNamespace]:
        return [SimpleNamespace(path=REPO_ROOT / path, name=f"{path}::{i}") for i in range(count)]

    collected_order = [
        *items("tests/test_few.py", 1),
        *items(LONGEST_FIRST[1], 2),
        *items("tests/test_many.py", 5),
        *items(LONGEST_FIRST[0], 3),
        *items("tests/test_some.py", 2),
        *items("tests/test_also_some.py", 2),
    ]
    ordered = longest_first(collected_order, REPO_ROOT)  # type: ignore[arg-type]
    assert sorted(ordered, key=id) == sorted(collected_order, key=id)  # nothing lost, nothing added
    files = [str(Path(item.path).relative_to(REPO_ROOT)) for item in ordered]
    assert list(dict.fromkeys(files)) == [
        LONGEST_FIRST[0],
        LONGEST_FIRST[1],
        "tests/test_many.py",
        "tests/test_some.py",
        "tests/test_also_some.py",
        "tests/test_few.py",
    ]
    # A file's tests keep their order, and stay together.
    assert [item.name for item in ordered[:3]] == [f"{LONGEST_FIRST[0]}::{i}" for i in range(3)]


def test_every_longest_first_file_is_in_the_parallel_part() -> None:
    for path in LONGEST_FIRST:
        assert (REPO_ROOT / path).is_file(), path
        assert path not in SERIAL_FILES, path


def test_a_part_skips_only_the_files_that_hold_none_of_its_tests(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    marked = tmp_path / "tests" / "test_marked.py"
    marked.write_text("import pytest\n\n\n@pytest.mark.serial\ndef test_timed() -> None: ...\n")
    plain = tmp_path / "tests" / "test_plain.py"
    plain.write_text("def test_plain() -> None: ...\n")
    whole = tmp_path / next(iter(SERIAL_FILES))
    whole.parent.mkdir(parents=True, exist_ok=True)
    whole.write_text("def test_timed() -> None: ...\n")
    helper = tmp_path / "tests" / "helpers.py"
    helper.write_text("")
    assert not holds_no_test_of("serial", marked, tmp_path) and not holds_no_test_of("parallel", marked, tmp_path)
    assert holds_no_test_of("serial", plain, tmp_path) and not holds_no_test_of("parallel", plain, tmp_path)
    assert not holds_no_test_of("serial", whole, tmp_path) and holds_no_test_of("parallel", whole, tmp_path)
    assert not any(holds_no_test_of(part, path, tmp_path) for part in PARTS for path in (helper,))
    assert not any(holds_no_test_of("all", path, tmp_path) for path in (marked, plain, whole))
