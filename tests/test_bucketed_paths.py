"""The bucketed methods (lsh, local, scatterbrain): peak memory within 1.5x of the cost model, the batched path
(rounds and heads in one batch dimension, memory-bounded groups of blocks) equal to a per-round reference, and
the half-native path within a stated error of the float32 copy."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from ci_env import unavailable

import core
from core.approximators import common

REPO = Path(__file__).resolve().parent.parent
BUCKETED = ["lsh", "local", "scatterbrain"]
MEMORY_RATIO_LIMIT = 1.5

MEMORY_SCRIPT = r"""
import json, sys
import torch
torch.set_num_threads(1)
import core
from core.profiling import measure_peak, model_cost

method, n = sys.argv[1], int(sys.argv[2])
params = core.budget_params(method, n, 64, 1 / 8)
x = core.data.clustered(n, 64, n // 64, 0.3, 0, heads=1)

def call():
    with torch.inference_mode():
        return core.approximate(method, x.q, x.k, x.v, scale=1 / 0.3, seed=0, **params).output

call()  # warm-up
peaks = [measure_peak(call, "cpu")[1].bytes for _ in range(3)]
print(json.dumps({"peaks": peaks, "model": model_cost(method, n, 64, 1, params).memory * 4}))
"""


@pytest.fixture(scope="module")
def peak_ratios() -> dict[str, float]:
    """Peak RSS growth of one call over the cost model's bytes at n = 4096, each method in a fresh interpreter.

    The smallest of three measurements: RSS noise (heap pages a neighbour left) only ever adds."""
    from core import profiling

    if not profiling.cpu_peak_supported():
        unavailable("no resident-set peak on this OS")
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    ratios = {}
    for method in BUCKETED:
        done = subprocess.run(
            [sys.executable, "-c", MEMORY_SCRIPT, method, "4096"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        measured = json.loads(done.stdout.strip().splitlines()[-1])
        ratios[method] = min(measured["peaks"]) / measured["model"]
    return ratios


@pytest.mark.parametrize("method", BUCKETED)
def test_peak_memory_is_within_the_cost_model(method: str, peak_ratios: dict[str, float]) -> None:
    assert peak_ratios[method] <= MEMORY_RATIO_LIMIT, peak_ratios


# ------------------------------------------------------------------ batched path = per-round reference


def per_round_lsh(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, beta: float, chunks: torch.Tensor) -> torch.Tensor:
    """The old path, one round and one batch element at a time: softmax inside each round's chunks, a pair only in
    the first round that finds it, rounds mixed by the softmax of their log-sum-exps. chunks: (B, R, 2, n)."""
    outputs = []
    for b in range(q.shape[0]):
        logits = beta * q[b].double() @ k[b].double().T
        seen = torch.zeros_like(logits, dtype=torch.bool)
        round_outputs, round_lses = [], []
        for r in range(chunks.shape[1]):
            q_chunk, k_chunk = chunks[b, r, 0], chunks[b, r, 1]
            support = (q_chunk[:, None] == k_chunk[None, :]) & ~seen
            seen |= q_chunk[:, None] == k_chunk[None, :]
            masked = logits.masked_fill(~support, -math.inf)
            lse = torch.logsumexp(masked, dim=-1, keepdim=True)
            round_outputs.append(torch.nan_to_num(torch.exp(masked - lse)) @ v[b].double())
            round_lses.append(lse)
        weights = torch.softmax(torch.stack(round_lses), dim=0)
        outputs.append((weights * torch.stack(round_outputs)).sum(0))
    return torch.stack(outputs)


@pytest.mark.parametrize("n", [203, 256])
@pytest.mark.parametrize(("rounds", "buckets"), [(1, 5), (3, 7), (4, 16)])
def test_batched_lsh_equals_the_per_round_reference(
    n: int, rounds: int, buckets: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Groups of one block, of a few blocks across rounds and heads, and one group for everything all give the
    per-round result; with padding (n = 203) and without (256 = 16 chunks of 16, where a round's first blocks have
    no mask)."""
    x = core.data.clustered(n=n, d=16, clusters=6, spread=0.3, seed=2, heads=3)
    beta = 2.5
    results = []
    for group_bytes in (1, 90_000, 2**30):
        monkeypatch.setattr(common, "MIN_GROUP_BYTES", group_bytes)
        results.append(core.approximate("lsh", x.q, x.k, x.v, scale=beta, seed=4, rounds=rounds, buckets=buckets))
    reference = per_round_lsh(x.q, x.k, x.v, beta, results[0].parts["chunks"])
    for result in results:
        torch.testing.assert_close(result.output.double(), reference, rtol=1e-5, atol=1e-6)
    for result in results[1:]:
        torch.testing.assert_close(result.output, results[0].output, rtol=0, atol=1e-6)


@pytest.mark.parametrize("method", ["lsh", "scatterbrain"])
@pytest.mark.parametrize("n", [203, 256])
@pytest.mark.parametrize("causal", [False, True])
def test_shared_queries_and_keys_hash_once_with_the_same_result(
    method: str, n: int, causal: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keys equal to the queries (self-attention, Process 1) are hashed once and gathered once; the result must be
    the one of hashing and gathering them separately, to the bit, supports included."""
    from core.approximators import lsh

    x = core.data.clustered(n=n, d=16, clusters=6, spread=0.3, seed=5, heads=2)
    q, k = x.q, x.q.clone()  # equal values in separate tensors, as a loaded input has them
    params = {"rounds": 3, "buckets": 8, "causal": causal}
    if method == "scatterbrain":
        params["features"] = 16
    plans: list[bool] = []
    real_hash_plan = lsh.hash_plan

    def recording(*args: object) -> lsh.HashPlan:
        plan = real_hash_plan(*args)  # type: ignore[arg-type]
        plans.append(plan.shared)
        return plan

    monkeypatch.setattr(lsh, "hash_plan", recording)
    monkeypatch.setattr("core.approximators.scatterbrain.hash_plan", recording)
    once = core.approximate(method, q, k, x.v, scale=3.0, seed=2, **params)
    assert plans == [True]
    monkeypatch.setattr(lsh, "same_values", lambda a, b: False)
    separately = core.approximate(method, q, k, x.v, scale=3.0, seed=2, **params)
    assert plans == [True, False]
    assert torch.equal(once.output, separately.output)
    assert torch.equal(once.parts["support"], separately.parts["support"])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("n", [203, 256])
@pytest.mark.parametrize(("rounds", "buckets"), [(1, 4), (2, 8), (4, 16)])
def test_the_fused_cpu_path_equals_the_element_wise_path(
    dtype: torch.dtype, n: int, rounds: int, buckets: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LSH's fused CPU kernel (one call per group, an additive mask) gives the element-wise path's output to float
    precision: with padding, with rows whose every pair an earlier round took, and with a scale per head."""
    from core.approximators import lsh

    x = core.data.clustered(n=n, d=16, clusters=6, spread=0.3, seed=3, heads=3, dtype=dtype)
    scales = [2.5, torch.tensor([0.5, 3.0, 12.0])]
    calls: list[int] = []
    real_fused = lsh.fused_block_attention
    monkeypatch.setattr(lsh, "fused_block_attention", lambda *a: calls.append(1) or real_fused(*a))
    params = {"seed": 6, "rounds": rounds, "buckets": buckets}
    fused = [core.approximate("lsh", x.q, x.k, x.v, scale=s, **params) for s in scales]
    assert calls
    monkeypatch.setattr(lsh, "fused_attention_available", lambda inputs: False)
    calls.clear()
    element_wise = [core.approximate("lsh", x.q, x.k, x.v, scale=s, **params) for s in scales]
    assert not calls
    tolerance = {"rtol": 1e-12, "atol": 1e-12} if dtype == torch.float64 else {"rtol": 1e-5, "atol": 1e-5}
    for a, b in zip(fused, element_wise, strict=True):
        torch.testing.assert_close(a.output, b.output, **tolerance)


def test_the_angular_hash_is_the_argmax_of_the_concatenation_ties_and_zero_rows_included() -> None:
    """``concatenated_argmax_`` must equal Reformer's ``cat([x, -x]).argmax(-1)`` exactly, where ties decide too."""
    from core.approximators.lsh import concatenated_argmax_

    x = torch.randn(600, 32, generator=torch.Generator().manual_seed(0))
    x[::7, 3] = x[::7, 20] = 9.0  # a tie of two largest entries: the first index wins
    x[1::7, 4] = -9.0
    x[1::7, 2] = 9.0  # a tie between +a and -a: the half of x, which comes first in the concatenation
    x[2::7, 9] = x[2::7, 1] = -9.0  # a tie of two smallest entries: the first of them, in the second half
    x[::11] = 0.0  # an all-zero row (a zero vector's hash): index 0
    expected = torch.cat([x, -x], dim=-1).argmax(dim=-1)
    found = concatenated_argmax_(x.clone())
    assert torch.equal(found, expected)
    assert found[7] == 3 and found[8] == 2 and found[9] == 32 + 1 and found[11] == 0


@pytest.mark.parametrize("support", [{"support": "lsh", "rounds": 3, "buckets": 6}, {"support": "local", "window": 9}])
def test_batched_scatterbrain_equals_its_dense_matrix(support: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """The output path (groups of blocks, running references) applies the method's dense matrix to V."""
    x = core.data.clustered(n=150, d=16, clusters=6, spread=0.3, seed=3, heads=2, dtype=torch.float64)
    for group_bytes in (1, 2**30):
        monkeypatch.setattr(common, "MIN_GROUP_BYTES", group_bytes)
        sb = core.approximate("scatterbrain", x.q, x.k, x.v, scale=3.0, seed=1, features=16, **support)
        torch.testing.assert_close(sb.output, sb.attention() @ x.v, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("window", [0, 4, 40, 149])
def test_batched_local_equals_the_masked_softmax(window: int, monkeypatch: pytest.MonkeyPatch) -> None:
    x = core.data.clustered(n=150, d=16, clusters=6, spread=0.3, seed=3, heads=2, dtype=torch.float64)
    betas = torch.tensor([0.5, 4.0])  # one scale per head: the path that scales q before SDPA
    pos = torch.arange(150)
    band = (pos[:, None] - pos[None, :]).abs() <= window
    for group_bytes in (1, 2**30):
        monkeypatch.setattr(common, "MIN_GROUP_BYTES", group_bytes)
        for scale in (2.0, betas):
            result = core.approximate("local", x.q, x.k, x.v, scale=scale, window=window)
            beta = torch.as_tensor(scale, dtype=torch.float64).reshape(-1, 1, 1)
            logits = (beta * x.q @ x.k.transpose(-1, -2)).masked_fill(~band, -math.inf)
            torch.testing.assert_close(result.output, torch.softmax(logits, -1) @ x.v, rtol=1e-10, atol=1e-12)


# ------------------------------------------------------------------ half precision

# Relative output error against the float32 copy, in units of the dtype's unit roundoff (bfloat16 2^-8, float16
# 2^-11): lsh showed 1.7 at n = 1024 (clustered, 1/8 budget, tau 0.3), local 0.43 (the output's own rounding).
HALF_ERROR = {torch.bfloat16: 3 * 2.0**-8, torch.float16: 3 * 2.0**-11}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("method", BUCKETED)
def test_half_native_path_is_close_to_the_float32_copy(method: str, dtype: torch.dtype) -> None:
    assert core.methods()[method].half_native
    n = 512
    x = core.data.clustered(n, 64, n // 64, 0.3, 0, heads=2)
    q, k, v = (t.to(dtype) for t in (x.q, x.k, x.v))
    params = core.budget_params(method, n, 64, 1 / 8)
    low = core.approximate(method, q, k, v, scale=1 / 0.3, seed=0, **params)
    ref = core.approximate(method, q.float(), k.float(), v.float(), scale=1 / 0.3, seed=0, **params)
    assert low.output.dtype == dtype and bool(torch.isfinite(low.output).all())
    error = float((low.output.float() - ref.output).norm() / ref.output.norm())
    assert error <= HALF_ERROR[dtype], error
    if method != "local":
        assert torch.equal(low.parts["support"], ref.parts["support"])


def test_half_inputs_stay_half_inside(monkeypatch: pytest.MonkeyPatch) -> None:
    """The score products see the input dtype (not a float32 upcast): the half-native path is taken."""
    seen: list[torch.dtype] = []
    real_bmm = torch.bmm
    monkeypatch.setattr(torch, "bmm", lambda a, b, **kw: seen.append(a.dtype) or real_bmm(a, b, **kw))
    x = core.data.clustered(128, 16, 4, 0.3, 0)
    q, k, v = (t.to(torch.bfloat16) for t in (x.q, x.k, x.v))
    core.approximate("lsh", q, k, v, buckets=4)
    assert seen and set(seen) == {torch.bfloat16}


@pytest.mark.parametrize("dim", [0, 1])
def test_repeated_rows_are_added_level_by_level_in_index_order(dim: int) -> None:
    """The GPU path of index_add_in_order_ (used by scatterbrain's rounds and Nystrom's segments) adds repeats in
    index order: on a CPU that is index_add_'s own order, so the two agree bit for bit."""
    from core.approximators.common import index_add_by_levels_

    generator = torch.Generator().manual_seed(3)
    index = torch.randint(0, 7, (200,), generator=generator)
    shape = (200, 5) if dim == 0 else (3, 200, 5)
    values = torch.randn(*shape, generator=generator) * torch.logspace(-6, 6, 200).reshape(
        (200, 1) if dim == 0 else (1, 200, 1)
    )
    target_shape = (7, 5) if dim == 0 else (3, 7, 5)
    expected = torch.zeros(target_shape).index_add_(dim, index, values)
    levels = index_add_by_levels_(torch.zeros(target_shape), dim, index, values)
    assert torch.equal(levels, expected)
    assert not torch.equal(torch.zeros(target_shape).index_add_(dim, index.flip(0), values.flip(dim)), expected)
