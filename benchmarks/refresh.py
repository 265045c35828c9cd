"""Regenerate the CPU tables that README.md and docs/ quote, and stamp each with where it came from.

    python -m benchmarks.refresh                     # every table below, in order (nice -n 19 on a shared machine)
    python -m benchmarks.refresh --only accuracy method_times   # some of them
    python -m benchmarks.refresh --list              # the tables, their commands, whether they list every method
    python -m benchmarks.refresh --stale             # only the tables made by another engine version

Each table's benchmark runs as its own process, writing into benchmarks/results/. Its .json then gets a
``provenance`` entry and its .md a last line: the commit, the engine version (``engine_version()``: a hash of
core/'s Python files, so any engine change makes the tables stale), the device, the threads and the temperature
the benchmark uses. ``refresh.json`` keeps how long each table took. The GPU tables (gpu_check_*, *_cuda) are made
on a GPU host by scripts/gpu-check.sh and are not refreshed here. tests/test_readme.py fails when the README or a
doc names a CPU table of another engine version, or quotes a number its table does not hold.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
STAMP_PREFIX = "_Refreshed by `python -m benchmarks.refresh"


@dataclass(frozen=True)
class Table:
    name: str  # --only NAME
    command: tuple[str, ...]  # python -m ...
    files: tuple[str, ...]  # what it writes under benchmarks/results/; the first .json carries the provenance
    temperature: str  # the temperature its inputs use, said in words
    lists: str  # what the table has a row for beyond its own choice: rerun it after adding one of those

    @property
    def module(self) -> str:
        return self.command[1]


TABLES: tuple[Table, ...] = (
    Table(
        "accuracy",
        ("-m", "benchmarks.accuracy"),
        ("accuracy.json", "accuracy.csv"),
        "beta = 1, 4 and 16 (each row says its beta)",
        "every method",
    ),
    Table(
        "method_times",
        ("-m", "benchmarks.method_times"),
        ("method_times_cpu.json",),
        "beta = 3 (tau 0.33)",
        "every method",
    ),
    Table(
        "interactive",
        ("-m", "benchmarks.interactive", "--threads", "2"),
        ("interactive_cpu_2t.json",),
        "tau 0.2 (beta 5), the Compare page's default (ui.sidebar)",
        "every efficient method (its 'all' row)",
    ),
    Table(
        "causal",
        ("-m", "benchmarks.causal"),
        ("causal.json", "causal.md"),
        "beta = 1/sqrt(d) = 0.125, the engine's default scale (flat rows)",
        "every causal method",
    ),
    Table(
        "precision",
        ("-m", "benchmarks.precision"),
        ("precision_cpu.json", "precision_cpu.md"),
        "tau 0.3 (beta 3.33)",
        "every method",
    ),
    Table(
        "memory_model",
        ("-m", "benchmarks.memory_model"),
        ("memory_model_cpu.json", "memory_model_cpu.md"),
        "beta = 3.33 (tau 0.3)",
        "every method",
    ),
    Table(
        "hashing",
        ("-m", "benchmarks.hashing"),
        ("hashing.json", "hashing.md"),
        "beta = 1, 4 and 16 on clustered inputs; 1/sqrt(d) on offset keys; 1 on real heads (each row says)",
        "",
    ),
    Table(
        "claims",
        ("-m", "core.claims"),
        ("claims.json", "claims.md"),
        "each claim's own (its row says)",
        "",
    ),
    Table(
        "scaling_2t",
        ("-m", "benchmarks.suite", "--threads", "2"),
        ("scaling_cpu_2t.json", "scaling_cpu_2t.md", "scaling_cpu_2t.csv"),
        "tau 0.3 (beta 3.33)",
        "every method",
    ),
    Table(
        "scaling_1t",
        ("-m", "benchmarks.suite", "--threads", "1", "--clock", "cpu"),
        ("scaling_cpu_1t.json", "scaling_cpu_1t.md", "scaling_cpu_1t.csv"),
        "tau 0.3 (beta 3.33)",
        "every method",
    ),
    Table(
        "limits_calibration",
        ("-m", "benchmarks.limits_calibration"),
        ("limits_calibration_cpu.json", "limits_calibration_cpu.md"),
        "the sweeps' own temperature grids (each row says)",
        "",
    ),
    Table(
        "chunking",
        ("-m", "benchmarks.chunking"),
        ("chunking_cpu.json", "chunking_cpu.md"),
        "tau from 0.03 to 3 (a sweep)",
        "",
    ),
    Table(
        "first_visit",
        ("-m", "benchmarks.first_visit"),
        ("first_visit.json", "first_visit.md"),
        "each page's default",
        "every page",
    ),
    Table(
        "first_visit_cold",
        ("-m", "benchmarks.first_visit", "--cold", "--name", "first_visit_cold"),
        ("first_visit_cold.json", "first_visit_cold.md"),
        "each page's default",
        "every page",
    ),
    Table(
        "load",
        ("-m", "benchmarks.load"),
        ("load_cpu.json", "load_cpu.md", "load_cpu.csv"),
        "the linked pages' defaults",
        "",
    ),
    Table(
        "load_cluster",
        ("-m", "benchmarks.load_cluster"),
        ("load_cluster.json", "load_cluster.md"),
        "the linked pages' defaults",
        "",
    ),
    Table(
        "rooms",
        ("-m", "benchmarks.rooms"),
        ("rooms.json", "rooms.md"),
        "Compare at tau 0.05 and 1 (the teacher's moves)",
        "",
    ),
    Table(
        "class_wave",
        ("-m", "benchmarks.class_wave", "--baseline", "df19186", "--rounds", "6"),
        ("class_wave.json", "class_wave.md"),
        "Compare's default",
        "",
    ),
    Table(
        "visit_cpu",
        ("-m", "benchmarks.visit_cpu"),
        ("visit_cpu.json", "visit_cpu.md"),
        "each page's default",
        "every page",
    ),
)
BY_NAME = {table.name: table for table in TABLES}


def engine_version(root: Path = ROOT) -> str:
    """A hash of the engine's source (core/**/*.py, paths and bytes): any change to the engine changes it."""
    digest = hashlib.sha256()
    for path in sorted((root / "core").rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return "core-" + digest.hexdigest()[:12]


def table_of(file_name: str) -> Table | None:
    """The catalogue entry that writes ``file_name`` (a name under benchmarks/results/)."""
    return next((t for t in TABLES if file_name in t.files), None)


def provenance(file_name: str) -> dict[str, Any] | None:
    """The provenance stamped on the table that holds ``file_name`` (from its .json), or None if it has none."""
    table = table_of(file_name)
    stamped = next((f for f in table.files if f.endswith(".json")), None) if table else None
    if stamped is None or not (RESULTS / stamped).exists():
        return None
    data = json.loads((RESULTS / stamped).read_text())
    return data.get("provenance") if isinstance(data, dict) else None


def _commit() -> tuple[str, bool]:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()

    head = git("rev-parse", "--short=12", "HEAD") or "unknown"
    dirty = bool(git("status", "--porcelain", "--", "core"))
    return head, dirty


def stamp(table: Table, seconds: float, started: str, load: list[float] | None = None) -> dict[str, Any]:
    """Write the provenance into the table's .json files and as the last line of its .md files (``load``: the load
    average at the run's end, when stamping again later)."""
    import torch

    head, dirty = _commit()
    info = {
        "engine_version": engine_version(),
        "commit": head + (" with uncommitted engine changes" if dirty else ""),
        "device": "cpu",
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "temperature": table.temperature,
        "command": "python " + " ".join(table.command),
        "refreshed_utc": started,
        "seconds": round(seconds, 1),
        "load_average_at_end": load or [round(x, 2) for x in os.getloadavg()],
    }
    for name in table.files:
        path = RESULTS / name
        if name.endswith(".json") and path.exists():
            data = json.loads(path.read_text())
            if isinstance(data, dict):
                data["provenance"] = info
                path.write_text(json.dumps(data, indent=2, default=str) + "\n")
        elif name.endswith(".md") and path.exists():
            lines = [line for line in path.read_text().rstrip("\n").split("\n") if not line.startswith(STAMP_PREFIX)]
            lines += [
                "",
                f"{STAMP_PREFIX} --only {table.name}` on {started}: commit {info['commit']}, engine version "
                f"{info['engine_version']}, device cpu ({os.cpu_count()} cores), temperature {table.temperature}, "
                f"{seconds:.0f} s._",
            ]
            path.write_text("\n".join(re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).split("\n")) + "\n")
    return info


def refresh(table: Table) -> dict[str, Any]:
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"==> {table.name}: python {' '.join(table.command)}", flush=True)
    begun = time.perf_counter()
    done = subprocess.run([sys.executable, *table.command], cwd=ROOT)
    seconds = time.perf_counter() - begun
    if done.returncode != 0:
        print(f"    {table.name}: failed with code {done.returncode} after {seconds:.0f} s", flush=True)
        return {"status": f"failed ({done.returncode})", "seconds": round(seconds, 1), "started_utc": started}
    info = stamp(table, seconds, started)
    print(f"    {table.name}: {seconds:.0f} s", flush=True)
    return {"status": "ok", "seconds": round(seconds, 1), "started_utc": started, **info}


def listing() -> str:
    """Each table: its command, files, what it lists, and how long its last refresh took (refresh.json)."""
    log_path = RESULTS / "refresh.json"
    log = json.loads(log_path.read_text()) if log_path.exists() else {}
    lines = []
    for t in TABLES:
        took = f"{log[t.name]['seconds']:.0f} s on {log[t.name]['started_utc']}" if t.name in log else "not timed yet"
        note = f"; has a row for {t.lists}: rerun after adding one" if t.lists else ""
        lines.append(f"{t.name}: python {' '.join(t.command)} -> {', '.join(t.files)} (last: {took}{note})")
    timed = [log[t.name]["seconds"] for t in TABLES if t.name in log]
    if len(timed) == len(TABLES):
        total = sum(timed)
        lines.append(f"the last times add up to {total:.0f} s ({total / 60:.1f} min) for all {len(TABLES)} tables")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", metavar="NAME", help=f"some tables: {', '.join(BY_NAME)}")
    parser.add_argument("--stale", action="store_true", help="only the tables made by another engine version")
    parser.add_argument("--list", action="store_true", help="list the tables and exit")
    parser.add_argument(
        "--restamp",
        action="store_true",
        help="rewrite the chosen tables' provenance from refresh.json without running them (same engine only)",
    )
    args = parser.parse_args(argv)
    if args.list:
        print(listing())
        return 0
    unknown = sorted(set(args.only or ()) - set(BY_NAME))
    if unknown:
        parser.error(f"unknown tables {unknown}; choose from {', '.join(BY_NAME)}")
    chosen = [BY_NAME[n] for n in args.only] if args.only else list(TABLES)
    if args.stale:
        version = engine_version()
        chosen = [t for t in chosen if (provenance(t.files[0]) or {}).get("engine_version") != version]
    log_path = RESULTS / "refresh.json"
    log = json.loads(log_path.read_text()) if log_path.exists() else {}
    if args.restamp:
        for table in chosen:
            entry = log.get(table.name, {})
            if entry.get("engine_version") != engine_version():
                parser.error(f"{table.name}: its last run was not with today's engine; run it instead")
            info = stamp(table, entry["seconds"], entry["started_utc"], entry.get("load_average_at_end"))
            log[table.name] = {**entry, **info}
        log_path.write_text(json.dumps(log, indent=2) + "\n")
        return 0
    failed = 0
    for table in chosen:
        entry = refresh(table)
        failed += entry["status"] != "ok"
        log = json.loads(log_path.read_text()) if log_path.exists() else {}  # another refresh may have written it
        log[table.name] = entry
        log_path.write_text(json.dumps(log, indent=2) + "\n")
    total = sum(log[t.name]["seconds"] for t in chosen)
    print(f"refreshed {len(chosen) - failed} of {len(chosen)} tables in {total:.0f} s; times in {log_path}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
