"""``python -m benchmarks``: what there is to run, the command, and the table each writes to benchmarks/results/.

docs/benchmarks.md says what each kept table measures and how to read it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Benchmark:
    module: str  # run as python -m <module>
    summary: str
    command: str  # the command behind the committed table
    writes: str  # under benchmarks/results/
    smoke: str  # arguments of a short run that writes to a scratch folder instead


BENCHMARKS: tuple[Benchmark, ...] = (
    Benchmark(
        "benchmarks.first_visit",
        "each page's default link in fresh Chromium contexts, warmed server: time to the first chart with data",
        "python -m benchmarks.first_visit --baseline <ref> --contexts 5   (and --cold --name first_visit_cold; "
        "issue 41's before/after: --baseline 433948f --name first_visit_service)",
        "first_visit.{md,json}, first_visit_cold.{md,json}, first_visit_service.{md,json}",
        "--quick --out /tmp/bench",
    ),
    Benchmark(
        "benchmarks.visit_cpu",
        "where a page visit's CPU goes: Chromium's processes (renderer, GPU process, other) against the server's, "
        "each page's default link in fresh contexts, results cached; with --baseline, that commit in the same run",
        "python -m benchmarks.visit_cpu --baseline <ref>   (the shared drawn maps': --baseline 1fd7d90 --pages Compare"
        " --contexts 10 --name visit_cpu_shared_maps)",
        "visit_cpu.{md,json}, visit_cpu_shared_maps.{md,json}",
        "--quick --out /tmp/bench",
    ),
    Benchmark(
        "benchmarks.load",
        "a class on one server: 40 sessions on one link, 20 distinct, a light page beside a heavy one, memory",
        "python -m benchmarks.load --baseline <ref>   (issue 41's: --baseline 433948f --name load_service; the shared"
        " figures': --baseline 9092301, saved as load_figure_memo; the shared drawn maps': --baseline 1fd7d90"
        " --name load_shared_maps)",
        "load_cpu.{md,json,csv}, load_service.{md,json,csv}, load_figure_memo.{md,json,csv}, "
        "load_shared_maps.{md,json,csv}",
        "--quick --out /tmp/bench",
    ),
    Benchmark(
        "benchmarks.class_wave",
        "a class opening one cached link at once: waves of 40 protocol sessions per tree, taking turns; first chart "
        "p50/p95, the last session's end, server CPU per session, server memory when quiet",
        "python -m benchmarks.class_wave --baseline <ref>   (the idle collection's: --baseline df19186)",
        "class_wave.{md,json}",
        "--quick --out /tmp/bench",
    ),
    Benchmark(
        "benchmarks.rooms",
        "a class in one room: 60 students (protocol clients) follow a teacher over 2 replicas sharing a cache folder; "
        "p95 from the teacher's move to the student's page, errors, CPU per replica while the room idles",
        "python -m benchmarks.rooms",
        "rooms.{md,json}",
        "--quick --out /tmp/bench",
    ),
    Benchmark(
        "benchmarks.load_cluster",
        "single-host replicas against the many-host layout on loopback (Redis, Dask workers, replicas behind nginx): "
        "80 sessions on one link, 40 distinct, a light page beside a heavy job, CPU of replicas and workers",
        "python -m benchmarks.load_cluster",
        "load_cluster.{md,json}",
        "--quick --out /tmp/bench",
    ),
    Benchmark(
        "benchmarks.placement",
        "a light call through a worker on loopback (device cpu@worker) against the same call in this process: "
        "medians side by side, target at most 20 ms more",
        "python -m benchmarks.placement --calls 30",
        "placement.{md,json}",
        "--calls 2 --out /tmp/bench",
    ),
    Benchmark(
        "benchmarks.suite",
        "every method against torch SDPA and the peer packages, n = 1K..16K: time, peak memory, error",
        "python -m benchmarks.suite --threads 1 --clock cpu   (and --threads 2)",
        "scaling_cpu_1t.{md,json,csv}, scaling_cpu_2t.*",
        "--quick --methods performer --sizes 128",
    ),
    Benchmark(
        "benchmarks.interactive",
        "the Compare page's computation at its defaults and the 24-point error-vs-entropy sweep",
        "python -m benchmarks.interactive --threads 2",
        "interactive_cpu_2t.json",
        "--repeats 1 --sweep-repeats 1 --out /tmp/bench",
    ),
    Benchmark(
        "benchmarks.method_times",
        "every method at n = 4096, d = 64, 8 heads, 1/8 budget, next to exact attention",
        "python -m benchmarks.method_times",
        "method_times_cpu.json",
        "--n 512 --repeats 1 --out /tmp/bench",
    ),
    Benchmark(
        "benchmarks.newer_methods",
        "NSA, MoBA, Hedgehog, Based beside the others: CPU time at n = 4096 and 1/8 budget, accuracy on clustered and "
        "real heads",
        "python -m benchmarks.newer_methods",
        "newer_methods_cpu.{md,json}",
        "--quick --out /tmp/bench",
    ),
    Benchmark(
        "benchmarks.accuracy",
        "every method's error on the clustered input at three temperatures, 1/8 budget",
        "python -m benchmarks.accuracy",
        "accuracy.{csv,json}",
        "--n 128 --out /tmp/bench",
    ),
    Benchmark(
        "benchmarks.limits_calibration",
        "the server's up-front time estimates (sweeps, button-started work) against measured runs",
        "python -m benchmarks.limits_calibration",
        "limits_calibration_cpu.{md,json}",
        "--quick --out /tmp/bench",
    ),
    Benchmark(
        "benchmarks.chunking",
        "temperatures per batched step on a CPU: the old 32M-entry stack against the engine's chunk",
        "python -m benchmarks.chunking",
        "chunking_cpu.{md,json}",
        "--quick --out /tmp/bench",
    ),
    Benchmark(
        "benchmarks.precision",
        "every method in bfloat16 and float16 against its float32 call and exact float64 attention, n = 1024",
        "python -m benchmarks.precision   (and --device cuda on a GPU host)",
        "precision_*.{md,json}",
        "--quick --out /tmp/bench",
    ),
    Benchmark(
        "benchmarks.memory_model",
        "every method's measured peak memory against its cost model at n = 4K and 16K; Performer's time slope",
        "python -m benchmarks.memory_model   (and --slope: the committed Performer beside the working tree)",
        "memory_model_*.{md,json}, performer_slope_cpu.{md,json}",
        "--quick --out /tmp/bench",
    ),
    Benchmark(
        "benchmarks.gpu",
        "the GPU check: facts, CUDA and engine tests on the device, every method at n = 1K..64K in float32 and "
        "bfloat16 against flash SDPA, Compare's default view, every page through AppTest (scripts/gpu-check.sh)",
        "python -m benchmarks.gpu OUT   (scripts/gpu-check.sh OUT on a bare GPU host; --dry-run: the CPU rehearsal)",
        "gpu_check_*.{md,json}",
        "/tmp/bench --dry-run --steps facts,scaling",
    ),
    Benchmark(
        "benchmarks.causal",
        "each causal method (prefix sums, causal windows, causal chunks) against its non-causal form: time, analytic "
        "memory and output error against exact attention in the same mode",
        "python -m benchmarks.causal",
        "causal.{md,json}",
        "--quick --out /tmp/bench",
    ),
    Benchmark(
        "benchmarks.hashing",
        "lsh and scatterbrain's hashing, angular against SMYRF's XBOX+/E2LSH at equal budget, on clustered and "
        "real heads: output error, top-key recall, time",
        "python -m benchmarks.hashing",
        "hashing.{md,json}",
        "--quick --out /tmp/bench",
    ),
    Benchmark(
        "benchmarks.model_swap",
        "methods swapped into all-MiniLM-L6-v2 (all layers and heads) at 1/8 and 1/4: retrieval of each corpus "
        "passage's second half by its first (top-1, top-5), embedding cosine and neighbour agreement with exact",
        "python -m benchmarks.model_swap",
        "model_swap.{md,json}",
        "--quick --out /tmp/bench",
    ),
    Benchmark(
        "benchmarks.refresh",
        "every CPU table the README and docs/ quote, regenerated and stamped with commit, engine version, device and "
        "temperature (--only NAME for some, --stale for those of another engine, --list)",
        "python -m benchmarks.refresh   (nice -n 19 on a shared machine)",
        "refresh.json",
        "--list",
    ),
    Benchmark(
        "benchmarks.ci_time",
        "CI's check on this machine: .ci/run on a fresh clone with an empty uv cache; the set-up, each step and the "
        "longest test files of each pytest part (about the suite, not the engine: dated, not refreshed); --ref and "
        "--name check an older commit into a table of its own",
        "python -m benchmarks.ci_time --log /tmp/ci.log",
        "ci_time*.{md,json}",
        '--pytest-addopts "-k the_number_check_can_fail" --out /tmp/bench',
    ),
    Benchmark(
        "core.claims",
        "every checkable claim of the four papers, measured (the Paper claims page's committed rows)",
        "python -m core.claims",
        "claims.{md,json}",
        "--out /tmp/bench",
    ),
)


def listing() -> str:
    lines = ["Benchmarks (results in benchmarks/results/; how to read them: docs/benchmarks.md)", ""]
    for bench in BENCHMARKS:
        lines += [
            bench.module,
            f"    {bench.summary}",
            f"    $ {bench.command}",
            f"    writes {bench.writes}",
            f"    smoke run: python -m {bench.module} {bench.smoke}",
            "",
        ]
    lines.append("Each takes --help.")
    return "\n".join(lines)


if __name__ == "__main__":
    print(listing())
