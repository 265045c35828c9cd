"""The registry contract: every method is described, validated, budgeted, runs on every batch shape, and its
output path agrees with the dense matrix it reports."""

from __future__ import annotations

import math

import pytest
import torch

import core
from core import registry
from core.approximation import prepare_inputs

METHODS = list(registry.methods())
# The methods the issue names, with their API parameters (topk/rpca's k is registered as top_k).
EXPECTED = {
    "exact": set(),
    "topk": {"top_k"},
    "svd": {"rank"},
    "rpca": {"lam", "iterations", "rank", "top_k"},
    "lsh": {"rounds", "buckets"},
    "performer": {"features", "kernel", "orthogonal"},
    "scatterbrain": {"features", "kernel", "orthogonal", "support", "rounds", "buckets", "window"},
    "nystrom": {"landmarks", "pinv_iterations", "pinv"},
    "linformer": {"rank"},
    "local": {"window"},
}
FAMILY = {
    "exact": {"exact"},
    "topk": {"oracle"},
    "svd": {"oracle"},
    "rpca": {"oracle"},
    "lsh": {"sparse"},
    "local": {"sparse"},
    "performer": {"low-rank"},
    "nystrom": {"low-rank"},
    "linformer": {"low-rank", "compression"},
    "scatterbrain": {"sparse+low-rank"},
}
# Methods whose implied matrix is a row-normalised softmax-like matrix (rows sum to 1, entries >= 0).
# topk (the unrenormalised oracle), nystrom (F A^+ B), svd (truncation), rpca (S + L) and linformer (softmax times
# a random projection) are not, by construction.
NORMALISING = ["exact", "topk_renormalized", "lsh", "local", "performer", "scatterbrain"]
SHAPES = [(), (3,), (2, 3)]
# Outside the defaults test, keep the slow iterative methods short (their own tests cover convergence).
FAST = {"learned_kernel": {"steps": 5}, "hedgehog": {"steps": 5}, "rpca": {"iterations": 20}}


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py
# Small inputs whose logits q . k have unit variance (tests/conftest.py draw_qkv).
SMALL = {"n": 24, "d": 8, "dv": 5, "seed": 7, "unit_logits": True}


def test_methods_is_callable_repeatedly_after_use(random_qkv) -> None:
    """core.methods() is the documented registry call; importing core.methods (the package) must not shadow it."""
    first = core.methods()
    q, k, v = random_qkv((), **SMALL)
    core.approximate("exact", q, k, v)
    assert callable(core.methods), f"core.methods became {type(core.methods).__name__}"
    assert list(core.methods()) == list(first)


def test_every_issue_method_is_registered_with_its_api_parameters() -> None:
    specs = registry.methods()
    for name, params in EXPECTED.items():
        assert name in specs, f"{name} is not registered"
        assert {p.name for p in specs[name].params} >= params, (name, [p.name for p in specs[name].params])
        assert specs[name].family in FAMILY[name], (name, specs[name].family)
    assert "random" in specs["linformer"].description.lower()  # nothing is trained: it must say so


@pytest.mark.parametrize("name", METHODS)
def test_spec_is_fully_described(name: str) -> None:
    spec = registry.methods()[name]
    assert spec.name == name
    assert spec.family in registry.FAMILIES
    assert isinstance(spec.description, str) and len(spec.description.strip()) > 10
    assert "\n" not in spec.description.strip()  # one line
    assert spec.label
    names = [p.name for p in spec.params]
    assert len(names) == len(set(names))
    for p in spec.params:
        assert p.name.isidentifier()
        assert p.kind in ("int", "float", "choice", "bool", "int_list")
        assert isinstance(p.help, str) and len(p.help.strip()) > 5, (name, p.name)
        if p.kind in ("int", "float"):
            low, high = p.bounds(256, 32)
            assert low is not None and high is not None and low <= high, (name, p.name, low, high)
            assert p.validate(p.default, 4096, 64, name) == p.default
            assert p.range_text(256, 32)  # the text the app and errors show
        elif p.kind == "choice":
            assert len(p.choices) >= 2 and p.default in p.choices, (name, p.name)
        elif p.kind == "bool":
            assert isinstance(p.default, bool)
    # defaults validate at a small size (clipped into n-dependent ranges)
    checked = spec.validate({}, 24, 8)
    assert set(checked) == set(names)


@pytest.mark.parametrize("name", [m for m in METHODS if registry.methods()[m].budget is not None])
@pytest.mark.parametrize("fraction", [1 / 8, 1 / 32])
def test_budget_params_give_the_fraction(name: str, fraction: float) -> None:
    spec = registry.methods()[name]
    n, d = 1024, 64
    params = core.budget_params(name, n, d, fraction)
    budgeted = {p.name for p in spec.params if p.budgeted}
    assert budgeted, f"{name} has a budget but no budgeted parameter"
    q, k, v = (torch.zeros(2, n, d) for _ in range(3))
    inputs = prepare_inputs(q, k, v, None, 0)
    assert spec.cost is not None
    memory = spec.cost(inputs, params).memory
    achieved = memory / (inputs.batch * n * n)
    assert achieved == pytest.approx(fraction, rel=0.15), (name, params, achieved / fraction)


@pytest.mark.parametrize("name", METHODS)
def test_runs_at_defaults_on_every_batch_shape(name: str, random_qkv) -> None:
    spec = registry.methods()[name]
    outputs = {}
    for shape in SHAPES:
        q, k, v = random_qkv(shape, **SMALL)
        result = core.approximate(name, q, k, v, seed=1)
        assert result.output.shape == (*shape, 24, 5)
        assert result.output.dtype == torch.float64
        assert bool(torch.isfinite(result.output).all())
        attention = result.attention()
        assert attention.shape == (*shape, 24, 24) and attention.dtype == torch.float64
        assert result.cost.memory > 0 and result.cost.flops > 0
        assert result.params == spec.validate({}, 24, 8)
        outputs[shape] = result.output
    if not spec.randomized:
        # deterministic methods treat batch elements independently
        q, k, v = random_qkv((2, 3), **SMALL)
        batched = core.approximate(name, q, k, v).output
        for i in range(2):
            for h in range(3):
                single = core.approximate(name, q[i, h], k[i, h], v[i, h]).output
                torch.testing.assert_close(batched[i, h], single, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("name", METHODS)
def test_output_equals_attention_times_v(name: str) -> None:
    """The efficient output path and the dense view describe the same matrix (float64)."""
    x = core.data.clustered(48, 8, clusters=4, spread=0.3, seed=0, heads=2, dtype=torch.float64)
    for beta in (0.5, 3.0):
        result = core.approximate(name, x.q, x.k, x.v, scale=beta, seed=2, **FAST.get(name, {}))
        torch.testing.assert_close(result.output, result.attention() @ x.v, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("name", METHODS)
def test_float32_path_close_to_float64_path(name: str) -> None:
    x64 = core.data.clustered(48, 8, clusters=4, spread=0.3, seed=1, dtype=torch.float64)
    fast = FAST.get(name, {})
    r64 = core.approximate(name, x64.q, x64.k, x64.v, scale=2.0, seed=3, **fast)
    r32 = core.approximate(name, x64.q.float(), x64.k.float(), x64.v.float(), scale=2.0, seed=3, **fast)
    assert r32.output.dtype == torch.float32
    scale = float(r64.output.abs().max())
    assert float((r32.output.double() - r64.output).abs().max()) < 1e-3 * max(scale, 1.0)


@pytest.mark.parametrize("name", NORMALISING)
def test_rows_sum_to_one_where_the_method_normalises(name: str) -> None:
    x = core.data.clustered(64, 8, clusters=4, spread=0.3, seed=2, heads=2, dtype=torch.float64)
    for beta in (0.1, 2.0, 30.0):
        attention = core.approximate(name, x.q, x.k, x.v, scale=beta, seed=4).attention()
        assert float(attention.min()) >= 0, (name, beta)
        torch.testing.assert_close(attention.sum(-1), torch.ones(2, 64, dtype=torch.float64), rtol=0, atol=1e-10)


def test_dense_view_cap_is_documented_and_enforced() -> None:
    from core.approximation import DENSE_MAX_N

    q = torch.zeros(DENSE_MAX_N + 1, 1)
    result = core.approximate("local", q, q, q, window=2)
    with pytest.raises(ValueError, match=str(DENSE_MAX_N)):
        result.attention()
    assert result.output.shape == (DENSE_MAX_N + 1, 1)
    assert math.isfinite(float(result.output.sum()))
