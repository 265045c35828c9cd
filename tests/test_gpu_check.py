"""The GPU check (scripts/gpu-check.sh, benchmarks/gpu.py) rehearsed on the CPU, as CI runs it: every step runs
and writes the same tables as on a GPU host, marked as a CPU dry run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import types
from pathlib import Path

import psutil
import pytest
import torch

import core
from benchmarks import gpu
from ui import page_registry

ROOT = Path(__file__).resolve().parent.parent


BUDGET_S = 120
DONE = ("ok", "stopped at its limit", "not run: ")


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path, float]:
    out = tmp_path_factory.mktemp("gpu-check")
    started = time.monotonic()
    since = time.time()
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu-check.sh"), str(out), "--dry-run", "--budget", str(BUDGET_S)],
        capture_output=True,
        text=True,
        timeout=3 * BUDGET_S,
        env={**os.environ, "PYTHON": sys.executable},  # this environment's Python, wherever its venv is
    )
    wall_s = time.monotonic() - started
    time.sleep(1)
    # a step stopped at its limit leaves nothing running (the cluster step's Dask processes are in their own sessions)
    left = [
        p.info["cmdline"]
        for p in psutil.process_iter(["cmdline", "create_time", "cwd"])
        if (p.info["create_time"] or 0) >= since
        and p.info["cwd"] == str(ROOT)
        and any("distributed" in part for part in p.info["cmdline"] or [])
    ]
    assert not left, left
    return done, out, wall_s


def test_the_dry_run_keeps_its_budget_and_every_step_reports(
    dry_run: tuple[subprocess.CompletedProcess[str], Path, float],
) -> None:
    done, out, wall_s = dry_run
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert wall_s < BUDGET_S, (wall_s, done.stdout[-3000:])
    report = json.loads((out / "gpu_check_cpu_dry_run.json").read_text())
    assert list(report["steps"]) == list(gpu.STEPS)  # scaling right after facts
    assert all(step["status"].startswith(DONE) for step in report["steps"].values()), report["steps"]
    # the first steps finish inside their share even on a machine loaded by other jobs (seen at load average 7)
    assert all(report["steps"][name]["status"] == "ok" for name in ("facts", "scaling", "compare"))
    assert report["facts"]["dry_run"] is True and report["facts"]["device"] == "cpu"
    assert report["budget_s"] == BUDGET_S and report["seconds"] < BUDGET_S
    assert all(step["seconds"] <= step.get("limit_s", 0) + 1 for step in report["steps"].values()), report["steps"]


def test_the_dry_run_writes_the_gpu_tables_marked_as_cpu(
    dry_run: tuple[subprocess.CompletedProcess[str], Path, float],
) -> None:
    _, out, _ = dry_run
    assert {p.name for p in out.iterdir()} >= {
        "gpu_check_cpu_dry_run.md",
        "gpu_check_cpu_dry_run.json",
        "pytest_cpu_dry_run.log",
        "gpu_check.log",
    }
    text = (out / "gpu_check_cpu_dry_run.md").read_text()
    assert text.startswith("# GPU check: CPU dry run")
    assert "## Scaling (CPU dry run)" in text and "Budget 120 s, planned" in text
    report = json.loads((out / "gpu_check_cpu_dry_run.json").read_text())
    steps = report["steps"]
    rows = report["scaling_rows"]
    # every registered method and both peers have a row at every size and dtype, measured or with the reason
    for method in [*core.methods(), gpu.FLEX, gpu.FLA]:
        for dtype in ("float32", "bfloat16"):
            mine = [r for r in rows if r["method"] == method and r["dtype"] == dtype]
            assert mine, (method, dtype)
            assert all(r["status"].startswith(("ok", "not run: ")) for r in mine), mine
    # bfloat16 before float32; the oracles and the trained kernel last, at the smallest size only
    efficient = [r for r in rows if r["method"] not in gpu.REFERENCE_ONLY]
    assert [r["dtype"] for r in efficient] == sorted((r["dtype"] for r in efficient), key=gpu.DTYPES.index)
    slow = [i for i, r in enumerate(rows) if r["method"] in gpu.REFERENCE_ONLY]
    assert slow and min(slow) > max(i for i, r in enumerate(rows) if r["method"] not in gpu.REFERENCE_ONLY)
    assert {rows[i]["n"] for i in slow} == {min(r["n"] for r in rows)}
    assert all(r["status"] == "ok" for r in rows if r["method"].startswith("sdpa"))
    measured = [r for r in rows if r["status"] == "ok" and r["method"] == "performer"]
    assert measured and all(r["seconds"] > 0 and r["error"] < 2 for r in measured)
    # FlexAttention's window of 256 keys is exact attention at n = 128 (every key inside it); fla is not here
    flex = [r for r in rows if r["method"] == gpu.FLEX and r["status"] == "ok" and r["n"] == 128]
    assert flex and all(r["error"] < 1e-3 for r in flex), flex
    fla = [r for r in rows if r["method"] == gpu.FLA]
    assert fla and all(r["status"].startswith("not run: flash-linear-attention") for r in fla), fla
    assert report["compare"]["warm_total_s"] > 0
    # the steps that may meet their limit on a loaded machine: what they finished is checked
    if steps["tests"]["status"] == "ok":
        tests = report["tests"]
        assert tests["cuda_tests"]["counts"].get("failed", 0) == 0
        assert tests["engine_on_device"]["counts"].get("passed", 0) > 0
        assert tests["engine_on_device"]["counts"].get("failed", 0) == 0
    else:  # stopped at its limit: the parts it ran passed, and a part it left out says why
        for part in (report.get("tests") or {}).values():
            if isinstance(part, dict) and "counts" in part:
                assert part["counts"].get("failed", 0) == 0, part
            elif isinstance(part, dict):
                assert part["status"] == gpu.TESTS_CUT, part
    if steps["cluster"]["status"] == "ok":
        assert "## Compare's jobs on a GPU worker (Dask, loopback)" in text
        jobs_on_worker = report["cluster"]["rows"]
        assert [r["method"] for r in jobs_on_worker] == list(report["compare"]["methods"])
        assert all(r["max_metric_difference"] < 1e-6 for r in jobs_on_worker), jobs_on_worker
    if steps["pages"]["status"] == "ok":
        assert "## Pages through AppTest" in text
        assert [row["page"] for row in report["pages"]] == [p.file for p in page_registry.ALL_PAGES]
        assert all(row["status"] == "ok" for row in report["pages"]), report["pages"]
    else:
        assert all(row["status"] == "ok" for row in report.get("pages", []) if "seconds" in row), report["pages"]


@pytest.mark.serial  # times the stop in flight against the step's limit
def test_a_step_past_its_limit_is_stopped_in_flight_and_says_what_it_reached(tmp_path: Path) -> None:
    started = time.monotonic()
    report = gpu.run(tmp_path, dry_run=True, steps=("scaling",), limits={"scaling": 4})
    assert time.monotonic() - started < 30  # the fork server's imports, then 4 s
    step = report["steps"]["scaling"]
    assert step["status"].startswith("stopped at its limit of 4 s"), step
    assert step["seconds"] < 4.5
    rows = report["scaling_rows"]
    planned = gpu.planned_rows(gpu.Plan.make(True))
    assert sorted((r.method, r.n, r.dtype) for r in rows) == sorted(planned)  # every row, reached or not
    assert any(r.status.startswith("ok") for r in rows)
    assert any(r.status.startswith("not run: the step's limit of 4 s came first") for r in rows)
    assert not any(r.status == "measuring" for r in rows)
    text = (tmp_path / "gpu_check_cpu_dry_run.md").read_text()
    assert "| scaling | stopped at its limit of 4 s" in text


def test_a_budget_shares_the_time_by_what_each_step_takes_and_drops_what_cannot_fit() -> None:
    plan = gpu.Plan.make(True)
    assert gpu.plan_limits(plan, gpu.STEPS, None) == {s: plan.limits_s[s] for s in gpu.STEPS}
    roomy = gpu.plan_limits(plan, gpu.STEPS, 1000)
    assert roomy == {s: plan.limits_s[s] for s in gpu.STEPS}  # every limit fits: each step gets its own
    tight = gpu.plan_limits(plan, gpu.STEPS, 120)
    assert list(tight) == list(gpu.STEPS)
    assert all(isinstance(v, float) and plan.least_s[s] <= v <= plan.limits_s[s] for s, v in tight.items())
    assert sum(tight.values()) == pytest.approx(120 - gpu.STARTUP_S)
    assert tight["pages"] > tight["compare"]  # shared by the time each step takes
    short = gpu.plan_limits(plan, gpu.STEPS, 45)
    assert sum(v for v in short.values() if isinstance(v, float)) <= 45 - gpu.STARTUP_S + 1e-6
    dropped = [s for s, v in short.items() if isinstance(v, str)]
    assert dropped and all("not run: --budget 45 s leaves it" in short[s] for s in dropped)
    assert dropped == list(gpu.STEPS)[-len(dropped) :]  # the last in order go first


def test_a_step_gets_what_earlier_steps_left_and_shares_what_they_overran() -> None:
    # A dry run on 2026-11-30: the start took 11 s against the 7 s kept for it, and facts (planned 4.1 s, 101 s for
    # the steps after it) got 0 s and did not run.
    assert gpu.step_limit(4.1, 101.0, 101.0, 20.0) == pytest.approx(4.1 * 101 / 105.1)
    assert gpu.step_limit(4.1, 101.0, 101.0, 20.0) >= gpu.Plan.make(True).least_s["facts"]
    assert gpu.step_limit(4.1, 101.0, 110.0, 20.0) == pytest.approx(9.0)  # time left over goes to this step
    assert gpu.step_limit(4.1, 101.0, 200.0, 20.0) == 20.0  # up to its cap
    assert gpu.step_limit(4.1, 101.0, -3.0, 20.0) == 0.0  # nothing left: nothing, then "not run"


def test_the_learned_kernel_row_fits_its_training_limit_at_8_heads() -> None:
    from core.approximators import learned_kernel

    budgeted = core.budget_params("learned_kernel", 1024, 64, 256 / 1024)
    assert budgeted["features"] * 8 * 256 * 1024 > learned_kernel.MAX_TRAIN_WORK  # run 2's failure, by construction
    fitted = gpu.fit_training(budgeted, 1024, 8)
    assert fitted["features"] == 64
    inputs = types.SimpleNamespace(batch=8, n=1024, d=64)
    learned_kernel._check_train_size(inputs, fitted["features"])  # accepted
    with pytest.raises(core.errors.ParameterError):
        learned_kernel._check_train_size(inputs, budgeted["features"])
    assert gpu.fit_training(budgeted, 128, 2) == budgeted  # small inputs keep the budget's features


@pytest.mark.parametrize(
    ("name", "tag"),
    [
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("NVIDIA H200", "h200"),
        ("NVIDIA A100-SXM4-80GB", "a100"),
        ("NVIDIA L4", "l4"),
        ("NVIDIA GeForce RTX 4090", "nvidia_geforce_rtx_4090"),
    ],
)
def test_tables_are_named_by_gpu_model(name: str, tag: str) -> None:
    assert gpu.gpu_tag({"gpu": name, "dry_run": False}) == tag
    assert gpu.gpu_tag({"gpu": name, "dry_run": True}) == "cpu_dry_run"


def test_the_error_reference_is_exact_attention_in_blocks(random_qkv) -> None:
    q, k, v = random_qkv((3,), 300, 16, seed=2)
    reference = torch.softmax(2.0 * q @ k.transpose(-1, -2), dim=-1) @ v
    blocks = gpu.exact_output(q, k, v, 2.0, max_scores=3 * 300 * 64)  # blocks of 64 queries, the last one short
    assert blocks.dtype == torch.float32
    torch.testing.assert_close(blocks, reference.float(), rtol=1e-4, atol=1e-5)  # float32 against float64


def test_the_cuda_timer_falls_back_to_the_wall_clock_with_its_repeats() -> None:
    calls = []
    seconds, repeats = gpu.warm_median(lambda: calls.append(1), torch.device("cpu"), budget_s=0.0, max_repeats=5)
    assert repeats == 3 and len(calls) == 4 and seconds >= 0  # one warm-up, then at least three timed


def test_the_facts_step_reads_package_versions_without_importing_them() -> None:
    """Importing streamlit and transformers took the facts step past its 3 s limit on a loaded CI machine: their
    versions come from the installed metadata, the same as each module's own __version__."""
    probe = (
        "import sys, json\n"
        "from benchmarks import gpu\n"
        "before = set(sys.modules)\n"
        "info = gpu.facts(gpu.Plan.make(True))\n"
        "print(json.dumps({'imported': sorted(set(sys.modules) - before), 'info': info}))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert not {"streamlit", "transformers", "plotly", "diskcache"} & set(seen["imported"]), seen["imported"]
    import numpy
    import streamlit
    import transformers

    assert seen["info"]["numpy"] == numpy.__version__
    assert seen["info"]["streamlit"] == streamlit.__version__
    assert seen["info"]["transformers"] == transformers.__version__
