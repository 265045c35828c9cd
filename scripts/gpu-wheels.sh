#!/usr/bin/env bash
# Download requirements-gpu-host.txt as wheels for a bare GPU host (CPython 3.12, manylinux x86_64), ready to carry.
# Usage: scripts/gpu-wheels.sh [DIR]   (DIR defaults to the repository's .whl, which git ignores and
#        scripts/gpu-check.sh installs from)
# On the host: python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site DIR/*.whl
#              export PYTHONPATH=/tmp/site
# Fails when a listed package has no wheel, when DIR holds two versions of a package or wheels not on the list
# (either would break that install), or when the wheels come to more than 60 MiB.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LIST="$REPO_ROOT/requirements-gpu-host.txt"
DIR="${1:-$REPO_ROOT/.whl}"
LIMIT_MIB=60

mkdir -p "$DIR"
# The host's pip never sees these files' dependencies (--no-deps): the list names every one itself.
python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any \
    -d "$DIR" -r "$LIST" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)

python3 - "$LIST" "$DIR" "$LIMIT_MIB" <<'EOF'
import re
import sys
from pathlib import Path


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


list_path, wheel_dir, limit_mib = sys.argv[1], Path(sys.argv[2]), float(sys.argv[3])
wanted = {}
for line in Path(list_path).read_text().splitlines():
    line = line.split("#")[0].strip()
    if line:
        name, version = line.split("==")
        wanted[normalise(name)] = version.strip()

found: dict[str, list[tuple[str, Path]]] = {}
for wheel in sorted(wheel_dir.glob("*.whl")):
    name, version = wheel.name.split("-")[:2]
    found.setdefault(normalise(name), []).append((version, wheel))

problems = []
for name, version in wanted.items():
    versions = [v for v, _ in found.get(name, [])]
    if versions != [version]:
        problems.append(f"{name}: want {version}, {wheel_dir} has {versions or 'none'}")
problems += [f"{name}: {wheel_dir} has {[w.name for _, w in wheels]}, not on the list" for name, wheels in
             found.items() if name not in wanted]

total = 0
for name in sorted(found):
    for _, wheel in found[name]:
        size = wheel.stat().st_size
        total += size
        print(f"{size / 2**20:8.2f} MiB  {wheel.name}")
print(f"{total / 2**20:8.2f} MiB  total, {sum(len(w) for w in found.values())} wheels in {wheel_dir}")
if total > limit_mib * 2**20:
    problems.append(f"the wheels come to {total / 2**20:.2f} MiB, over the {limit_mib:g} MiB limit")
if problems:
    print("FAILED:\n  " + "\n  ".join(problems), file=sys.stderr)
    sys.exit(1)
EOF
