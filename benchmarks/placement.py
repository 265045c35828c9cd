"""A light call through a worker on loopback against the same call in this process (issue 41: at most 20 ms more).

    python -m benchmarks.placement [--calls 30] [--out benchmarks/results] [--baseline REF]

Starts deploy/loopback.py's Redis, Dask scheduler and one worker started with ``--resources GPU=1`` (on a host
without CUDA it computes on its CPU), then times ``service.placement.compute`` of the same light views, uncached,
alternately with the worker's device (``cpu@worker``: sent to the worker, the result back as the result cache's
parts, its JSON and arrays) and this process's (``cpu``), each ``--calls`` times after one warm-up call. Both sides
compute with the same number of torch threads. Reports the medians side by side, their difference, the median of
paired differences, and the difference outside the engine's own measured time (the hop alone);
writes placement.{md,json}. With ``--baseline REF`` the same benchmark first runs in a temporary worktree of REF
(its own loopback cluster, workers started from that tree), and the table sets its figures beside today's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from benchmarks.harness import RESULTS_DIR, baseline_tree, commit, machine_facts, write_results
from core import config
from core import device as core_device
from service import dask_client, placement, result_cache, views
from service.host import usable_cpus

ROOT = Path(__file__).resolve().parent.parent
TARGET_MS = 20.0


def light_views() -> list[tuple[str, Any]]:
    """(label, view on the worker's device) for a tiny call (the overhead alone) and Compare's default input."""
    tiny = views.InputSpec("clustered", 64, 16, 1, 4, 0.1, 3)
    default = views.InputSpec("clustered", 512, 64, 4, 32, 0.1, 0)
    return [
        ("exact attention, n = 64, 1 head", views.ExactAttention(tiny, 5.0, "cpu@worker")),
        ("exact attention, n = 512, 4 heads", views.ExactAttention(default, 5.0, "cpu@worker")),
        ("performer, n = 512, 4 heads", views.MethodRun.of(default, 5.0, "cpu@worker", "performer", {}, 0)),
    ]


def timed(view: Any) -> tuple[float, float]:
    """(the call's seconds, those of them outside the engine's own measured time: the result's ``seconds``)."""
    start = time.perf_counter()
    result = placement.compute(view)
    took = time.perf_counter() - start
    return took, took - float(result.seconds)


def _baseline(ref: str, calls: int) -> dict[str, Any]:
    """This benchmark's result at ``ref``, run in a temporary worktree of it (its workers start from that tree)."""
    with baseline_tree(ref) as tree, tempfile.TemporaryDirectory() as out:
        env = {**os.environ, "PYTHONPATH": str(tree)}
        env.pop(config.variable("scheduler"), None)
        command = [sys.executable, "-m", "benchmarks.placement", "--calls", str(calls), "--out", out]
        subprocess.run(command, cwd=tree, env=env, check=True)
        return dict(json.loads((Path(out) / "placement.json").read_text()))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=30, help="timed calls per side and view (default 30)")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR, help="output folder (default benchmarks/results)")
    parser.add_argument("--baseline", help="git ref measured first the same way, e.g. main; shown beside today's")
    args = parser.parse_args(argv)
    from deploy.loopback import loopback_deployment

    load_start = os.getloadavg()
    before = _baseline(args.baseline, args.calls) if args.baseline else None
    threads = usable_cpus()  # what deploy/loopback.py gives its one worker
    torch.set_num_threads(threads)
    rows: list[dict[str, Any]] = []
    with loopback_deployment(workers=0, gpu_workers=1, web=False) as cluster:
        os.environ[config.variable("scheduler")] = cluster.scheduler_address
        try:
            worker = placement.worker_devices()[0]
            for label, remote_view in light_views():
                local_view = remote_view.replace(device="cpu")
                assert placement.where(remote_view).remote and not placement.where(local_view).remote
                timed(remote_view), timed(local_view)  # warm-up: inputs in each side's memory layer
                remote_calls: list[tuple[float, float]] = []
                local_calls: list[tuple[float, float]] = []
                for _ in range(args.calls):
                    remote_calls.append(timed(remote_view))
                    local_calls.append(timed(local_view))
                remote_s, local_s = [c[0] for c in remote_calls], [c[0] for c in local_calls]
                remote_ms, local_ms = statistics.median(remote_s) * 1e3, statistics.median(local_s) * 1e3
                # Outside the engine: a busy machine slows each side's engine differently; this leaves it out.
                remote_out, local_out = (
                    statistics.median(c[1] for c in calls) * 1e3 for calls in (remote_calls, local_calls)
                )
                rows.append(
                    {
                        "call": label,
                        "in_process_ms": round(local_ms, 2),
                        "through_worker_ms": round(remote_ms, 2),
                        "extra_ms": round(remote_ms - local_ms, 2),
                        # each worker call minus the in-process call right after it: less swayed by a busy machine
                        "paired_extra_ms": round(statistics.median(map(float.__sub__, remote_s, local_s)) * 1e3, 2),
                        "outside_engine_in_process_ms": round(local_out, 2),
                        "outside_engine_through_worker_ms": round(remote_out, 2),
                        "extra_outside_engine_ms": round(remote_out - local_out, 2),
                        "in_process_all_ms": [round(s * 1e3, 2) for s in local_s],
                        "through_worker_all_ms": [round(s * 1e3, 2) for s in remote_s],
                    }
                )
        finally:
            runner = dask_client.runner()
            os.environ.pop(config.variable("scheduler"), None)
            if runner is not None:
                runner.close()
    lines = [
        "# A light call through a worker on loopback vs in this process",
        "",
        f"`python -m benchmarks.placement --calls {args.calls}` at commit {commit(ROOT)}, engine "
        f"{result_cache.ENGINE_VERSION}; device {core_device.describe(torch.device('cpu'))} on both sides "
        f"(worker {worker.name}, pid {worker.pid}, started with `--resources GPU=1`). Median of {args.calls} "
        f"uncached calls each, alternated; target: at most {TARGET_MS:g} ms more through the worker.",
        "",
        "| call | in process (ms) | through the worker (ms) | extra (ms) | paired extra (ms) | extra outside the "
        "engine (ms) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {r['call']} | {r['in_process_ms']:.1f} | {r['through_worker_ms']:.1f} | {r['extra_ms']:+.1f} "
        f"| {r['paired_extra_ms']:+.1f} | {r['extra_outside_engine_ms']:+.1f} |"
        for r in rows
    ]
    if before is not None:
        earlier = {r["call"]: r for r in before["rows"]}
        lines += [
            "",
            f"Before and now, in one run: `--baseline {args.baseline}` (commit {before['commit']}) measured first, "
            "the same way, with its own loopback cluster.",
            "",
            "| call | before: through the worker (ms) | now (ms) | before: extra (ms) | now (ms) | before: paired "
            "extra (ms) | now (ms) | before: extra outside the engine (ms) | now (ms) |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in rows:
            b = earlier.get(r["call"])
            if b is None:
                continue
            lines.append(
                f"| {r['call']} | {b['through_worker_ms']:.1f} | {r['through_worker_ms']:.1f} "
                f"| {b['extra_ms']:+.1f} | {r['extra_ms']:+.1f} | {b['paired_extra_ms']:+.1f} "
                f"| {r['paired_extra_ms']:+.1f} | {b['extra_outside_engine_ms']:+.1f} "
                f"| {r['extra_outside_engine_ms']:+.1f} |"
            )
    facts = machine_facts(load_start)
    lines += [
        "",
        f"Machine: {facts['cpus']} CPUs, load average {facts['load_average_at_start'][0]} at the start and "
        f"{facts['load_average_at_end'][0]} at the end (other work shares these cores). A result's bytes travel: "
        "exact attention at n = 512 is 4 heads x 512 x 512 float32 (4 MB), a method's run twice that (its map and its "
        'error map). "Extra outside the engine": the median of each call\'s time less the engine time its result '
        "reports (``seconds``, measured where it computed), worker side minus in-process side: the cost of the hop "
        "alone, which a busy machine's slowing of either side's engine does not sway. The worker keeps the heap a call "
        "freed (``service.dask_client.keep_freed_memory``) while this process runs with glibc's defaults, as the app "
        "server does: a method's run computes faster there, so a difference can come out below zero.",
    ]
    result = {
        "commit": commit(ROOT),
        "engine_version": result_cache.ENGINE_VERSION,
        "device": core_device.describe(torch.device("cpu")),
        "torch_threads": threads,
        "calls": args.calls,
        "target_extra_ms": TARGET_MS,
        "machine": facts,
        "rows": rows,
        "baseline": None if before is None else {"ref": args.baseline, **before},
    }
    write_results(args.out, "placement", result, "\n".join(lines) + "\n")
    return result


if __name__ == "__main__":
    main()
