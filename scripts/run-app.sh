#!/usr/bin/env bash
# Set up .venv on first use (Python >= 3.11, requirements.txt), then start the app on http://localhost:8501.
# Extra arguments go to `streamlit run`, e.g. ./scripts/run-app.sh --server.port 8600
set -euo pipefail
# shellcheck source=scripts/_venv.sh
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"

ensure_venv requirements.txt
cd "$REPO_ROOT"
# Headless: no e-mail prompt on first start and no attempt to open a browser; the URL is printed instead.
export STREAMLIT_SERVER_HEADLESS="${STREAMLIT_SERVER_HEADLESS:-true}"
export STREAMLIT_BROWSER_GATHER_USAGE_STATS="${STREAMLIT_BROWSER_GATHER_USAGE_STATS:-false}"
# No file watcher: it would watch .venv too and flood the log with inotify warnings; restart to reload code.
export STREAMLIT_SERVER_FILE_WATCHER_TYPE="${STREAMLIT_SERVER_FILE_WATCHER_TYPE:-none}"
exec "$VENV/bin/python" -m streamlit run deploy/serve.py "$@"
