"""The benchmarks at tiny sizes: profiling helpers, the suite's CSV/JSON, the peers at equal settings, the bounded
live scaling run, the interactive-path timer, the shared harness (benchmarks/harness.py) and the catalogue that
``python -m benchmarks`` prints. No timing assertions: the machine is shared."""

from __future__ import annotations

import csv
import functools
import json
import math
import os
import sys
import time
import types
from pathlib import Path

import ci_env
import pytest
import torch
from quiet_machine import wait_for_a_quiet_machine

import core
from benchmarks import interactive, suite
from core import profiling

ROOT = Path(__file__).resolve().parent.parent


# ------------------------------------------------------------------ profiling helpers


def test_loglog_slope_recovers_power_laws() -> None:
    ns = [1024, 2048, 4096, 8192]
    assert profiling.loglog_slope(ns, [3e-9 * n**2 for n in ns]) == pytest.approx(2.0)
    assert profiling.loglog_slope(ns, [5e-6 * n for n in ns]) == pytest.approx(1.0)
    assert math.isnan(profiling.loglog_slope([1024], [1.0]))
    assert math.isnan(profiling.loglog_slope([1024, 2048], [0.0, float("nan")]))


def test_crossover_interpolates_in_log_space() -> None:
    ns = [1024, 2048, 4096]
    reference = [1.0, 4.0, 16.0]  # quadratic
    # twice as slow at 1024, twice as fast at 2048: equal at sqrt(1024 * 2048) on log axes
    assert profiling.crossover(ns, [2.0, 2.0, 2.0], reference) == pytest.approx(math.sqrt(1024 * 2048))
    assert profiling.crossover(ns, [0.5, 1.0, 2.0], reference) == 1024  # faster everywhere
    assert profiling.crossover(ns, [2.0, 8.0, 32.0], reference) is None  # never faster
    # faster at 2048 but slower again at 4096: the crossing after the last slower point counts, none here
    assert profiling.crossover(ns, [2.0, 2.0, 17.0], reference) is None


def test_time_call_respects_repeats_and_budget() -> None:
    calls = []
    timing = profiling.time_call(lambda: calls.append(1), warmup=2, repeats=5)
    assert timing.repeats == 5 and len(calls) == 7
    assert timing.median >= 0 and timing.spread >= 0
    slow = profiling.time_call(lambda: sum(range(200_000)), warmup=0, repeats=50, budget_s=0.0)
    assert slow.repeats == 1  # the budget stops after min_repeats


def test_cpu_peak_memory_sees_a_large_temporary() -> None:
    ci_env.require(sys.platform.startswith("linux"), "the RSS high-water mark is read from /proc")
    size = 64 * 2**20  # 64 MiB of float32, freed before the call returns

    def allocate() -> float:
        x = torch.ones(size // 4)
        return float(x[-1])

    _, peak = profiling.measure_peak(allocate, "cpu")
    assert peak.bytes is not None
    assert 60 * 2**20 <= peak.bytes <= 160 * 2**20, peak
    _, small = profiling.measure_peak(lambda: torch.ones(16).sum(), "cpu")
    assert small.bytes is not None and small.bytes < 16 * 2**20


def test_model_cost_matches_the_engine_cost() -> None:
    x = core.data.gaussian(256, 32, 0, heads=3)
    for method in ("performer", "lsh", "nystrom", "exact"):
        params = core.budget_params(method, 256, 32, 1 / 8)
        engine = core.approximate(method, x.q, x.k, x.v, **params).cost
        assert profiling.model_cost(method, 256, 32, 3, params) == engine


def test_machine_facts_and_gemm_rate() -> None:
    facts = profiling.machine_facts("cpu")
    assert facts["device"] == "cpu" and facts["torch"] == torch.__version__ and facts["threads"] >= 1
    assert profiling.gemm_rate("cpu", size=128, repeats=2) > 1e6  # FLOP/s


# ------------------------------------------------------------------ the suite


def test_budget_plan_keeps_parameters_fixed_as_n_grows() -> None:
    settings = suite.Settings(sizes=(2048, 16384), row_budget=256)
    jobs = suite.plan(settings, ["performer", "lsh"], [], ["sdpa"])
    params = {(entry, n): p for entry, n, p, _ in jobs}
    assert params[("performer", 2048)]["features"] == params[("performer", 16384)]["features"] == 128
    # lsh: chunk = n / buckets stays at row_budget / rounds
    for n in (2048, 16384):
        assert n // params[("lsh", n)]["buckets"] == 128
    assert [entry for entry, n, _, _ in jobs if n == 2048][0] == "sdpa"  # the reference runs first


def test_oracles_and_exact_are_not_benchmarked() -> None:
    names = suite.benchmarked_methods()
    assert not {"topk", "svd", "rpca", "exact"} & set(names)
    assert {"performer", "lsh", "nystrom"} <= set(names)


@pytest.mark.slow
def test_suite_writes_valid_csv_and_json(tmp_path: Path) -> None:
    """One method (and its peer when installed) at n = 128: every output file is complete and parseable.

    Each entry runs in its own subprocess (the real path), so this takes a few seconds per entry."""
    code = suite.main(
        [
            "--quick",
            "--methods",
            "performer",
            "--sizes",
            "128",
            "--out",
            str(tmp_path),
            "--max-repeats",
            "2",
            "--time-budget",
            "0.5",
            "--device",
            "cpu",
        ]
    )
    assert code == 0
    rows = list(csv.DictReader((tmp_path / f"scaling_cpu_{torch.get_num_threads()}t.csv").open()))
    entries = {(r["entry"], int(r["n"])): r for r in rows}
    for entry in ("sdpa", "gemm_qk", "performer"):
        for n in (128,):
            row = entries[(entry, n)]
            assert row["status"] == "ok", row
            assert float(row["time_s"]) > 0 and 1 <= int(row["repeats"]) <= 2
            assert float(row["peak_mib"]) >= 0
    assert 0 < float(entries[("performer", 128)]["error"]) < 2  # measured against SDPA's output
    assert json.loads(entries[("performer", 128)]["params"])["features"] == 64  # 256 per query -> 128 / 2
    payload = json.loads((tmp_path / f"scaling_cpu_{torch.get_num_threads()}t.json").read_text())
    assert payload["machine"]["device"] == "cpu" and payload["machine"]["torch"] == torch.__version__
    assert payload["machine"]["threads"] >= 1 and payload["machine"]["gemm_gflops"] > 0
    assert payload["settings"]["row_budget"] == 256 and payload["settings"]["heads"] == 8
    derived = payload["derived"]["performer"]
    assert set(derived) >= {"slope", "ratio_to_sdpa", "crossover_vs_sdpa"}
    assert derived["ratio_to_sdpa"]["128"] > 0
    peer_installed = any(r["entry"] == "performer_pytorch" for r in rows)
    if peer_installed:
        assert entries[("performer_pytorch", 128)]["status"] == "ok"
        assert derived["ratio_to_peer"]["128"] > 0
    markdown = (tmp_path / f"scaling_cpu_{torch.get_num_threads()}t.md").read_text()
    assert "| performer | 128 |" in markdown and "slope" in markdown
    # the tables can be rebuilt from the JSON alone, with the same derived figures
    again = suite.rederive(tmp_path / f"scaling_cpu_{torch.get_num_threads()}t.json", tmp_path / "again")
    assert json.loads(again["json"].read_text())["derived"] == payload["derived"]


def test_worker_reports_skips_instead_of_failing(tmp_path: Path) -> None:
    """A size the engine refuses (its memory guard) is recorded as skipped, not as a crash."""
    inputs = tmp_path / "inputs.pt"
    torch.save(suite.make_inputs(64, suite.Settings(sizes=(64,), heads=2)), inputs)
    job = {
        **suite.Settings(sizes=(64,), heads=2).__dict__,
        "sizes": None,
        "entry": "lsh",
        "n": 64,
        "params": {"rounds": 99, "buckets": 4},
        "inputs": str(inputs),
        "reference": None,
        "device": "cpu",
    }
    result = suite.run_worker(job)
    assert result["status"].startswith("skipped: lsh.rounds")


# ------------------------------------------------------------------ peers at equal settings


def _inputs(n: int = 512, heads: int = 2, order_by_cluster: bool = False) -> core.data.Inputs:
    return core.data.clustered(n, 64, n // 64, 0.3, 0, heads=heads, order_by_cluster=order_by_cluster)


def test_local_peer_computes_exactly_our_band() -> None:
    ci_env.import_or_unavailable("local_attention")
    from benchmarks import peers

    x = _inputs()
    ours = core.approximate("local", x.q, x.k, x.v, scale=3.0, window=64).output
    theirs = peers.local_peer(x.q, x.k, x.v, 3.0, 64).call()
    assert torch.allclose(ours, theirs, atol=1e-5)


def test_nystrom_peer_matches_ours_at_equal_landmarks() -> None:
    ci_env.import_or_unavailable("nystrom_attention")
    from benchmarks import peers

    # Landmarks are means of contiguous segments: this comparison was calibrated on clusters laid out in runs.
    x = _inputs(order_by_cluster=True)
    exact = core.approximate("exact", x.q, x.k, x.v, scale=3.0).output
    for landmarks in (64, 60):  # 60 does not divide n: the peer pads at the front and masks
        ours = core.approximate("nystrom", x.q, x.k, x.v, scale=3.0, landmarks=landmarks).output
        theirs = peers.nystrom_peer(x.q, x.k, x.v, 3.0, landmarks, 6).call()
        err_ours = core.metrics.relative_output_error(ours, exact).mean()
        err_theirs = core.metrics.relative_output_error(theirs, exact).mean()
        assert abs(err_ours - err_theirs) < 0.01, (landmarks, err_ours, err_theirs)


def test_performer_and_reformer_peers_run_at_our_temperature() -> None:
    ci_env.import_or_unavailable("performer_pytorch")
    ci_env.import_or_unavailable("reformer_pytorch")
    from benchmarks import peers

    x = _inputs()
    exact = core.approximate("exact", x.q, x.k, x.v, scale=3.0).output
    perf = peers.performer_peer(x.q, x.k, x.v, 3.0, 256, seed=0)
    out = perf.call()
    assert torch.equal(out, perf.call())  # the projection is drawn once, not per call
    assert core.metrics.relative_output_error(out, exact).mean() < 0.9  # the same kernel, not a different beta
    lsh = peers.reformer_peer(x.q, x.v, 3.0, rounds=2, buckets=8, seed=0)
    out = lsh.call()
    assert torch.equal(out, lsh.call())  # seeded rotations
    own = core.metrics.relative_output_error(out, peers.reformer_target(x.q, x.v, 3.0)).mean()
    assert own < 0.9
    assert peers.reformer_bucket_size(512, 8) == 64 and peers.reformer_bucket_size(512, 7) is None


# ------------------------------------------------------------------ live scaling run (the page's engine)


def test_scaling_run_measures_then_stops_at_the_time_limit() -> None:
    points = profiling.scaling_run(["performer"], [64, 128, 256], heads=1, point_limit_s=0.0, total_limit_s=60)
    assert [p.n for p in points] == [64, 128, 256]
    assert points[0].status == "ok" and points[0].seconds > 0 and points[0].model_flops > 0
    assert points[1].status.startswith("stopped: would take")
    assert points[2].status == "stopped: an earlier size hit a limit"


def test_scaling_run_stops_before_the_memory_limit() -> None:
    points = profiling.scaling_run(["exact"], [64, 4096], heads=1, memory_limit_bytes=2**20, total_limit_s=60)
    assert points[0].status == "ok"
    assert "MiB" in points[1].status and math.isnan(points[1].seconds)


def test_scaling_run_records_refused_parameters() -> None:
    points = profiling.scaling_run(["topk"], [64, 4096], heads=1, total_limit_s=60)  # the oracle caps n at 2048
    assert points[0].status == "ok"
    assert points[1].status == "stopped: n: topk accepts n <= 2048"


# ------------------------------------------------------------------ interactive-path timer


def test_interactive_measurements_have_every_part() -> None:
    engine = interactive.engine_only(["performer", "lsh"], repeats=1, n=64, heads=1)
    assert {"exact", "performer", "lsh"} <= set(engine["parts"]) and engine["seconds"] > 0
    page = interactive.compare_page(["performer"], repeats=1, n=64, heads=1, clusters=4)
    assert {"inputs", "exact", "performer"} <= set(page["parts"])
    sweep = interactive.sweep(heads=1, repeats=1, methods=("performer", "local"), n=64)
    labels = set(sweep["parts"])
    assert "exact attention" in labels and len(labels) == 3 and sweep["settings"]["points"] == 24
    text = interactive.table({"sweep": {**sweep, "goal_s": 5.0}})
    assert "| sweep |" in text


def test_sdpa_baseline_uses_the_fused_kernel_not_the_math_path() -> None:
    """3-D inputs send CPU SDPA to the math path (n x n scores); the baseline must time the fused kernel."""
    from torch import profiler

    from benchmarks import peers

    x = core.data.gaussian(128, 64, 0, heads=2)
    call = peers.sdpa_call(x.q, x.k, x.v, 0.125)
    with profiler.profile(activities=[profiler.ProfilerActivity.CPU]) as prof:
        out = call()
    names = {event.key for event in prof.key_averages()}
    assert "aten::_scaled_dot_product_attention_math" not in names, names
    assert out.shape == x.v.shape
    expected = core.approximate("exact", x.q, x.k, x.v, scale=0.125).output
    assert torch.allclose(out, expected, atol=1e-5)


def test_chunking_benchmark_times_both_chunk_sizes_on_the_same_numbers(tmp_path: Path) -> None:
    from benchmarks import chunking

    result = chunking.main(["--quick", "--out", str(tmp_path)])
    assert result["old_chunk"] > result["new_chunk"] == core.device.chunk_elements(torch.device("cpu"))
    assert [row["what"] for row in result["rows"]] == ["sweep", "scrub views"]
    for row in result["rows"]:
        assert row["old_median_s"] > 0 and row["new_median_s"] > 0
        assert row["largest_relative_difference"] < 1e-5
    assert "| sweep | 512 | 4 | 12 |" in (tmp_path / "chunking_cpu_quick.md").read_text()


@pytest.mark.serial  # a measured sweep must stay under the server's estimate: alone on the machine (suite_parts.py)
def test_limits_calibration_benchmark_puts_both_estimates_beside_a_measured_sweep(tmp_path: Path) -> None:
    from benchmarks import limits_calibration

    # CI once measured the first sweep at five times its table's time right after the rooms browser test
    quiet = wait_for_a_quiet_machine()
    result = limits_calibration.main(["--quick", "--out", str(tmp_path)])
    assert [(row["what"], row["methods"], row["n"]) for row in result["rows"]] == [
        ("sweep", ["lsh", "performer", "scatterbrain"], 512),
        ("sweep", ["lsh"], 1024),
    ]
    for row in result["rows"]:
        assert row["measured_median_s"] > 0
        # The estimate the server uses is above the measured time and below the previous one.
        assert row["measured_median_s"] < row["estimate_s"] < row["previous_estimate_s"], (row, f"CPU {quiet} %")
        assert row["previous_largest_n"] < row["largest_n"] <= 4096
    table = (tmp_path / "limits_calibration_cpu_quick.md").read_text()
    assert "| sweep | lsh, performer, scatterbrain | 512 | 4 | 12 |" in table
    # Button-started work: the estimate a page shows beside one measured run of the same call.
    assert [row["page"] for row in result["buttons"]] == ["Kernels", "Kernels", "VCC"]
    for row in result["buttons"]:
        assert row["measured_s"] > 0 and row["estimate_s"] > 0
        assert row["ratio"] == pytest.approx(row["estimate_s"] / row["measured_s"])
    assert "| Kernels | Fit the kernels (3 variants, 100 steps) |" in table


def test_first_visit_summarises_both_trees_and_a_page_without_a_chart() -> None:
    from benchmarks import first_visit

    samples = {"before": {"Compare": [3.0, 2.0, 2.6]}, "now": {"Compare": [2.0, 2.4, 1.8]}}
    rows = first_visit.summary(samples)
    assert rows[0]["before"]["median_s"] == 2.6 and rows[0]["now"]["median_s"] == 2.0
    assert rows[0]["ratio"] == pytest.approx(2.0 / 2.6) and rows[0]["now"]["range_s"] == [1.8, 2.4]
    labels = {"before": "before (abc123)", "now": "now"}
    text = first_visit.markdown(rows, ["before", "now"], labels, 3, "cmd", {"before": 3.0, "now": 120.0})
    assert "| Compare | 2.60 | 2.00–3.00 | 2.00 | 1.80–2.40 | 0.77× | ≤ 2.5 ✓ |" in text
    nothing = first_visit.summary({"now": {"Scaling": [math.inf, math.inf]}})
    assert "no chart in 30 s" in first_visit.markdown(nothing, ["now"], labels, 2, "cmd", {"now": 1.0})


# ------------------------------------------------------------------ the harness and the catalogue


def test_first_visit_reads_its_pages_from_the_page_registry() -> None:
    from benchmarks import harness
    from ui.page_registry import PAGES

    assert list(harness.page_paths().values()) == [page.url_path for page in PAGES]
    assert "" not in harness.page_paths().values()  # Home opens without a chart


def test_engine_timer_gives_a_torch_benchmark_median_with_the_current_threads() -> None:
    from torch.utils.benchmark import Measurement

    from benchmarks import harness

    calls: list[int] = []
    timing = harness.time_engine(lambda: calls.append(torch.get_num_threads()), repeats=2, label="x", sub_label="y")
    assert isinstance(timing, Measurement) and timing.median > 0 and len(calls) >= 3  # warm-up, sizing, blocks
    assert set(calls) == {torch.get_num_threads()}  # not torch.utils.benchmark's default of one thread
    assert "y" in harness.compare_table([timing])
    assert harness.time_once(lambda: sum(range(1000)), threads=1) > 0


def test_a_long_call_is_timed_in_blocks_of_one_after_one_warm_up_call() -> None:
    """torch's Timer.timeit makes two untimed calls before the one it times, and blocked_autorange's block-size
    search one more: a 10 s engine call measured 3 times took 7 calls. Now: the warm-up, then the blocks."""
    from benchmarks import harness

    calls: list[int] = []

    def slow() -> None:
        calls.append(torch.get_num_threads())
        time.sleep(0.06)

    timing = harness.time_engine(slow, repeats=3, label="x", sub_label="slow", threads=1)
    assert len(timing.times) == len(calls) - 1 and 3 <= len(timing.times) <= 4
    assert all(0.06 <= t < 0.5 for t in timing.times) and timing.number_per_run == 1
    assert set(calls) == {1} and "slow" in harness.compare_table([timing])
    calls.clear()
    assert 0.06 <= harness.time_once(slow, threads=1) < 0.5 and len(calls) == 1  # cold: the one call it times
    calls.clear()
    # A budget of 0.1 s of timed blocks: 4 blocks (the 0.2 s floor) where 3 repeats of a 0.06 s call would make 3-4;
    # a 0.25 s call times once past it.
    assert len(harness.time_engine(slow, repeats=10, budget_s=0.1).times) == 4 and len(calls) == 5
    calls.clear()

    def slower() -> None:
        calls.append(1)
        time.sleep(0.25)

    assert len(harness.time_engine(slower, repeats=3, budget_s=0.1).times) == 1 and len(calls) == 2
    calls.clear()
    # A warm-up past warm_up_counts_from_s is a timed call too: 2 calls make the 0.5 s budget, not 1 + 2.
    timing = harness.time_engine(slower, repeats=3, budget_s=0.5, warm_up_counts_from_s=0.2)
    assert len(timing.times) == len(calls) == 2
    calls.clear()
    assert len(harness.time_engine(slower, repeats=3, budget_s=0.5, warm_up_counts_from_s=1.0).times) == 2
    assert len(calls) == 3


def test_two_clocks_time_the_same_calls_of_a_long_call() -> None:
    """benchmarks.interactive reads wall and CPU seconds of its whole calls: one run of calls gives both (it ran them
    twice, once per clock). A sleeping call spends wall time, not CPU time."""
    from benchmarks import harness

    calls: list[int] = []

    def slow() -> None:
        calls.append(1)
        time.sleep(0.06)

    wall, cpu = harness.time_engine_two_clocks(slow, repeats=3)
    assert len(wall.times) == len(cpu.times) == len(calls) - 1 and 3 <= len(wall.times) <= 4
    assert all(w >= 0.06 for w in wall.times) and cpu.median < 0.5 * wall.median


def test_each_fresh_process_starts_clean_and_reports_what_went_wrong() -> None:
    """benchmarks.suite measures each point in a process forked from a preloaded server: no state carries from one
    point to the next, and a point that raises, dies or hangs gives a status instead of stopping the run."""
    from benchmarks import harness

    run = functools.partial(harness.in_fresh_process, timeout_s=60, preload=("torch", "fresh_process_targets"))
    first, second = run("fresh_process_targets:count_calls", 1), run("fresh_process_targets:count_calls", 2)
    assert first["calls"] == [1] and second["calls"] == [2] and first["pid"] != second["pid"] != os.getpid()
    assert run("fresh_process_targets:raise_error", "n = 3 is too small") == {
        "status": "failed: ValueError: n = 3 is too small"
    }
    assert run("fresh_process_targets:die", 3) == {"status": "failed: the process ended with code 3 and no result"}
    started = time.monotonic()
    assert harness.in_fresh_process("fresh_process_targets:sleep", 30, timeout_s=1) == {
        "status": "failed: timed out after 1 s"
    }
    assert time.monotonic() - started < 10


def test_a_fresh_process_does_not_run_the_parents_main_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After Streamlit's AppTest, ``__main__`` is the app's page script; a child that ran it again ended with code 1
    and no result (CI, 2026-11-30: every point of the suite tests on that worker failed)."""
    from benchmarks import harness

    script = tmp_path / "page.py"
    script.write_text("raise SystemExit(1)\n")
    main = types.ModuleType("__main__")
    main.__file__ = str(script)
    monkeypatch.setitem(sys.modules, "__main__", main)
    result = harness.in_fresh_process("fresh_process_targets:count_calls", 5, timeout_s=60, preload=("torch",))
    assert result["calls"] == [5], result
    assert sys.modules["__main__"] is main


def test_a_suite_point_in_a_fresh_process_matches_the_same_point_in_this_one(tmp_path: Path) -> None:
    settings = suite.Settings(sizes=(128,), heads=2, max_repeats=1, time_budget_s=0.0)
    inputs, reference = tmp_path / "inputs.pt", tmp_path / "reference.pt"
    torch.save(suite.make_inputs(128, settings), inputs)
    common = {**settings.__dict__, "sizes": None, "n": 128, "inputs": str(inputs), "device": "cpu"}
    suite._spawn({**common, "entry": "sdpa", "params": {}, "reference": None, "save_reference": str(reference)})
    params = core.budget_params("performer", 128, 64, 0.5)
    job = {**common, "entry": "performer", "params": params, "reference": str(reference)}
    there, here = suite._spawn(job), suite.run_worker(job)
    assert "status" not in there and "status" not in here and there["repeats"] == 1  # a point without one is ok
    assert there["error"] == here["error"] and 0 < there["error"] < 1  # the same seeded draw
    assert there["peak_mib"] >= 0 and there["time_s"] > 0


def test_results_writer_prints_and_writes_json_markdown_and_csv(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from benchmarks import harness

    result = {
        "rows": [{"page": "Compare", "median_s": math.inf, "ratio": math.nan}],
        "machine": harness.machine_facts(),
    }
    paths = harness.write_results(tmp_path, "x", result, "| a |\n", csv_rows=(["page", "median_s"], result["rows"]))
    assert set(paths) == {"json", "md", "csv"} and "| a |" in capsys.readouterr().out
    stored = json.loads(paths["json"].read_text())  # strict JSON: no Infinity, no NaN
    assert stored["rows"][0]["median_s"] is None and stored["rows"][0]["ratio"] is None
    assert stored["machine"]["cpus"] >= 1 and len(stored["machine"]["load_average_at_end"]) == 3
    assert list(csv.DictReader(paths["csv"].open())) == [{"page": "Compare", "median_s": "inf"}]


def _expand(pattern: str) -> list[str]:
    """'a.{md,json}' -> ['a.md', 'a.json'] (one brace group at most)."""
    head, brace, rest = pattern.partition("{")
    if not brace:
        return [pattern]
    options, _, tail = rest.partition("}")
    return [head + option + tail for option in options.split(",")]


def test_the_catalogue_lists_every_benchmark_and_every_committed_table() -> None:
    import fnmatch
    import importlib
    import subprocess

    from benchmarks.__main__ import BENCHMARKS

    scripts = {
        f"benchmarks.{path.stem}"
        for path in (ROOT / "benchmarks").glob("*.py")
        if "def main(" in path.read_text() and path.stem != "__main__"
    }
    listed = {bench.module for bench in BENCHMARKS}
    assert scripts <= listed, scripts - listed
    for bench in BENCHMARKS:
        if bench.module.startswith("benchmarks."):
            assert callable(importlib.import_module(bench.module).main), bench.module
        assert bench.command.startswith(f"python -m {bench.module}")
    patterns = [p for bench in BENCHMARKS for part in bench.writes.split(", ") for p in _expand(part)]
    for path in (ROOT / "benchmarks" / "results").iterdir():
        assert any(fnmatch.fnmatch(path.name, p) for p in patterns), f"{path.name} is written by no benchmark"
    listing = subprocess.run(
        [sys.executable, "-m", "benchmarks"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert all(bench.command in listing and bench.writes in listing for bench in BENCHMARKS)


def test_no_benchmark_imports_the_tests() -> None:
    for path in (ROOT / "benchmarks").glob("*.py"):
        assert "from tests" not in path.read_text() and "import tests" not in path.read_text(), path.name


def test_the_ci_time_table_reads_the_checks_steps_and_its_slowest_files() -> None:
    from benchmarks import ci_time

    output = """==> installing nothing
Resolved 190 packages
==> ruff check: ruff check .
All checks passed!
==> ruff check passed (0 s)
==> pytest, parallel part: pytest_part parallel -n 2
============================= slowest durations =============================
95.50s call     tests/test_readable.py::test_a
20.25s setup    tests/test_readable.py::test_b
40.00s call     tests/test_fragments.py::test_c
==> pytest, parallel part passed (763 s)
==> mypy passed (70 s)
==> pytest, serial part: pytest_part serial
3.00s call     tests/test_heavy_links.py::test_d
==> pytest, serial part FAILED (356 s)
==> FAILED: pytest, serial part
==> .ci/run finished in 1130 s"""
    lines = [(float(i), line) for i, line in enumerate(output.splitlines())]
    figures = ci_time.read_log(lines)
    assert figures["setup_s"] == 2.0 and figures["total_s"] == 1130 and not figures["passed"]
    assert [(s["step"], s["seconds"]) for s in figures["steps"]] == [
        ("ruff check", 0), ("pytest, parallel part", 763), ("mypy", 70), ("pytest, serial part", 356),
    ]  # fmt: skip
    assert figures["test_seconds"] == {"pytest, parallel part": 155.8, "pytest, serial part": 3.0}
    assert figures["slowest_files"] == {
        "pytest, parallel part": [["tests/test_readable.py", 115.8], ["tests/test_fragments.py", 40.0]],
        "pytest, serial part": [["tests/test_heavy_links.py", 3.0]],
    }
    run = {"command": "python -m benchmarks.ci_time", "commit": "abc", "started_utc": "2026-11-29", "exit_status": 1}
    table = ci_time.markdown({**run, "machine": {"cpus": 2, "platform": "Linux"}, "figures": figures})
    assert "| **whole `.ci/run`** | **1130** |" in table and "pytest, serial part (FAILED) | 356" in table
    passing = ci_time.read_log([(0.0, "==> ruff check: x"), (1.0, "==> ruff check passed (1 s)"),
                                (2.0, "==> .ci/run finished in 2 s")])  # fmt: skip
    assert passing["passed"] and passing["setup_s"] == 0.0


def test_the_refresh_listing_adds_up_the_last_time_of_every_table() -> None:
    from benchmarks import refresh

    log = json.loads((ROOT / "benchmarks" / "results" / "refresh.json").read_text())
    assert set(log) == set(refresh.BY_NAME)  # every table has a last time
    total = sum(entry["seconds"] for entry in log.values())
    assert refresh.listing().endswith(f"add up to {total:.0f} s ({total / 60:.1f} min) for all {len(log)} tables")


def test_the_visit_cpu_table_shows_each_tree_and_the_browsers_share() -> None:
    from benchmarks import visit_cpu

    def measured(chromium: float, server: float) -> dict[str, float]:
        parts = {"renderer": chromium * 0.7, "gpu-process": chromium * 0.2, "other": chromium * 0.1}
        return {"wall_s": 1.5, **parts, "chromium": chromium, "server": server}

    result = {
        "trees": {"abc1234": "commit abc1234", "this tree": "the working tree"},
        "contexts": 3,
        "pages": {"Compare": {"abc1234": measured(12.0, 3.0), "this tree": measured(9.0, 3.0)}},
        "totals": {"abc1234": {"chromium": 12.0, "server": 3.0}, "this tree": {"chromium": 9.0, "server": 3.0}},
        "commit": "def5678",
        "machine": "2 CPU cores",
    }
    table = visit_cpu.markdown(result, "python -m benchmarks.visit_cpu --baseline abc1234")
    assert "| Compare | abc1234 | 1.50 | 12.00 (8.40 / 2.40 / 1.20) | 3.00 | 4.0× |" in table
    assert "| Compare | this tree | 1.50 | 9.00 (6.30 / 1.80 / 0.90) | 3.00 | 3.0× |" in table
    assert "- Chromium's CPU, this tree against abc1234: 0.75×." in table


def test_the_class_wave_table_shows_each_tree_and_the_ratios() -> None:
    from benchmarks import class_wave

    def medians(p95: float, cpu: float) -> dict[str, float]:
        return {
            "first_chart_p50_s": p95 / 2,
            "first_chart_p95_s": p95,
            "last_done_s": p95 + 0.5,
            "cpu_per_session_s": cpu,
            "rss_quiet_mb": 600.0,
        }

    result = {
        "trees": {"abc1234": "commit abc1234", "this tree": "the working tree"},
        "link": "Compare",
        "sessions": 40,
        "rounds": 5,
        "medians": {"abc1234": medians(8.0, 0.2), "this tree": medians(6.0, 0.15)},
        "errors": {"abc1234": 0, "this tree": 1},
        "commit": "def5678",
        "machine": "2 CPU cores",
    }
    table = class_wave.markdown(result, "python -m benchmarks.class_wave --baseline abc1234")
    assert "| abc1234 | 4.00 | 8.00 | 8.50 | 0.200 | 600 | 0 |" in table
    assert "| this tree | 3.00 | 6.00 | 6.50 | 0.150 | 600 | 1 |" in table
    assert "- first chart p95, this tree against abc1234: 0.75×." in table
    assert "- server CPU per session, this tree against abc1234: 0.75×." in table
    assert class_wave.percentile([5.0, 1.0, 3.0, 2.0, 4.0], 0.95) == 5.0
    assert class_wave.percentile([5.0, 1.0, 3.0, 2.0, 4.0], 0.5) == 3.0
