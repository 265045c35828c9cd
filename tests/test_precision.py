"""Every precision: half-precision inputs run in float32 inside (so hashes, SVDs and pseudo-inverses see the
same values as a float32 copy) and come back in their own dtype; float64 draws; a stable exact pseudo-inverse."""

from __future__ import annotations

import math

import pytest
import torch

import core
from core import metrics
from core.approximation import prepare_inputs
from core.approximators.common import PROJECTION_STREAM

HALF = (torch.float16, torch.bfloat16)
FAST = {"learned_kernel": {"steps": 5}, "rpca": {"iterations": 10}}


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def _rounded(dtype: torch.dtype, n: int = 64, d: int = 8) -> tuple[core.data.Inputs, core.data.Inputs]:
    """The same values in half precision and as a float32 copy."""
    x = core.data.clustered(n, d, clusters=4, spread=0.3, seed=2, heads=2)
    half = core.data.Inputs(x.q.to(dtype), x.k.to(dtype), x.v.to(dtype), x.labels)
    return half, core.data.Inputs(half.q.float(), half.k.float(), half.v.float(), x.labels)


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("method", sorted(core.methods()))
def test_half_precision_equals_the_float32_copy_rounded(method: str, dtype: torch.dtype) -> None:
    half, copy = _rounded(dtype)
    params = {**core.budget_params(method, 64, 8, 1 / 4), **FAST.get(method, {})}
    low = core.approximate(method, half.q, half.k, half.v, scale=3.0, seed=1, **params)
    ref = core.approximate(method, copy.q, copy.k, copy.v, scale=3.0, seed=1, **params)
    assert low.output.dtype == dtype and low.attention().dtype == dtype
    assert torch.equal(low.output, ref.output.to(dtype))
    assert torch.equal(low.attention(), ref.attention().to(dtype))


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("method", ["lsh", "scatterbrain"])
def test_hashed_support_and_error_do_not_change_with_precision(method: str, dtype: torch.dtype) -> None:
    half, copy = _rounded(dtype, n=256, d=16)
    params = core.budget_params(method, 256, 16, 1 / 8)
    low = core.approximate(method, half.q, half.k, half.v, scale=4.0, seed=3, **params)
    ref = core.approximate(method, copy.q, copy.k, copy.v, scale=4.0, seed=3, **params)
    assert torch.equal(low.parts["support"], ref.parts["support"])
    exact = torch.softmax(4.0 * copy.q.double() @ copy.k.double().transpose(-1, -2), dim=-1) @ copy.v.double()
    err_low = metrics.relative_output_error(low.output.double(), exact)
    err_ref = metrics.relative_output_error(ref.output.double(), exact)
    # Only the final rounding to half precision separates them (bfloat16 keeps 8 bits, float16 11).
    bits = 8 if dtype == torch.bfloat16 else 11
    assert float((err_low - err_ref).abs().max()) <= 2 * 2.0**-bits, (err_low, err_ref)


@pytest.mark.parametrize("beta", [0.001, 0.01, 1.0])
def test_nystrom_exact_pinv_in_float32_matches_its_float64_matrix(beta: float) -> None:
    """Near-uniform attention (small beta) makes A nearly rank one; the float32 pinv path drifted by 2e-3."""
    x = core.data.gaussian(256, 32, seed=0)
    params = {"landmarks": 32, "pinv": "exact"}
    r32 = core.approximate("nystrom", x.q, x.k, x.v, scale=beta, **params)
    r64 = core.approximate("nystrom", x.q.double(), x.k.double(), x.v.double(), scale=beta, **params)
    assert r32.output.dtype == torch.float32
    assert float((r32.attention().double() - r64.attention()).abs().max()) <= 1e-5
    # The output sums n = 256 such entries times N(0, 1) values.
    assert float((r32.output.double() - r64.output).abs().max()) <= 1e-4


def test_linformer_projection_is_a_float64_draw() -> None:
    x = core.data.gaussian(64, 8, seed=0, dtype=torch.float64)
    result = core.approximate("linformer", x.q, x.k, x.v, seed=5, rank=16)
    seed_key = prepare_inputs(x.q, x.k, x.v, None, 5).generator(PROJECTION_STREAM).initial_seed()
    draw = torch.randn(16, 64, generator=torch.Generator().manual_seed(seed_key), dtype=torch.float64)
    assert torch.equal(result.parts["projection"], draw / math.sqrt(64))
