"""Every precision. Half-precision inputs come back in their own dtype. A method that is not half-native
(``MethodSpec.half_native``) runs them in float32 inside, so hashes, SVDs and pseudo-inverses see the same values as
a float32 copy and the output is that copy's output rounded; a half-native method computes in half precision, within
its stated error (``core.approximation.HALF_ERROR_FACTOR``), and still hashes in float32. Float64 draws; a stable
exact pseudo-inverse."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

import core
from core import metrics, scrub, sparse_lowrank, sweeps, vcc_study
from core.approximation import HALF_ERROR_FACTOR, UNIT_ROUNDOFF, half_error_bound, prepare_inputs
from core.approximators.common import PROJECTION_STREAM

HALF = (torch.float16, torch.bfloat16)
FAST = {"learned_kernel": {"steps": 5}, "rpca": {"iterations": 10}}
# Read when the tests are collected, so each method is tested by what its flag says now.
HALF_NATIVE = sorted(name for name, spec in core.methods().items() if spec.half_native)
UPCAST = sorted(name for name, spec in core.methods().items() if not spec.half_native)


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def _rounded(dtype: torch.dtype, n: int = 64, d: int = 8) -> tuple[core.data.Inputs, core.data.Inputs]:
    """The same values in half precision and as a float32 copy."""
    x = core.data.clustered(n, d, clusters=4, spread=0.3, seed=2, heads=2)
    half = core.data.Inputs(x.q.to(dtype), x.k.to(dtype), x.v.to(dtype), x.labels)
    return half, core.data.Inputs(half.q.float(), half.k.float(), half.v.float(), x.labels)


def _half_and_float32(method: str, dtype: torch.dtype, n: int) -> tuple[core.Approximation, core.Approximation]:
    """``method`` on half-precision values and on their float32 copy (budget 1/4, scale 3, seed 1)."""
    half, copy = _rounded(dtype, n=n, d=16 if n > 64 else 8)
    params = {**core.budget_params(method, n, half.q.shape[-1], 1 / 4), **FAST.get(method, {})}
    low = core.approximate(method, half.q, half.k, half.v, scale=3.0, seed=1, **params)
    ref = core.approximate(method, copy.q, copy.k, copy.v, scale=3.0, seed=1, **params)
    return low, ref


def _assert_in_dtype(result: core.Approximation, dtype: torch.dtype) -> None:
    assert result.output.dtype == dtype and result.attention().dtype == dtype
    for name, part in result.parts.items():
        pieces = part if isinstance(part, list) else [part]
        for piece in pieces:
            if isinstance(piece, torch.Tensor) and piece.is_floating_point():
                assert piece.dtype == dtype, (name, piece.dtype)


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("method", UPCAST)
def test_half_precision_equals_the_float32_copy_rounded(method: str, dtype: torch.dtype) -> None:
    low, ref = _half_and_float32(method, dtype, n=64)
    _assert_in_dtype(low, dtype)
    assert torch.equal(low.output, ref.output.to(dtype))
    assert torch.equal(low.attention(), ref.attention().to(dtype))


def test_every_half_native_method_states_its_error_bound() -> None:
    assert "exact" in HALF_NATIVE
    assert set(HALF_NATIVE) <= set(HALF_ERROR_FACTOR), set(HALF_NATIVE) - set(HALF_ERROR_FACTOR)
    # Small multiples of the unit roundoff: a looser bound would say the method is not safe in half precision.
    assert all(0 < factor <= 8 for factor in HALF_ERROR_FACTOR.values()), HALF_ERROR_FACTOR


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("method", HALF_NATIVE)
def test_half_native_error_against_the_float32_copy_is_within_its_bound(method: str, dtype: torch.dtype) -> None:
    low, ref = _half_and_float32(method, dtype, n=256)
    _assert_in_dtype(low, dtype)
    error = float(metrics.relative_output_error(low.output.double(), ref.output.double()).max())
    assert error <= half_error_bound(method, dtype), (error, half_error_bound(method, dtype))


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("method", HALF_NATIVE)
def test_half_native_methods_compute_in_half_precision(method: str, dtype: torch.dtype) -> None:
    """Not the float32 result rounded: an upcast reintroduced inside the method or the engine fails here."""
    low, ref = _half_and_float32(method, dtype, n=256)
    assert not torch.equal(low.output, ref.output.to(dtype))


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_exact_in_half_precision_keeps_float32_softmax_statistics(dtype: torch.dtype) -> None:
    """Its dense view is the float32 softmax of the same values, rounded once; a temperature sweep (a tensor scale)
    runs in the input's dtype too."""
    half, copy = _rounded(dtype)
    low = core.approximate("exact", half.q, half.k, half.v, scale=3.0)
    ref = core.approximate("exact", copy.q, copy.k, copy.v, scale=3.0)
    assert torch.equal(low.attention(), ref.attention().to(dtype))
    betas = torch.tensor([1.0, 3.0])  # one temperature per head
    swept = core.approximate("exact", half.q, half.k, half.v, scale=betas)
    swept_ref = core.approximate("exact", copy.q, copy.k, copy.v, scale=betas)
    assert swept.output.dtype == dtype
    error = float(metrics.relative_output_error(swept.output.double(), swept_ref.output.double()).max())
    # The folded temperature rounds q once more.
    assert error <= 2 * half_error_bound("exact", dtype), error


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
    if core.methods()[method].half_native:
        # Computed in half precision: the errors differ by at most the half call's distance from the float32 call.
        tolerance = half_error_bound(method, dtype)
    else:
        # Only the final rounding to half precision separates them (bfloat16 keeps 8 bits, float16 11).
        bits = 8 if dtype == torch.bfloat16 else 11
        tolerance = 2 * 2.0**-bits
    assert float((err_low - err_ref).abs().max()) <= tolerance, (err_low, err_ref)


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_sweeps_and_scrubbers_measure_half_inputs_against_a_float32_reference(dtype: torch.dtype) -> None:
    """A reference computed in half precision was off by 2e-2 at tau 0.1 in bfloat16 (5.6 unit roundoffs): exact
    attention measured against it showed that error instead of its own."""
    half, copy = _rounded(dtype, n=128, d=16)
    taus = [0.1, 1.0]
    low = sweeps.error_vs_entropy(half.q, half.k, half.v, ["exact"], taus=taus)
    ref = sweeps.error_vs_entropy(copy.q, copy.k, copy.v, ["exact"], taus=taus)
    np.testing.assert_allclose(low.entropy, ref.entropy, rtol=1e-6)
    assert low.output_error["exact"].max() <= half_error_bound("exact", dtype), low.output_error
    # exact's dense view is the float32 one rounded once.
    assert low.attention_error["exact"].max() <= UNIT_ROUNDOFF[dtype], low.attention_error
    views = scrub.temperature_views(half.q[0], half.k[0], half.v[0], ["exact"], taus, side=16)
    views_ref = scrub.temperature_views(copy.q[0], copy.k[0], copy.v[0], ["exact"], taus, side=16)
    np.testing.assert_allclose(views.entropy, views_ref.entropy, rtol=1e-6)
    assert views.error["exact"].max() <= UNIT_ROUNDOFF[dtype], views.error
    split = scrub.split_views(half.q[0], half.k[0], half.v[0], taus, side=16)
    split_ref = scrub.split_views(copy.q[0], copy.k[0], copy.v[0], taus, side=16)
    np.testing.assert_allclose(split.entropy, split_ref.entropy, rtol=1e-6)
    bound = half_error_bound("scatterbrain", dtype) if "scatterbrain" in HALF_NATIVE else UNIT_ROUNDOFF[dtype]
    np.testing.assert_allclose(split.error["attention"], split_ref.error["attention"], atol=bound)


def test_the_studies_take_bfloat16_inputs() -> None:
    """NumPy has no bfloat16: the VCC study's errors and the Scatterbrain correction summary convert through float32."""
    half, copy = _rounded(torch.bfloat16, n=128, d=16)
    params = core.budget_params("vcc", 128, 16, 1 / 4)
    low = vcc_study.vcc_view(half.q, half.k, half.v, 3.0, params, seed=0, head=0)
    ref = vcc_study.vcc_view(copy.q, copy.k, copy.v, 3.0, params, seed=0, head=0)
    np.testing.assert_allclose(low.all_error, ref.all_error, rtol=2 * UNIT_ROUNDOFF[torch.bfloat16])
    params = core.budget_params("scatterbrain", 128, 16, 1 / 4)
    summary = sparse_lowrank.measure_correction(half.q[0], half.k[0], half.v[0], 3.0, 0, params)
    summary_ref = sparse_lowrank.measure_correction(copy.q[0], copy.k[0], copy.v[0], 3.0, 0, params)
    assert summary.omega_share == summary_ref.omega_share
    assert summary.sb_error == pytest.approx(summary_ref.sb_error, rel=2 * UNIT_ROUNDOFF[torch.bfloat16])


def test_the_precision_benchmark_measures_each_method_in_both_half_precisions(tmp_path: Path) -> None:
    from benchmarks import precision

    argv = ["--quick", "--methods", "exact", "svd", "--device", "cpu", "--out", str(tmp_path)]
    rows = {row["method"]: row for row in precision.main(argv)["rows"]}
    assert rows["exact"]["half_native"] and not rows["svd"]["half_native"]
    assert rows["exact"]["bf16"]["dtype"] == "torch.bfloat16" and rows["svd"]["fp16"]["dtype"] == "torch.float16"
    # svd upcasts, so its half call is the float32 call rounded once: about 0.43 unit roundoffs.
    assert 0.2 < rows["svd"]["bf16"]["vs_float32_roundoffs"] < 0.6
    assert rows["exact"]["bf16"]["vs_float32_roundoffs"] <= HALF_ERROR_FACTOR["exact"]
    table = (tmp_path / "precision_cpu_quick.md").read_text()
    assert "| exact | yes |" in table and "| svd | no |" in table


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
