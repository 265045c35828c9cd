# Shared by scripts/run-app.sh and scripts/test.sh (sourced, not run).
# ensure_venv REQ_FILE... : create $VENV (default: <repo>/.venv) with Python >= 3.11 and install (uv, else pip) the given
# requirements files. Idempotent: a stamp holding a hash of the files (and the Python version) skips the install when
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

UV_VERSION=0.13.9

# Install requirement arguments (-r FILE ...) with uv, pip-installed into the venv first. uv reads no pip
# configuration, so pip's own settings (index-url, extra-index-url, find-links, constraint, from pip.conf or PIP_*)
# are handed over as uv options, with pip's rule of taking the best match over all indexes. Like pip, it compiles the
# bytecode at install: with PYTHONDONTWRITEBYTECODE set (as on the CI machine) every process would otherwise compile
# torch, Streamlit and pandas from source at each import (a fresh-clone CI run without it was slower in both parts).
# VENV_COMPILE_BYTECODE=0 leaves that to the first import of each module (scripts/test.sh, whose processes may write
# it): compiling all of the 17,900 files at install took 20 s of a 27 s set-up, and the suite imports a small part.
_uv_install() {
    local compile=()
    [ "${VENV_COMPILE_BYTECODE:-1}" = 0 ] || compile=(--compile-bytecode)
    "$VENV/bin/python" -m pip install --disable-pip-version-check --quiet "uv==$UV_VERSION" || return 1
    local options=()
    mapfile -t options < <("$VENV/bin/python" - <<'PY'
import subprocess
import sys

listing = subprocess.run(
    [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, check=False
).stdout
flags = {"index-url": "--index-url", "extra-index-url": "--extra-index-url", "find-links": "--find-links",
         "constraint": "--constraint"}
for line in listing.splitlines():
    name, _, value = line.partition("=")
    flag = flags.get(name.rsplit(".", 1)[-1])
    if flag:
        for item in value.strip().strip("'\"").split():
            print(flag)
            print(item)
PY
    ) || return 1
    "$VENV/bin/uv" pip install --quiet --python "$VENV/bin/python" --index-strategy unsafe-best-match \
        ${compile[@]+"${compile[@]}"} ${options[@]+"${options[@]}"} "$@"
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
    echo "==> installing $* into $VENV (a new environment takes a minute or two)"
    local started=$SECONDS
    # uv installs the same pins as pip, from the same indexes, in a third of the time (76 s -> 26 s for the test
    # requirements on the 2-core reference machine, cold caches); pip is the fallback when uv cannot be had or fails.
    local status=0 log
    log="$(mktemp)"
    if _uv_install "${args[@]}" >"$log" 2>&1; then
        echo "==> installed with uv $UV_VERSION"
    else
        echo "==> uv did not install them (its last lines below); installing with pip"
        tail -n 5 "$log"
        # No pipe here: its exit status would depend on the caller's pipefail setting.
        "$VENV/bin/python" -m pip install --disable-pip-version-check --quiet "${args[@]}" >"$log" 2>&1 || status=$?
        # Drop pip's "Location 'file:///...' is ignored" noise from local index mirrors; keep every other line.
        grep -v "^WARNING: Location 'file:.*is ignored" "$log" || true
    fi
    rm -f "$log"
    if [ "$status" -ne 0 ]; then
        echo "error: pip install failed (exit $status)" >&2
        return "$status"
    fi
    echo "$wanted" >"$stamp"
    echo "==> installed in $((SECONDS - started)) s"
}
