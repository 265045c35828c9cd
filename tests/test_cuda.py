"""The GPU path: every method runs on CUDA, keeps its outputs and parts on the device, and matches its CPU result
for the same seed. Skipped (cleanly, as a whole module) where CUDA is absent."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import core
from core import profiling, registry

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

N, D, HEADS = 256, 32, 2
SCALE = 2.0


def _inputs(dtype: torch.dtype) -> core.data.Inputs:
    return core.data.clustered(N, D, 8, 0.3, 0, heads=HEADS, dtype=dtype)


def _params(method: str) -> dict[str, Any]:
    return core.budget_params(method, N, D, 1 / 8)


@pytest.mark.parametrize("method", list(registry.methods()))
def test_method_on_cuda_matches_cpu_for_the_same_seed(method: str) -> None:
    """float64 on both devices: random draws are made on the CPU and moved, so only rounding may differ."""
    x = _inputs(torch.float64)
    params = _params(method)
    cpu = core.approximate(method, x.q, x.k, x.v, scale=SCALE, seed=3, **params)
    g = x.to("cuda")
    gpu = core.approximate(method, g.q, g.k, g.v, scale=SCALE, seed=3, **params)
    assert gpu.output.device.type == "cuda"
    torch.testing.assert_close(gpu.output.cpu(), cpu.output, rtol=1e-6, atol=1e-8)
    dense = gpu.attention()
    assert dense.device.type == "cuda"
    torch.testing.assert_close(dense.cpu(), cpu.attention(), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("method", list(registry.methods()))
def test_parts_stay_on_the_device(method: str) -> None:
    """Tensor-valued parts (the dense pieces of the split views) stay on the GPU. Structured explanatory parts
    (VCC's trees and compression matrices: lists of small per-element objects) are built on the CPU by design."""
    x = _inputs(torch.float32).to("cuda")
    result = core.approximate(method, x.q, x.k, x.v, scale=SCALE, seed=0, **_params(method))
    tensors = {name: result.parts[name] for name in result.parts}
    tensors = {name: value for name, value in tensors.items() if isinstance(value, torch.Tensor)}
    for name, value in tensors.items():
        assert value.device.type == "cuda", f"{method}.parts[{name!r}] is on {value.device}"


@pytest.mark.parametrize("method", ["performer", "lsh", "scatterbrain", "nystrom", "linformer", "local"])
def test_float32_cuda_output_is_close_to_cpu(method: str) -> None:
    if method not in registry.methods():
        pytest.fail(f"{method} is not registered")
    x = _inputs(torch.float32)
    params = _params(method)
    cpu = core.approximate(method, x.q, x.k, x.v, scale=SCALE, seed=1, **params).output
    g = x.to("cuda")
    gpu = core.approximate(method, g.q, g.k, g.v, scale=SCALE, seed=1, **params).output
    err = (gpu.cpu() - cpu).norm() / cpu.norm()
    assert err < 1e-3, err


def test_cuda_memory_and_scaling_helpers() -> None:
    device = torch.device("cuda")
    _, peak = profiling.measure_peak(lambda: torch.ones(2**24, device=device).sum(), device)
    assert peak.bytes is not None and peak.bytes >= 2**26  # 64 MiB of float32
    points = profiling.scaling_run(["exact", "performer"], [256, 512], heads=2, device=device, total_limit_s=60)
    assert all(p.status == "ok" and p.seconds > 0 for p in points)


def test_suite_worker_runs_on_cuda(tmp_path: Any) -> None:
    from benchmarks import suite

    settings = suite.Settings(sizes=(256,), heads=2, device="cuda", time_budget_s=0.0, max_repeats=1)
    inputs = tmp_path / "inputs.pt"
    torch.save(suite.make_inputs(256, settings), inputs)
    common = {**settings.__dict__, "sizes": None, "n": 256, "inputs": str(inputs), "device": "cuda"}
    reference = tmp_path / "reference.pt"
    sdpa = suite.run_worker(
        {**common, "entry": "sdpa", "params": {}, "reference": None, "save_reference": str(reference)}
    )
    assert sdpa["time_s"] > 0 and sdpa["memory_how"].startswith("cuda")
    params = core.budget_params("performer", 256, 64, 1.0)
    ours = suite.run_worker({**common, "entry": "performer", "params": params, "reference": str(reference)})
    assert ours["time_s"] > 0 and 0 <= ours["error"] < 2
