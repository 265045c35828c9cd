"""learned_kernel and linear_elu in the registry (notes E18-E23; the kernel is fitted to softmax as a demonstration)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import core
from core import kernels as K
from core.approximators import learned_kernel as lk
from core.errors import ParameterError


@pytest.fixture(scope="module")
def gaussian() -> core.data.Inputs:
    return core.data.gaussian(256, 16, seed=0)


def _tv(approx: torch.Tensor, exact: torch.Tensor) -> float:
    return K.mean_row_tv(approx, exact)


def test_registered_with_params() -> None:
    specs = core.registry.methods()
    spec = specs["learned_kernel"]
    assert spec.family == "low-rank" and spec.randomized
    assert {p.name for p in spec.params} >= {"features", "variant", "steps", "ortho_penalty", "lr", "orthogonal_init"}
    assert spec.param("variant").choices == ("ff", "glu", "oglu", "aoglu")
    assert specs["linear_elu"].family == "low-rank"


@pytest.mark.parametrize("variant", ["ff", "glu", "oglu", "aoglu"])
def test_outputs_finite_and_weights_positive(gaussian: core.data.Inputs, variant: str) -> None:
    result = core.approximate(
        "learned_kernel", gaussian.q, gaussian.k, gaussian.v, scale=1.0, features=16, variant=variant, steps=30
    )
    assert result.output.shape == gaussian.v.shape
    assert bool(torch.isfinite(result.output).all())
    attention = result.attention()
    assert bool((attention > 0).all())
    assert torch.allclose(attention.sum(-1), torch.ones(attention.shape[:-1]), atol=1e-5)
    # The efficient path equals the dense weights applied to v.
    assert torch.allclose(result.output, attention @ gaussian.v, atol=1e-4)
    assert bool((result.parts["features_q"] > 0).all())
    assert result.parts["features_q"].shape == (1, 256, 16)


def test_error_falls_over_training(gaussian: core.data.Inputs) -> None:
    exact = core.approximate("exact", gaussian.q, gaussian.k, gaussian.v, scale=1.0).attention()
    early = core.approximate("learned_kernel", gaussian.q, gaussian.k, gaussian.v, scale=1.0, features=16, steps=1)
    late = core.approximate("learned_kernel", gaussian.q, gaussian.k, gaussian.v, scale=1.0, features=16, steps=100)
    curve = late.parts["training_curve"]
    assert isinstance(curve, list) and len(curve) == 100
    assert curve[-1] < 0.7 * curve[0]
    assert _tv(late.attention(), exact) < 0.85 * _tv(early.attention(), exact)
    assert late.info["final_kl"] < early.info["final_kl"]


def test_beats_elu_at_equal_features_on_gaussian_tau1(gaussian: core.data.Inputs) -> None:
    # E22: fitted FF kernel with m = d = 16 vs ELU+1 (m = d) and the Performer at m = 16 (notes: .279 / .364 / .479).
    q, k, v = gaussian.q, gaussian.k, gaussian.v
    exact = core.approximate("exact", q, k, v, scale=1.0).attention()
    learned = core.approximate("learned_kernel", q, k, v, scale=1.0, features=16, steps=100)
    elu = core.approximate("linear_elu", q, k, v, scale=1.0)
    tv_learned, tv_elu = _tv(learned.attention(), exact), _tv(elu.attention(), exact)
    assert tv_elu == pytest.approx(0.364, abs=0.03)
    assert tv_learned < 0.9 * tv_elu, (tv_learned, tv_elu)


def test_comparison_holds_on_a_fresh_input() -> None:
    # The fitted kernel transfers to a new draw of the same distribution (not just memorising this input).
    comparison = K.compare_kernels(
        core.data.gaussian(256, 16, seed=0),
        core.data.gaussian(256, 16, seed=1),
        1.0,
        16,
        variants=("ff",),
        steps=100,
        performer_redraws=3,
    )
    by_name = {row["method"].split(" (")[0]: row for row in comparison.rows}
    learned, elu, performer = by_name["learned ff"], by_name["ELU+1 linear"], by_name["Performer"]
    assert learned["tv_heldout"] < elu["tv_heldout"] < performer["tv_heldout"]
    assert len(comparison.curves["ff"]) == 100


def test_orthogonality_penalty_hurts_fitting_and_flattens_the_spectrum(gaussian: core.data.Inputs) -> None:
    # E23: lambda 0 -> 1 raises the TV; the penalty pulls W's singular values toward 1.
    sweep = K.penalty_sweep(gaussian.q, gaussian.k, gaussian.v, 1.0, 16, penalties=(0.0, 1.0), steps=100)
    assert sweep.tv[1] > sweep.tv[0] + 0.02, sweep.tv
    spread = [max(s) / min(s) for s in sweep.singular_values]
    assert spread[1] < spread[0]
    assert max(abs(s - 1) for s in sweep.singular_values[1]) < 0.5


def test_aoglu_cuts_gate_parameters_by_a_quarter() -> None:
    # E20: at m = d, GLU has 2 m^2 parameters per head and AOGLU with rank m/4 gates 1.5 m^2.
    gen = torch.Generator().manual_seed(0)
    glu = lk.init_weights("glu", 1, 64, 64, True, gen)
    aoglu = lk.init_weights("aoglu", 1, 64, 64, True, gen)
    assert glu.parameter_count() == 2 * 64 * 64
    assert aoglu.parameter_count() == int(1.5 * 64 * 64)


def test_orthogonal_init_is_orthogonal() -> None:
    gen = torch.Generator().manual_seed(0)
    for d, m in ((16, 16), (16, 8), (8, 32)):
        w = lk.init_weights("oglu", 2, d, m, False, gen).w
        gram = w @ w.transpose(-1, -2) if d <= m else w.transpose(-1, -2) @ w
        assert torch.allclose(gram, torch.eye(gram.shape[-1], dtype=gram.dtype).expand_as(gram), atol=1e-10)
    assert lk.init_weights("ff", 1, 16, 16, True, gen).orthogonality_penalty() < 1e-20
    assert lk.init_weights("ff", 1, 16, 16, False, gen).orthogonality_penalty() > 1e-3
    assert lk.init_weights("glu", 1, 16, 16, True, gen).orthogonality_penalty() > 1e-3  # plain GLU: Gaussian


def test_seeded_and_deterministic(gaussian: core.data.Inputs) -> None:
    args = (gaussian.q, gaussian.k, gaussian.v)
    a = core.approximate("learned_kernel", *args, scale=1.0, seed=3, features=8, steps=10, variant="aoglu")
    b = core.approximate("learned_kernel", *args, scale=1.0, seed=3, features=8, steps=10, variant="aoglu")
    c = core.approximate("learned_kernel", *args, scale=1.0, seed=4, features=8, steps=10, variant="aoglu")
    assert torch.equal(a.output, b.output)
    assert not torch.equal(a.output, c.output)


def test_fits_under_inference_mode_and_with_heads_and_row_subsampling() -> None:
    x = core.data.clustered(600, 8, 6, 0.3, seed=1, heads=2)
    with torch.inference_mode():
        result = core.approximate("learned_kernel", x.q, x.k, x.v, scale=2.0, features=8, steps=20)
    assert result.output.shape == (2, 600, 8)
    assert result.info["train_rows"] == lk.TRAIN_ROWS
    curve = result.parts["training_curve"]
    assert len(curve) == 20 and curve[-1] < curve[0]


def test_bad_params_refused(gaussian: core.data.Inputs) -> None:
    args = (gaussian.q, gaussian.k, gaussian.v)
    with pytest.raises(ParameterError, match="learned_kernel.variant"):
        core.approximate("learned_kernel", *args, variant="mlp")
    with pytest.raises(ParameterError, match="learned_kernel.features"):
        core.approximate("learned_kernel", *args, features=0)
    with pytest.raises(ParameterError, match="learned_kernel.steps"):
        core.approximate("learned_kernel", *args, steps=lk.MAX_STEPS + 1)
    with pytest.raises(ParameterError, match="learned_kernel.ortho_penalty"):
        core.approximate("learned_kernel", *args, ortho_penalty=-1.0)
    big = core.data.gaussian(8192, 16, seed=0, heads=16)
    with pytest.raises(ParameterError, match="^n:"):
        core.approximate("learned_kernel", big.q, big.k, big.v, features=64, steps=1)


def test_linear_elu_matches_its_definition(gaussian: core.data.Inputs) -> None:
    q, k, v = gaussian.q, gaussian.k, gaussian.v
    result = core.approximate("linear_elu", q, k, v, scale=0.5)
    phi_q, phi_k = F.elu(q * 0.5**0.5) + 1, F.elu(k * 0.5**0.5) + 1
    dense = phi_q @ phi_k.transpose(-1, -2)
    dense = dense / dense.sum(-1, keepdim=True)
    assert torch.allclose(result.attention(), dense, atol=1e-6)
    assert torch.allclose(result.output, dense @ v, atol=1e-5)
    assert result.cost.memory > 0
