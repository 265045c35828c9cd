"""The GPU check (scripts/gpu-check.sh, benchmarks/gpu.py) rehearsed on the CPU, as CI runs it: every step runs
and writes the same tables as on a GPU host, marked as a CPU dry run."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import torch

import core
from benchmarks import gpu
from ui import page_registry

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path_factory.mktemp("gpu-check")
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu-check.sh"), str(out), "--dry-run"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    return done, out


def test_the_dry_run_passes_every_step(dry_run: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    done, out = dry_run
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    report = json.loads((out / "gpu_check_cpu_dry_run.json").read_text())
    assert set(report["steps"]) == set(gpu.STEPS)
    assert all(step["status"] == "ok" for step in report["steps"].values()), report["steps"]
    assert report["facts"]["dry_run"] is True and report["facts"]["device"] == "cpu"


def test_the_dry_run_writes_the_gpu_tables_marked_as_cpu(
    dry_run: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    _, out = dry_run
    assert {p.name for p in out.iterdir()} >= {
        "gpu_check_cpu_dry_run.md",
        "gpu_check_cpu_dry_run.json",
        "pytest_cpu_dry_run.log",
        "gpu_check.log",
    }
    text = (out / "gpu_check_cpu_dry_run.md").read_text()
    assert text.startswith("# GPU check: CPU dry run")
    assert "## Scaling (CPU dry run)" in text and "## Pages through AppTest" in text
    assert "## Compare's jobs on a GPU worker (Dask, loopback)" in text
    report = json.loads((out / "gpu_check_cpu_dry_run.json").read_text())
    rows = report["scaling_rows"]
    # every registered method has a row at every size and dtype, measured or with the reason it was not
    for method in core.methods():
        for dtype in ("float32", "bfloat16"):
            mine = [r for r in rows if r["method"] == method and r["dtype"] == dtype]
            assert mine, (method, dtype)
            assert all(r["status"].startswith(("ok", "not run: ")) for r in mine), mine
    # the oracles and the trained kernel come last, at the smallest size only: they cannot starve the others
    slow = [i for i, r in enumerate(rows) if r["method"] in gpu.REFERENCE_ONLY]
    assert slow and min(slow) > max(i for i, r in enumerate(rows) if r["method"] not in gpu.REFERENCE_ONLY)
    assert {rows[i]["n"] for i in slow} == {min(r["n"] for r in rows)}
    assert all(r["status"] == "ok" for r in rows if r["method"].startswith("sdpa"))
    measured = [r for r in rows if r["status"] == "ok" and r["method"] == "performer"]
    assert measured and all(r["seconds"] > 0 and r["error"] < 2 for r in measured)
    # the cluster step: each of Compare's methods computed on the worker gives the numbers computed here
    jobs_on_worker = report["cluster"]["rows"]
    assert [r["method"] for r in jobs_on_worker] == list(report["compare"]["methods"])
    assert all(r["max_metric_difference"] < 1e-6 for r in jobs_on_worker), jobs_on_worker
    tests = report["tests"]
    assert tests["cuda_tests"]["counts"].get("failed", 0) == 0
    assert tests["engine_on_device"]["counts"].get("passed", 0) > 0
    assert tests["engine_on_device"]["counts"].get("failed", 0) == 0
    assert [row["page"] for row in report["pages"]] == [p.file for p in page_registry.ALL_PAGES]
    assert all(row["status"] == "ok" for row in report["pages"]), report["pages"]
    assert report["compare"]["warm_total_s"] > 0


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
