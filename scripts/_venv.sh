# Shared by scripts/run-app.sh and scripts/test.sh (sourced, not run).
# ensure_venv REQ_FILE... : create $VENV (default: <repo>/.venv) with Python >= 3.11 and pip-install the given
# requirements files. Idempotent: a stamp holding a hash of the files (and the Python version) skips pip when
# nothing changed, so a second run starts in about a second.

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$REPO_ROOT/.venv}"

_python_ok() {
    "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' >/dev/null 2>&1
}

# Prefer python3.11 (the version every pin was checked on), else any python3 >= 3.11. $PYTHON overrides.
_pick_python() {
    local candidate
    for candidate in "${PYTHON:-}" python3.11 python3 python; do
        [ -n "$candidate" ] || continue
        if command -v "$candidate" >/dev/null 2>&1 && _python_ok "$candidate"; then
            echo "$candidate"
            return 0
        fi
    done
    echo "error: Python >= 3.11 is required (tried \$PYTHON, python3.11, python3, python)." >&2
    return 1
}

_requirements_hash() {
    # Hash with the venv's own Python: sha256sum is not on every platform (macOS has shasum).
    (cd "$REPO_ROOT" && "$VENV/bin/python" - "$@" <<'PY'
import hashlib
import sys

digest = hashlib.sha256(sys.version.encode())
for name in sys.argv[1:]:
    digest.update(name.encode())
    with open(name, "rb") as handle:
        digest.update(handle.read())
print(digest.hexdigest())
PY
    )
}

ensure_venv() {
    if ! { [ -x "$VENV/bin/python" ] && _python_ok "$VENV/bin/python"; }; then
        local python
        python="$(_pick_python)" || return 1
        echo "==> creating $VENV with $python ($("$python" --version 2>&1))"
        rm -rf "$VENV"
        "$python" -m venv "$VENV" || {
            echo "error: '$python -m venv' failed (on Debian/Ubuntu: apt-get install python3-venv)." >&2
            return 1
        }
    fi

    local stamp_name stamp wanted
    stamp_name="$(printf '%s+' "$@" | tr '/' '_')"
    stamp="$VENV/.installed-${stamp_name%+}"
    wanted="$(_requirements_hash "$@")" || return 1
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$wanted" ]; then
        return 0
    fi

    local args=() file
    for file in "$@"; do
        args+=(-r "$REPO_ROOT/$file")
    done
    echo "==> installing $* into $VENV (a new environment takes a few minutes)"
    local started=$SECONDS
    # No pipe here: its exit status would depend on the caller's pipefail setting.
    local status=0 log
    log="$(mktemp)"
    "$VENV/bin/python" -m pip install --disable-pip-version-check --quiet "${args[@]}" >"$log" 2>&1 || status=$?
    # Drop pip's "Location 'file:///...' is ignored" noise from local index mirrors; keep every other line.
    grep -v "^WARNING: Location 'file:.*is ignored" "$log" || true
    rm -f "$log"
    if [ "$status" -ne 0 ]; then
        echo "error: pip install failed (exit $status)" >&2
        return "$status"
    fi
    echo "$wanted" >"$stamp"
    echo "==> installed in $((SECONDS - started)) s"
}
