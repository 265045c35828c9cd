#!/usr/bin/env bash
# The GPU check in one command, for a bare GPU host (its own Python and torch, no network):
#   scripts/gpu-check.sh OUT [--dry-run] [--budget SECONDS] [--steps ...] [--limits step=seconds,...]
# Run from anywhere; it works in the repository root. Where Streamlit is missing, the wheels carried in .whl/
# (scripts/gpu-wheels.sh makes them here) are installed into a scratch folder first. --dry-run rehearses every step on the CPU at small sizes; --budget plans the steps to fit a lent machine's
# time (each step in its own process, stopped at its limit) and the tables say what each step reached.
set -euo pipefail

if [ $# -lt 1 ] || [ "${1#-}" != "$1" ]; then
    echo "usage: scripts/gpu-check.sh OUT [--dry-run] [--budget SECONDS] [--steps facts,scaling,tests,compare,cluster,pages,memory,precision]" >&2
    exit 2
fi
out="$(mkdir -p "$1" && cd "$1" && pwd)"
shift
cd "$(dirname "${BASH_SOURCE[0]}")/.."

python="${PYTHON:-python3}"
if [ -x .venv/bin/python ] && [ -z "${PYTHON:-}" ]; then
    python=.venv/bin/python
fi
# Only where the app's packages are missing (a bare host): a developer's .venv already has them.
if compgen -G ".whl/*.whl" >/dev/null && ! "$python" -c "import streamlit, plotly, pydantic_settings" 2>/dev/null; then
    site="${GPU_CHECK_SITE:-/tmp/gpu-check-site}"
    echo "==> installing $(ls .whl/*.whl | wc -l) carried wheels into $site"
    "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" .whl/*.whl
    export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
    # The wheels went in without their dependencies: name any clash with the host's own packages (not fatal).
    "$python" -m pip check || echo "warning: pip check found version clashes (above); the check goes on"
fi

# The app's own settings for a check: a scratch result cache, nothing computed ahead or in the background.
ATTN_EXPLORER_CACHE_DIR="$(mktemp -d)"
export ATTN_EXPLORER_CACHE_DIR ATTN_EXPLORER_PREFETCH=0 ATTN_EXPLORER_TRIM=0 ATTN_EXPLORER_WARMUP=0
export PYTHONUNBUFFERED=1
trap 'rm -rf "$ATTN_EXPLORER_CACHE_DIR"' EXIT

"$python" -m benchmarks.gpu "$out" "$@" 2>&1 | tee "$out/gpu_check.log"
