#!/usr/bin/env bash
# Set up .venv on first use (requirements.txt + requirements-dev.txt), then run every check:
# ruff lint, ruff format check, mypy on core/, service/ and ui/, the import contracts (lint-imports), and the whole
# pytest suite (browser tests included).
# Extra arguments go to pytest, e.g. ./scripts/test.sh -k budget -x
# Exits non-zero when any step fails; every step runs either way so one report shows all failures.
set -euo pipefail
# shellcheck source=scripts/_venv.sh
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"

ensure_venv requirements.txt requirements-dev.txt requirements-bench.txt
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
run_step "mypy" mypy core service ui
run_step "import contracts" lint-imports
run_step "pytest" python -m pytest "$@"

if [ ${#failed[@]} -gt 0 ]; then
    echo "==> FAILED: ${failed[*]}"
    exit 1
fi
echo "==> all checks passed"
