"""Scaling benchmark: every registered method against torch SDPA and the peer implementations.

    python -m benchmarks.suite                 # full run on this machine (CPU: n = 1K..16K; GPU: up to 64K)
    python -m benchmarks.suite --quick         # CI-size smoke run (n = 256, 512), results in a temp folder
    python -m benchmarks.suite --methods performer,lsh --sizes 1024,4096

What one run does, for each n (d = 64, 8 heads, one seeded clustered input shared by every entry):
- ``sdpa``: torch.nn.functional.scaled_dot_product_attention, exact; its output is the error reference;
- ``gemm_qk``: the attention-shaped GEMM (8, n, 64) x (8, 64, n), exact attention's first matmul alone;
- every registered method (oracles topk/svd/rpca are skipped: they build n x n matrices and SVDs; the trainable
  learned_kernel only runs up to n = 1024), at an equal budget (below);
- the peers at the same settings: performer_pytorch.FastAttention (features), reformer_pytorch.LSHAttention
  (rounds, buckets), nystrom_attention.NystromAttention (landmarks, pinv iterations, residual conv off),
  local_attention.LocalAttention (window).

Budget: a fixed number of stored scores per query, ``--row-budget`` R (default 256), i.e.
``core.budget_params(method, n, d, fraction=R / n)``. That is 1/4 of full attention at n = 1K, 1/8 at 2K and
1/64 at 16K: the parameters stay fixed as n grows, which is how these methods are used, so time should grow
linearly. (A fixed fraction such as 1/8 would grow every method's parameters with n and make it quadratic.)

Each (entry, n) runs in a fresh process (forked from a server that imported torch, the engine and the peers
once: ``benchmarks.harness.in_fresh_process``): one untimed warm-up call, one call measured for peak memory (and
timed), then more timed calls while they fit in ``--time-budget`` seconds (at most ``--max-repeats``); the
wall time is the median. Peak memory on CPU is the rise of the process's resident-set high-water mark over
the call (free heap pages returned to the OS and the kernel's peak counter reset just before; see
core/profiling.py); on GPU, torch.cuda.max_memory_allocated. Error: relative Frobenius error of the output
against SDPA's, mean over heads.

Writes ``scaling_<device>.csv``, ``.json`` (machine, torch version, threads, settings, rows, derived figures)
and ``.md`` (the printed table) to ``--out`` (default benchmarks/results/; --quick defaults to a temp folder).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import tempfile
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

import core
from benchmarks import harness
from benchmarks.harness import RESULTS_DIR
from core import profiling, registry
from core.device import resolve_device

CPU_SIZES = (1024, 2048, 4096, 8192, 16384)
GPU_SIZES = (*CPU_SIZES, 32768, 65536)
QUICK_SIZES = (256, 512)
ORACLES = ("topk", "svd", "rpca")
SMALL_ONLY = {"learned_kernel": 1024}  # slow trainable methods: only up to this n
NOT_BENCHMARKED = ("exact",)  # exact is sdpa below (core's exact method calls it)
PEERS = ("performer_pytorch", "reformer_pytorch", "nystrom_attention", "local_attention")
BASELINES = ("sdpa", "gemm_qk")
SLOPE_RANGE = (2048, 16384)
HEADS, D = 8, 64
TOKENS_PER_CLUSTER = 64
WORKER_TIMEOUT_S = 900


@dataclass
class Settings:
    sizes: tuple[int, ...]
    row_budget: int = 256
    beta: float = 1 / 0.3  # the app's default temperature tau = 0.3
    spread: float = 0.3
    seed: int = 0
    heads: int = HEADS
    d: int = D
    device: str = "cpu"
    dtype: str = "float32"
    time_budget_s: float = 4.0
    max_repeats: int = 7
    skip_after_s: float = 240.0  # an entry whose single call took longer is not run at larger n
    gemm_size: int = 2048  # square GEMM measuring the machine's matmul rate
    threads: int = field(default_factory=torch.get_num_threads)
    # Which clock the derived figures use: "wall", or "cpu" (process CPU time; robust on a busy machine, but
    # only equal to compute time with one thread).
    clock: str = "wall"

    def fraction(self, n: int) -> float:
        return min(1.0, self.row_budget / n)


@dataclass
class Row:
    entry: str  # sdpa | gemm_qk | one of our methods | a peer package
    kind: str  # baseline | ours | peer
    method: str  # which of our methods it implements ("exact" for sdpa)
    n: int
    status: str = "ok"  # ok | skipped: ... | failed: ...
    params: dict[str, Any] = field(default_factory=dict)
    time_s: float = math.nan
    repeats: int = 0
    time_spread: float = math.nan
    cpu_s: float = math.nan  # median process CPU time per call
    first_call_s: float = math.nan
    peak_mib: float = math.nan
    memory_how: str = ""
    error: float = math.nan  # relative output error against SDPA, mean over heads
    error_own_target: float = math.nan  # for peers whose target is not softmax attention (Reformer)
    flops: float = math.nan
    model_memory: float = math.nan  # analytic scalars stored (Approximation.cost.memory)
    gflops_per_s: float = math.nan
    gemm_fraction: float = math.nan
    load_average: float = math.nan


# ------------------------------------------------------------------ entries and their parameters


def benchmarked_methods(selected: list[str] | None = None) -> list[str]:
    names = [m for m in registry.methods() if m not in ORACLES and m not in NOT_BENCHMARKED]
    if selected is not None:
        names = [m for m in names if m in selected]
    return names


def peer_settings(peer: str, n: int, d: int, fraction: float) -> dict[str, Any] | None:
    """The peer's settings, equal to our method's budgeted ones; None if the peer cannot run them."""
    from benchmarks import peers

    method = {
        "performer_pytorch": "performer",
        "reformer_pytorch": "lsh",
        "nystrom_attention": "nystrom",
        "local_attention": "local",
    }[peer]
    if method not in registry.methods():
        return None
    params = core.budget_params(method, n, d, fraction)
    if peer == "reformer_pytorch" and peers.reformer_bucket_size(n, params["buckets"]) is None:
        return None
    return params


def entry_method(entry: str) -> str:
    from benchmarks.peers import PEER_OF

    reverse = {v: k for k, v in PEER_OF.items()}
    if entry in reverse:
        return reverse[entry]
    return "exact" if entry in BASELINES else entry


def entry_kind(entry: str) -> str:
    if entry in BASELINES:
        return "baseline"
    return "peer" if entry in PEERS else "ours"


# ------------------------------------------------------------------ the worker (one entry at one n)


def _load(path: str, device: torch.device) -> dict[str, torch.Tensor]:
    data = torch.load(path, map_location="cpu", weights_only=True)
    return {k: v.to(device) for k, v in data.items()}


def _build_call(
    entry: str, n: int, params: dict[str, Any], x: dict[str, torch.Tensor], s: dict[str, Any], device: torch.device
) -> tuple[Any, dict[str, Any]]:
    """The timed callable and (flops, model memory, settings) for one entry."""
    from benchmarks import peers

    q, k, v = x["q"], x["k"], x["v"]
    beta, seed, d = s["beta"], s["seed"], q.shape[-1]
    facts: dict[str, Any] = {}
    if entry == "sdpa":
        cost = registry.methods()["exact"].cost
        inputs = core.approximation.prepare_inputs(q, k, v, beta, seed)
        facts["cost"] = cost(inputs, {}) if cost else None
        return peers.sdpa_call(q, k, v, beta), facts
    if entry == "gemm_qk":
        facts["flops"] = 2 * q.shape[0] * n * n * d
        return peers.gemm_call(n, d, q.shape[0], device, q.dtype), facts
    if entry in PEERS:
        method = entry_method(entry)
        spec = registry.methods()[method]
        inputs = core.approximation.prepare_inputs(q, k, v, beta, seed)
        cost_params = dict(params)
        if entry == "performer_pytorch":
            peer = peers.performer_peer(q, k, v, beta, params["features"], seed)
        elif entry == "reformer_pytorch":
            peer = peers.reformer_peer(q, v, beta, params["rounds"], params["buckets"], seed)
            # Reformer attends one chunk back: twice our keys per query, as lsh with half the buckets.
            cost_params["buckets"] = max(1, params["buckets"] // 2)
        elif entry == "nystrom_attention":
            peer = peers.nystrom_peer(q, k, v, beta, params["landmarks"], params["pinv_iterations"])
        else:
            peer = peers.local_peer(q, k, v, beta, params["window"])
        facts["cost"] = spec.cost(inputs, spec.validate(cost_params, n, d)) if spec.cost else None
        facts["settings"] = peer.settings
        return peer.call, facts

    spec = registry.methods()[entry]

    def call() -> torch.Tensor:
        with torch.inference_mode():
            return core.approximate(entry, q, k, v, scale=beta, seed=seed, **params).output

    inputs = core.approximation.prepare_inputs(q, k, v, beta, seed)
    facts["cost"] = spec.cost(inputs, spec.validate(params, n, d)) if spec.cost else None
    return call, facts


def run_worker(job: dict[str, Any]) -> dict[str, Any]:
    """Measure one entry at one n; returns a dict of Row fields."""
    warnings.simplefilter("ignore")
    torch.set_num_threads(job["threads"])
    device = torch.device(job["device"])
    entry, n, params = job["entry"], job["n"], job["params"]
    out: dict[str, Any] = {}
    x = _load(job["inputs"], device)
    try:
        call, facts = _build_call(entry, n, params, x, job, device)
    except core.ParameterError as exc:
        return {"status": f"skipped: {exc}"}
    cost = facts.get("cost")
    if cost is not None:
        out["flops"], out["model_memory"] = float(cost.flops), float(cost.memory)
    elif "flops" in facts:
        out["flops"] = float(facts["flops"])
    if "settings" in facts:
        out["params"] = {**params, "peer": facts["settings"]}
    start = time.perf_counter()
    try:
        call()  # warm-up: first-call initialisation stays out of both timing and memory
    except core.ParameterError as exc:  # the engine refuses this size (e.g. its memory guard)
        return {"status": f"skipped: {exc}"}
    profiling.synchronize(device)
    out["first_call_s"] = time.perf_counter() - start
    wall, cpu = time.perf_counter(), time.process_time()
    result, peak = profiling.measure_peak(call, device)
    profiling.synchronize(device)
    timing = profiling.Timing([time.perf_counter() - wall], [time.process_time() - cpu])
    out["peak_mib"] = math.nan if peak.bytes is None else peak.bytes / 2**20
    out["memory_how"] = peak.how
    spent = timing.times[0]
    while timing.repeats < job["max_repeats"] and spent + timing.times[-1] <= job["time_budget_s"]:
        _, wall_s, cpu_s = profiling.timed(call, device)
        timing.times.append(wall_s)
        timing.cpu_times.append(cpu_s)
        spent += wall_s
    out.update(time_s=timing.median, cpu_s=timing.cpu_median, repeats=timing.repeats, time_spread=timing.spread)
    reference_path = job.get("reference")
    if entry != "gemm_qk" and reference_path and Path(reference_path).exists():
        reference = _load(reference_path, device)["out"]
        out["error"] = float(core.metrics.relative_output_error(result.float(), reference.float()).mean())
        if entry == "reformer_pytorch" and n <= 4096:
            from benchmarks import peers

            target = peers.reformer_target(x["q"], x["v"], job["beta"])
            out["error_own_target"] = float(core.metrics.relative_output_error(result.float(), target.float()).mean())
    if entry == "sdpa" and job.get("save_reference"):
        torch.save({"out": result.cpu()}, job["save_reference"])
    try:
        out["load_average"] = os.getloadavg()[0]
    except OSError:
        pass
    return out


# Imported once by the server the points fork from (a missing peer package is skipped).
PRELOAD = ("torch", "core", "benchmarks.suite", "benchmarks.peers", "performer_pytorch", "reformer_pytorch",
           "nystrom_attention", "local_attention")  # fmt: skip


def _spawn(job: dict[str, Any]) -> dict[str, Any]:
    """One point in a process of its own, forked from a server with torch, the engine and the peers imported."""
    return harness.in_fresh_process("benchmarks.suite:run_worker", job, preload=PRELOAD,
                                    timeout_s=job.get("timeout_s", WORKER_TIMEOUT_S))  # fmt: skip


# ------------------------------------------------------------------ the run


def make_inputs(n: int, settings: Settings) -> dict[str, torch.Tensor]:
    x = core.data.clustered(
        n,
        settings.d,
        max(1, n // TOKENS_PER_CLUSTER),
        settings.spread,
        settings.seed,
        heads=settings.heads,
        dtype=getattr(torch, settings.dtype),
    )
    return {"q": x.q, "k": x.k, "v": x.v}


def plan(
    settings: Settings, methods: list[str], peers_wanted: list[str], baselines: list[str]
) -> list[tuple[str, int, dict[str, Any] | None, str | None]]:
    """(entry, n, params, reason-not-run) in run order: for each n, sdpa first (it writes the reference)."""
    jobs = []
    for n in settings.sizes:
        fraction = settings.fraction(n)
        for entry in baselines:
            jobs.append((entry, n, {}, None))
        for method in methods:
            limit = SMALL_ONLY.get(method)
            if limit is not None and n > limit:
                jobs.append((method, n, None, f"skipped: slow trainable method, run only up to n = {limit}"))
                continue
            try:
                jobs.append((method, n, core.budget_params(method, n, settings.d, fraction), None))
            except core.ParameterError as exc:
                jobs.append((method, n, None, f"skipped: {exc}"))
        for peer in peers_wanted:
            if entry_method(peer) not in methods and methods:
                continue
            params = peer_settings(peer, n, settings.d, fraction)
            reason = None if params is not None else "skipped: the peer cannot run these settings"
            jobs.append((peer, n, params, reason))
    return jobs


def run_suite(
    settings: Settings,
    methods: list[str],
    peers_wanted: list[str],
    baselines: list[str],
    workdir: Path,
    echo: Any = print,
) -> tuple[list[Row], dict[str, Any]]:
    device = resolve_device(settings.device)
    machine = profiling.machine_facts(device)
    machine["gemm_gflops_start"] = profiling.gemm_rate(device, size=settings.gemm_size, clock=settings.clock) / 1e9
    rows: list[Row] = []
    too_slow: set[str] = set()
    inputs_for: dict[int, Path] = {}
    started = time.perf_counter()
    for entry, n, params, reason in plan(settings, methods, peers_wanted, baselines):
        row = Row(entry=entry, kind=entry_kind(entry), method=entry_method(entry), n=n, params=params or {})
        if reason is None and entry in too_slow:
            reason = f"skipped: a single call took over {settings.skip_after_s:.0f} s at a smaller n"
        if reason is not None:
            row.status = reason
            rows.append(row)
            echo(f"  {entry:<20} n={n:<6} {reason}")
            continue
        if n not in inputs_for:
            path = workdir / f"inputs_{n}.pt"
            torch.save(make_inputs(n, settings), path)
            inputs_for[n] = path
        reference = workdir / f"reference_{n}.pt"
        job = {
            **asdict(settings),
            "sizes": None,
            "entry": entry,
            "n": n,
            "params": params or {},
            "inputs": str(inputs_for[n]),
            "reference": str(reference),
            "device": str(device),
            "save_reference": str(reference) if entry == "sdpa" else None,
        }
        result = _spawn(job)
        for key, value in result.items():
            setattr(row, key, math.nan if value is None else value)  # JSON carries NaN as null
        if row.status == "ok" and row.first_call_s > settings.skip_after_s:
            too_slow.add(entry)
        rows.append(row)
        echo(f"  {entry:<20} n={n:<6} {_short(row)}")
    machine["gemm_gflops_end"] = profiling.gemm_rate(device, size=settings.gemm_size, clock=settings.clock) / 1e9
    machine["gemm_gflops"] = max(machine["gemm_gflops_start"], machine["gemm_gflops_end"])
    machine["gemm_clock"] = settings.clock
    machine["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    machine["wall_s"] = time.perf_counter() - started
    add_rates(rows, machine, settings.clock)
    return rows, machine


def add_rates(rows: list[Row], machine: dict[str, Any], clock: str) -> None:
    """GFLOP/s (analytic FLOPs over the measured time) and its fraction of the machine's GEMM rate."""
    for row in rows:
        t = seconds(row, clock)
        if row.status == "ok" and math.isfinite(row.flops) and t > 0:
            row.gflops_per_s = row.flops / t / 1e9
            row.gemm_fraction = row.gflops_per_s / machine["gemm_gflops"]


def rederive(path: Path, out_dir: Path, clock: str | None = None) -> dict[str, Path]:
    """Rewrite a run's tables from its JSON with the current derivations (and optionally another clock)."""
    payload = json.loads(path.read_text())
    fields = set(Row.__dataclass_fields__)
    rows = [Row(**{k: (math.nan if v is None else v) for k, v in r.items() if k in fields}) for r in payload["rows"]]
    settings_fields = set(Settings.__dataclass_fields__)
    settings = Settings(**{k: v for k, v in payload["settings"].items() if k in settings_fields})
    settings.sizes = tuple(settings.sizes)
    if clock is not None:
        settings.clock = clock
    machine = payload["machine"]
    if machine.get("gemm_clock", "wall") != settings.clock and machine["device"] == "cpu":
        # the GEMM rate must be on the same clock as the times it is compared with: measure it again now
        torch.set_num_threads(settings.threads)
        machine["gemm_gflops"] = profiling.gemm_rate("cpu", size=settings.gemm_size, clock=settings.clock) / 1e9
        machine["gemm_clock"] = settings.clock
        machine["gemm_remeasured"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    add_rates(rows, machine, settings.clock)
    return write_results(out_dir, rows, machine, settings, derive(rows, settings.clock), payload["versions"])


def _short(row: Row) -> str:
    if row.status != "ok":
        return row.status
    err = "" if math.isnan(row.error) else f" err {row.error:.3f}"
    return f"{row.time_s * 1e3:9.1f} ms (cpu {row.cpu_s * 1e3:9.1f}, {row.repeats}x) peak {row.peak_mib:8.1f} MiB{err}"


# ------------------------------------------------------------------ derived figures


def seconds(row: Row, clock: str) -> float:
    return row.cpu_s if clock == "cpu" else row.time_s


def derive(rows: list[Row], clock: str = "wall") -> dict[str, Any]:
    """Per entry: ratios to its peer and to SDPA at each n, the log-log slope, the crossover n against SDPA."""
    ok = [r for r in rows if r.status == "ok"]
    by = {(r.entry, r.n): r for r in ok}
    sdpa = {r.n: seconds(r, clock) for r in ok if r.entry == "sdpa"}
    entries = sorted({r.entry for r in ok}, key=lambda e: [r.entry for r in rows].index(e))
    from benchmarks.peers import PEER_OF

    out: dict[str, Any] = {}
    for entry in entries:
        mine = sorted((r.n, seconds(r, clock)) for r in ok if r.entry == entry)
        ns = [n for n, _ in mine]
        info: dict[str, Any] = {"kind": entry_kind(entry), "method": entry_method(entry)}
        in_range = [(n, t) for n, t in mine if SLOPE_RANGE[0] <= n <= SLOPE_RANGE[1]]
        if len(in_range) < 3:  # quick runs: fit what there is
            in_range = mine
        info["slope"] = profiling.loglog_slope([n for n, _ in in_range], [t for _, t in in_range])
        info["slope_range"] = [in_range[0][0], in_range[-1][0]] if in_range else None
        info["ratio_to_sdpa"] = {n: t / sdpa[n] for n, t in mine if n in sdpa}
        common = [n for n in ns if n in sdpa]
        info["crossover_vs_sdpa"] = profiling.crossover(
            common, [seconds(by[(entry, n)], clock) for n in common], [sdpa[n] for n in common]
        )
        peer = PEER_OF.get(entry)
        if peer is not None:
            info["peer"] = peer
            info["ratio_to_peer"] = {n: t / seconds(by[(peer, n)], clock) for n, t in mine if (peer, n) in by}
            info["error_vs_peer"] = {n: [by[(entry, n)].error, by[(peer, n)].error] for n in ns if (peer, n) in by}
            info["memory_ratio_to_peer"] = {
                n: by[(entry, n)].peak_mib / by[(peer, n)].peak_mib
                for n in ns
                if (peer, n) in by and by[(peer, n)].peak_mib > 0
            }
        out[entry] = info
    return out


# ------------------------------------------------------------------ output


def table(rows: list[Row], derived: dict[str, Any], clock: str = "wall") -> str:
    lines = [
        f"Ratios, GFLOP/s and slopes use the {clock} clock.",
        "",
        "| entry | n | params | wall ms | cpu ms | reps | × SDPA | × peer | peak MiB | rel. error | GFLOP/s | % GEMM |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r.status != "ok":
            lines.append(f"| {r.entry} | {r.n} | {_params_text(r.params, r.method)} | {r.status} | | | | | | | | |")
            continue
        info = derived.get(r.entry, {})
        to_sdpa = info.get("ratio_to_sdpa", {}).get(r.n)
        to_peer = info.get("ratio_to_peer", {}).get(r.n)
        err = r.error if not math.isnan(r.error) else None
        own = f" (own target {r.error_own_target:.3f})" if not math.isnan(r.error_own_target) else ""
        lines.append(
            f"| {r.entry} | {r.n} | {_params_text(r.params, r.method)} | {r.time_s * 1e3:.1f} | {r.cpu_s * 1e3:.1f} | "
            f"{r.repeats} | "
            f"{_num(to_sdpa, '.3f')} | {_num(to_peer, '.2f')} | {_num(r.peak_mib, '.1f')} | "
            f"{_num(err, '.3f')}{own} | {_num(r.gflops_per_s, '.2f')} | {_num(100 * r.gemm_fraction, '.1f')} |"
        )
    lines += ["", "| entry | slope (log t vs log n) | over n | crossover n vs SDPA | peer |", "|---|---|---|---|---|"]
    for entry, info in derived.items():
        span = info.get("slope_range")
        cross = info.get("crossover_vs_sdpa")
        lines.append(
            f"| {entry} | {_num(info['slope'], '.2f')} | {span[0]}–{span[1] if span else ''} | "
            f"{'never (in range)' if cross is None else f'{cross:.0f}'} | {info.get('peer', '')} |"
        )
    return "\n".join(lines)


def _params_text(params: dict[str, Any], method: str) -> str:
    """The budgeted parameters (and LSH rounds): the ones that make the comparison equal."""
    spec = registry.methods().get(method)
    shown = {p.name for p in spec.params if p.budgeted} | {"rounds"} if spec is not None else set(params)
    return ", ".join(f"{k}={v}" for k, v in params.items() if k in shown)


def _num(x: Any, fmt: str) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    return format(x, fmt)


def device_tag(machine: dict[str, Any]) -> str:
    if machine["device"] == "cuda":
        return "cuda_" + "".join(c if c.isalnum() else "-" for c in machine["device_name"]).strip("-").lower()
    return f"{machine['device']}_{machine['threads']}t"


def write_results(
    out_dir: Path,
    rows: list[Row],
    machine: dict[str, Any],
    settings: Settings,
    derived: dict[str, Any],
    versions: dict[str, Any],
) -> dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = out_dir / f"scaling_{device_tag(machine)}"
    paths = {"csv": stem.with_suffix(".csv"), "json": stem.with_suffix(".json"), "md": stem.with_suffix(".md")}
    fields = list(Row.__dataclass_fields__)
    with paths["csv"].open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        for r in rows:
            record = asdict(r)
            record["params"] = json.dumps(r.params, sort_keys=True)
            writer.writerow(record)
    payload = {
        "machine": machine,
        "versions": versions,
        "settings": asdict(settings),
        "rows": [_jsonable(asdict(r)) for r in rows],
        "derived": _jsonable(derived),
        "written": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    paths["json"].write_text(json.dumps(payload, indent=1, allow_nan=False) + "\n")
    header = (
        f"# Scaling benchmark on {machine['device']} ({machine['device_name']}), torch {machine['torch']}, "
        f"{machine['threads']} threads\n\nd = {settings.d}, {settings.heads} heads, clustered input "
        f"(beta = {settings.beta:.3g}, spread {settings.spread}), {settings.row_budget} stored scores per query "
        f"(fraction = {settings.row_budget}/n). GEMM {machine['gemm_gflops']:.1f} GFLOP/s. "
        f"Clock for derived figures: {settings.clock}. OMP_WAIT_POLICY: {machine.get('omp_wait_policy', 'default')}. "
        f"Load average {machine.get('load_average')} → {machine.get('load_average_end')}.\n\n"
    )
    paths["md"].write_text(header + table(rows, derived, settings.clock) + "\n")
    return paths


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def versions() -> dict[str, Any]:
    from benchmarks import peers

    return {"torch": torch.__version__, **peers.available()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="CI smoke run: n = 256, 512 (or --sizes), one repeat, small GEMM, temp output folder",
    )
    parser.add_argument("--methods", help="comma-separated methods (default: every registered non-oracle method)")
    parser.add_argument("--sizes", help="comma-separated n (default: 1K..16K on CPU, up to 64K on GPU)")
    parser.add_argument("--no-peers", action="store_true", help="leave out the peer implementations")
    parser.add_argument("--row-budget", type=int, default=256, help="stored scores per query (default 256)")
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's, = cores)")
    parser.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="clock for ratios and slopes: wall (default), or cpu = process CPU time, robust on a "
        "busy machine with --threads 1",
    )
    parser.add_argument("--time-budget", type=float, default=None, help="seconds of timed repeats per point")
    parser.add_argument("--max-repeats", type=int, default=None)
    parser.add_argument("--out", type=Path, default=None, help="output folder")
    parser.add_argument("--rederive", type=Path, help="rewrite the tables of an earlier run's JSON (no measuring)")
    args = parser.parse_args(argv)

    if args.rederive:
        paths = rederive(args.rederive, args.out or args.rederive.parent, args.clock if args.clock != "wall" else None)
        print(paths["md"].read_text())
        return 0
    device = resolve_device(args.device)
    if args.sizes:
        sizes = tuple(int(s) for s in args.sizes.split(","))
    else:
        sizes = QUICK_SIZES if args.quick else (GPU_SIZES if device.type == "cuda" else CPU_SIZES)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    settings = Settings(
        sizes=sizes, row_budget=args.row_budget, device=device.type, threads=torch.get_num_threads(), clock=args.clock
    )
    if settings.clock == "cpu" and (settings.threads > 1 or device.type != "cpu"):
        print("note: --clock cpu sums the CPU time of all threads (and ignores GPU time); use it with --threads 1")
    if args.quick:
        settings.time_budget_s, settings.max_repeats, settings.gemm_size = 0.0, 1, 512
    if args.time_budget is not None:
        settings.time_budget_s = args.time_budget
    if args.max_repeats is not None:
        settings.max_repeats = args.max_repeats
    selected = args.methods.split(",") if args.methods else None
    unknown = sorted(set(selected or []) - set(registry.methods()) - set(PEERS) - set(BASELINES))
    if unknown:
        parser.error(f"unknown methods: {', '.join(unknown)}; registered: {', '.join(registry.methods())}")
    methods = benchmarked_methods(selected)
    available = versions()
    peers_wanted = [] if args.no_peers else [p for p in PEERS if available.get(p)]
    if selected is not None:
        peers_wanted = [p for p in peers_wanted if p in selected or entry_method(p) in selected]
    missing = [p for p in PEERS if not available.get(p)]
    if missing and not args.no_peers:
        print(f"peers not installed (pip install --no-deps -r requirements-bench.txt): {', '.join(missing)}")
    out_dir = args.out or (Path(tempfile.mkdtemp(prefix="bench_quick_")) if args.quick else RESULTS_DIR)
    print(
        f"device {profiling.machine_facts(device)['device_name']} ({device.type}), torch {torch.__version__}, "
        f"{settings.threads} threads; n = {', '.join(map(str, sizes))}; methods: {', '.join(methods)}; "
        f"peers: {', '.join(peers_wanted) or 'none'}"
    )
    with tempfile.TemporaryDirectory(prefix="bench_inputs_") as tmp:
        rows, machine = run_suite(settings, methods, peers_wanted, list(BASELINES), Path(tmp))
    derived = derive(rows, settings.clock)
    paths = write_results(out_dir, rows, machine, settings, derived, available)
    print()
    print(table(rows, derived, settings.clock))
    print(
        f"\nGEMM {machine['gemm_gflops']:.1f} GFLOP/s; wall {machine['wall_s']:.0f} s; written: "
        + ", ".join(str(p) for p in paths.values())
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
