"""Scaling results as plot-ready series: live measurements (core.profiling.scaling_run) and committed benchmark
tables (benchmarks/results/scaling_*.json), each with its fitted log-log slope."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core import registry
from core.profiling import ScalingPoint, loglog_slope

MIB = 2**20


@dataclass
class Series:
    """One method's curve: sizes, times (s), peak memory (MiB) and the models beside them (nan when none)."""

    method: str
    label: str
    ns: list[int]
    seconds: list[float]
    peak_mib: list[float]
    model_seconds: list[float] = field(default_factory=list)
    model_mib: list[float] = field(default_factory=list)
    slope: float = math.nan
    model_slope: float = math.nan
    committed: bool = False
    source: str = ""  # the committed table it comes from ("" for live measurements)


def measured_series(points: Iterable[ScalingPoint], methods: Sequence[str], gemm_flops: float) -> list[Series]:
    """The sizes each method ran ("ok"), in the order of ``methods``; the FLOP model is timed at ``gemm_flops``."""
    out = []
    rows = [p for p in points if p.status == "ok"]
    for method in methods:
        mine = sorted((p for p in rows if p.method == method), key=lambda p: p.n)
        if not mine:
            continue
        ns = [p.n for p in mine]
        seconds = [p.seconds for p in mine]
        out.append(
            Series(
                method=method,
                label=registry.get(method).label,
                ns=ns,
                seconds=seconds,
                peak_mib=[p.peak_bytes / MIB if p.peak_bytes > 0 else math.nan for p in mine],
                model_seconds=[p.model_flops / gemm_flops for p in mine],
                model_mib=[p.model_bytes / MIB for p in mine],
                slope=loglog_slope(ns, seconds),
                model_slope=loglog_slope(ns, [p.model_flops for p in mine]),
            )
        )
    return out


def stops(points: Iterable[ScalingPoint]) -> list[ScalingPoint]:
    """Points where a method stopped at a limit (not the sizes skipped after an earlier stop)."""
    return [p for p in points if p.status != "ok" and "earlier size" not in p.status]


def params_text(params: dict[str, Any]) -> str:
    """A method's parameters on one line, for the measurements table."""
    return ", ".join(f"{k}={v}" for k, v in params.items())


def slopes_table(series: Iterable[Series]) -> list[dict[str, Any]]:
    return [
        {
            "method": s.label,
            "measured slope": s.slope,
            "model slope (FLOPs)": s.model_slope,
            "largest n": int(max(s.ns)),
        }
        for s in series
        if not s.committed
    ]


def load_committed(results_dir: Path) -> dict[str, dict[str, Any]]:
    """Benchmark result files ``scaling_*.json`` by a label naming their device (unreadable files skipped)."""
    out = {}
    for path in sorted(results_dir.glob("scaling_*.json")):
        try:
            payload = json.loads(path.read_text())
            machine = payload["machine"]
            label = f"{machine['device']}: {machine.get('device_name', '?')} ({machine.get('threads', '?')} threads)"
            out[label] = payload
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return out


def default_committed(committed: dict[str, dict[str, Any]], device_type: str, threads: int) -> list[str]:
    """The committed table a page opens on before anything is measured, so its first screen has a picture: one
    measured on this kind of device, with this thread count where there is one; none for a device without."""
    same = [label for label, table in committed.items() if table["machine"]["device"] == device_type]
    best = [label for label in same if committed[label]["machine"].get("threads") == threads]
    return (best or same)[:1]


def committed_series(payload: dict[str, Any], methods: Sequence[str]) -> list[Series]:
    """A committed table's rows for ``methods`` (and torch SDPA), one series per entry, named with the device and
    thread count (two tables from one machine differ only in threads)."""
    rows = [r for r in payload["rows"] if r["status"] == "ok" and (r["entry"] in methods or r["entry"] == "sdpa")]
    machine = payload["machine"]
    where = f"{machine['device']}: {machine.get('device_name', '')}, {machine.get('threads', '?')} threads"
    out = []
    for entry in dict.fromkeys(r["entry"] for r in rows):
        mine = sorted((r["n"], r["time_s"], r["peak_mib"]) for r in rows if r["entry"] == entry)
        ns = [m[0] for m in mine]
        seconds = [m[1] for m in mine]
        out.append(
            Series(
                method=entry,
                label=f"{entry} [{where}]",
                ns=ns,
                seconds=seconds,
                peak_mib=[m[2] for m in mine],
                slope=loglog_slope(ns, seconds),
                committed=True,
                source=where,
            )
        )
    return out


def fit_server_limits(
    point_s: float, total_s: float, memory_mib: float, job_s: float, server_mib: float
) -> tuple[float, float, float, list[str]]:
    """The run's limits lowered to the server's, with a notice for each one lowered.

    A size may run about 3 calls of up to ``point_s`` after the total check, so the whole plan
    (total_s + 3 point_s) must fit the job limit ``job_s``, and the memory knob the server's limit.
    """
    notices = []
    if 4 * point_s > job_s:
        notices.append(f"**Time per size**: {point_s:g} s is over this server's job limit; using {job_s / 4:g} s.")
        point_s = job_s / 4
    if total_s + 3 * point_s > job_s:
        fitted = job_s - 3 * point_s
        notices.append(f"**Total time**: {total_s:g} s is over this server's job limit; using {fitted:g} s.")
        total_s = fitted
    if memory_mib > server_mib:
        notices.append(f"**Memory**: {memory_mib:g} MiB is over this server's limit; using {server_mib:.0f} MiB.")
        memory_mib = server_mib
    return point_s, total_s, memory_mib, notices
