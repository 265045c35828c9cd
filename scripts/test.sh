#!/usr/bin/env bash
# Set up .venv on first use (requirements.txt + requirements-dev.txt), then run every check:
# ruff lint, ruff format check, mypy on core/, service/ and ui/ (beside pytest's parallel part), the import contracts
# (lint-imports), and the whole pytest suite (browser tests included) in two parts.
# Extra arguments go to pytest, e.g. ./scripts/test.sh -k budget -x
# Exits non-zero when any step fails; every step runs either way so one report shows all failures.
set -euo pipefail
# shellcheck source=scripts/_venv.sh
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"

# Bytecode is written by the first process that imports a module (the workers, servers and subprocesses of the suite
# share it), not compiled for every installed file at set-up; a PYTHONDONTWRITEBYTECODE from the machine would make
# every process compile torch, Streamlit and pandas from source again.
unset PYTHONDONTWRITEBYTECODE
VENV_COMPILE_BYTECODE=0 ensure_venv requirements.txt requirements-dev.txt requirements-bench.txt
cd "$REPO_ROOT"
export PATH="$VENV/bin:$PATH"
export STREAMLIT_BROWSER_GATHER_USAGE_STATS=false

failed=()
run_step() {
    local name=$1 started=$SECONDS
    shift
    echo "==> $name: $*"
    if "$@"; then
        echo "==> $name passed ($((SECONDS - started)) s)"
    else
        echo "==> $name FAILED ($((SECONDS - started)) s)"
        failed+=("$name")
    fi
}

run_step "ruff check" ruff check .
run_step "ruff format" ruff format --check .
# mypy (about 45 s of one core on a fresh clone, no cache) runs beside the parallel part of pytest below and reports
# after it: the two workers leave room for it, and the check's wall time is shorter by most of mypy's own.
mypy_log="$(mktemp)"
mypy_started=$SECONDS
mypy core service ui >"$mypy_log" 2>&1 &
mypy_pid=$!
mypy_report() {
    echo "==> mypy: mypy core service ui (ran beside the parallel part)"
    cat "$mypy_log"
    rm -f "$mypy_log"
    if wait "$mypy_pid"; then
        echo "==> mypy passed ($((SECONDS - mypy_started)) s)"
    else
        echo "==> mypy FAILED ($((SECONDS - mypy_started)) s)"
        failed+=("mypy")
    fi
}
run_step "import contracts" lint-imports
# pytest in two parts (tests/conftest.py, --part): first the tests that may share the machine, on PYTEST_WORKERS
# pytest-xdist workers (default 2, one per core; each worker takes whole files, so a file's module fixtures start once;
# the longest files first, tests/suite_order.py),
# then, alone, the ones that time work or count CPU and memory (SERIAL_FILES in tests/conftest.py, marker serial).
# PYTEST_WORKERS=0 runs the whole suite in one serial pytest. Given extra arguments, a part that selects no test
# (pytest's exit status 5) passes.
pytest_part() {
    local part=$1 status=0
    shift
    python -m pytest --part "$part" "$@" || status=$?
    if [ "$status" -eq 5 ] && [ "$PYTEST_EXTRA_ARGS" -gt 0 ]; then
        echo "==> no test of the $part part among the arguments"
        return 0
    fi
    return "$status"
}
PYTEST_EXTRA_ARGS=$#
workers="${PYTEST_WORKERS:-2}"
if [ "$workers" = 0 ]; then
    mypy_report
    run_step "pytest" python -m pytest "$@"
else
    run_step "pytest, parallel part" pytest_part parallel -n "$workers" --dist loadfile --no-loadscope-reorder \
        -p tests.suite_order "$@"
    mypy_report
    run_step "pytest, serial part" pytest_part serial "$@"
fi

if [ ${#failed[@]} -gt 0 ]; then
    echo "==> FAILED: ${failed[*]}"
    exit 1
fi
echo "==> all checks passed"
