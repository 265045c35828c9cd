"""core.sweeps: batched error-vs-entropy sweeps equal individual calls; the regime map finds the crossover."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import core
from core import metrics, sweeps
from core.errors import ParameterError

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def clustered() -> core.data.Inputs:
    return core.data.clustered(n=256, d=64, clusters=16, spread=0.3, seed=0, dtype=torch.float64)


BETAS = [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0]


def test_shapes_and_monotone_entropy(clustered: core.data.Inputs) -> None:
    methods = ["performer", "lsh", "scatterbrain", "local"]
    result = sweeps.error_vs_entropy(clustered.q, clustered.k, clustered.v, methods, betas=BETAS)
    assert result.betas.shape == result.entropy.shape == (len(BETAS),)
    np.testing.assert_allclose(result.taus, 1 / np.asarray(BETAS))
    assert set(result.attention_error) == set(result.output_error) == set(methods)
    for name in methods:
        assert result.attention_error[name].shape == (len(BETAS),)
        assert np.all(np.isfinite(result.attention_error[name])) and np.all(result.attention_error[name] >= 0)
    assert np.all(np.diff(result.entropy) < 0), result.entropy
    assert result.entropy[0] < math.log(256)
    assert len(result.rows()) == len(methods) * len(BETAS)


def test_taus_are_inverse_betas(clustered: core.data.Inputs) -> None:
    by_tau = sweeps.error_vs_entropy(clustered.q, clustered.k, clustered.v, ["local"], taus=[1.0, 0.25])
    by_beta = sweeps.error_vs_entropy(clustered.q, clustered.k, clustered.v, ["local"], betas=[1.0, 4.0])
    np.testing.assert_allclose(by_tau.entropy, by_beta.entropy)
    np.testing.assert_allclose(by_tau.attention_error["local"], by_beta.attention_error["local"])


@pytest.mark.parametrize("method", ["performer", "lsh", "scatterbrain", "nystrom", "local", "svd", "topk"])
def test_batched_sweep_equals_individual_calls(clustered: core.data.Inputs, method: str) -> None:
    betas = [0.5, 3.0, 12.0]
    result = sweeps.error_vs_entropy(clustered.q, clustered.k, clustered.v, [method], betas=betas, seed=4)
    params = result.params[method]
    assert params == {**core.budget_params(method, 256, 64, 1 / 8)}
    for t, beta in enumerate(betas):
        exact = core.approximate("exact", clustered.q, clustered.k, clustered.v, scale=beta)
        single = core.approximate(method, clustered.q, clustered.k, clustered.v, scale=beta, seed=4, **params)
        entropy = float(metrics.mean_row_entropy(exact.attention()).mean())
        error = float(metrics.relative_frobenius_error(single.attention(), exact.attention()).mean())
        out_error = float(metrics.relative_output_error(single.output, exact.output).mean())
        assert result.entropy[t] == pytest.approx(entropy, rel=1e-9)
        assert result.attention_error[method][t] == pytest.approx(error, rel=1e-6, abs=1e-12)
        assert result.output_error[method][t] == pytest.approx(out_error, rel=1e-6, abs=1e-12)


def test_oracle_crossover_exists_on_clustered_input(clustered: core.data.Inputs) -> None:
    result = sweeps.error_vs_entropy(clustered.q, clustered.k, clustered.v, ["topk", "svd"], betas=BETAS)
    topk, svd = result.attention_error["topk"], result.attention_error["svd"]
    assert svd[0] < topk[0] and topk[-1] < svd[-1]  # low-rank wins hot, sparse wins cold
    assert np.all(np.diff(topk) <= 1e-12), topk  # sparse error falls as beta grows
    assert np.all(np.diff(svd) >= -1e-12), svd  # low-rank error rises
    crossing = result.crossover("topk", "svd")
    assert crossing is not None and result.entropy[-1] < crossing < result.entropy[0]


def test_oracle_crossover_matches_scatterbrain_claim_13() -> None:
    """scatterbrain.md claim 13 / section 8 Run 1: n = 1024, d = 64, C = 64, sigma = 0.3, equal K = 32 for the
    top-K (sparse) and rank-K (SVD) oracles: the crossover is at beta ~ 2.9. The old renormalised top-k moved it
    to ~5. Here (seed 0): top-k .932 / svd .080 at beta 1, .364 / .418 at beta 3."""
    x = core.data.clustered(n=1024, d=64, clusters=64, spread=0.3, seed=0, dtype=torch.float64)
    k = 32
    result = sweeps.error_vs_entropy(
        x.q,
        x.k,
        x.v,
        ["topk", "svd"],
        betas=[1.0, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0],
        method_params={"topk": {"top_k": k}, "svd": {"rank": k}},
    )
    assert result.params["topk"]["top_k"] == result.params["svd"]["rank"] == k
    crossing = result.crossover("topk", "svd", axis="beta")
    assert crossing is not None and 2.4 <= crossing <= 3.5, crossing
    assert result.attention_error["topk"][0] == pytest.approx(0.931, abs=0.02)  # the paper note's beta = 1 value


def test_regime_map_oracles_find_all_three_regimes() -> None:
    # clusters of 32 > the sparse budget of 16 per row, so sparse alone cannot cover a cluster (section 8)
    result = sweeps.regime_map(
        n=128,
        d=32,
        clusters=4,
        betas=[0.5, 5.0, 40.0],
        spreads=[0.3],
        methods=sweeps.ORACLES,
        method_params={"rpca": {"iterations": 40}},
    )
    assert result.entropy.shape == (1, 3)
    for role in result.roles:
        assert result.errors[role].shape == (1, 3)
    winners = [result.roles[i] for i in result.winner[0]]
    assert winners[0] in ("low_rank", "sparse_low_rank")
    assert winners[1] == "sparse_low_rank"
    assert result.gain[0, 1] > 0.3  # the mid-temperature gain of sparse + low-rank


def test_regime_map_estimators_shapes() -> None:
    result = sweeps.regime_map(n=128, d=32, clusters=8, betas=[1.0, 8.0], spreads=[0.1, 0.5])
    assert result.entropy.shape == (2, 2)
    assert set(result.methods.values()) == {"lsh", "performer", "scatterbrain"}
    assert result.winner.shape == (2, 2)
    assert np.all(result.entropy[:, 1] < result.entropy[:, 0])  # colder is more peaked, for every spread
    for role in result.roles:
        assert np.all(np.isfinite(result.errors[role])) and np.all(result.errors[role] >= 0)
    # each row is the sweep of that spread's clustered input
    x = core.data.clustered(128, 32, 8, 0.5, seed=0)
    row = sweeps.error_vs_entropy(x.q, x.k, x.v, ["lsh", "performer", "scatterbrain"], betas=[1.0, 8.0])
    np.testing.assert_allclose(result.entropy[1], row.entropy, rtol=1e-6)
    np.testing.assert_allclose(result.errors["sparse_low_rank"][1], row.attention_error["scatterbrain"], rtol=1e-6)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"betas": []}, "betas"),
        ({"betas": [0.0]}, "betas"),
        ({"taus": [-1.0]}, "taus"),
        ({"betas": [math.nan]}, "betas"),
        ({}, "taus"),
        ({"betas": [1.0], "taus": [1.0]}, "taus"),
    ],
)
def test_bad_temperatures(clustered: core.data.Inputs, kwargs: dict, name: str) -> None:
    with pytest.raises(ParameterError) as err:
        sweeps.error_vs_entropy(clustered.q, clustered.k, clustered.v, ["local"], **kwargs)
    assert err.value.parameter == name


def test_unknown_method_in_sweep(clustered: core.data.Inputs) -> None:
    with pytest.raises(ParameterError) as err:
        sweeps.error_vs_entropy(clustered.q, clustered.k, clustered.v, ["nope"], betas=[1.0])
    assert err.value.parameter == "method"


@pytest.mark.parametrize("per_chunk", [1, 2, 5])
def test_the_chunk_size_does_not_change_the_numbers(
    clustered: core.data.Inputs, per_chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CPU computes a few temperatures at a time (core.device.chunk_elements); how many must not matter beyond
    rounding (a batched product may be blocked differently: float64 here, so 1e-12)."""
    methods = ["performer", "lsh", "scatterbrain"]
    whole = sweeps.error_vs_entropy(clustered.q, clustered.k, clustered.v, methods, betas=BETAS, seed=2)
    monkeypatch.setattr(sweeps, "chunk_elements", lambda device: per_chunk * 256 * 256)
    cut = sweeps.error_vs_entropy(clustered.q, clustered.k, clustered.v, methods, betas=BETAS, seed=2)
    np.testing.assert_allclose(cut.entropy, whole.entropy, rtol=1e-12)
    for name in methods:
        np.testing.assert_allclose(cut.attention_error[name], whole.attention_error[name], rtol=1e-12)
        np.testing.assert_allclose(cut.output_error[name], whole.output_error[name], rtol=1e-12)


def test_a_cpu_computes_fewer_temperatures_at_once_than_a_gpu() -> None:
    cpu = core.device.chunk_elements(torch.device("cpu"))
    assert cpu < core.device.chunk_elements(torch.device("cuda")) == sweeps.CHUNK_ELEMENTS
    assert 512 * 512 <= cpu  # one n = 512 map still fits in a chunk


def test_a_temperature_stack_forms_q_k_once_with_the_same_numbers() -> None:
    """AttentionInputs.logits over a repeated q, k (a sweep's stack): one product for all temperatures, and
    bit-for-bit the logits a per-temperature product gives."""
    import dataclasses

    from torch.overrides import TorchFunctionMode

    from core.approximation import prepare_inputs

    generator = torch.Generator().manual_seed(3)
    q, k, v = torch.randn(3, 2, 64, 16, generator=generator).unbind(0)
    temperatures = 5
    stack = [x.unsqueeze(0).expand(temperatures, *x.shape) for x in (q, k, v)]
    inputs = prepare_inputs(*stack, torch.linspace(0.5, 20.0, temperatures).reshape(-1, 1), 0)
    assert inputs.repeats == temperatures

    class Products(TorchFunctionMode):
        def __init__(self) -> None:
            super().__init__()
            self.batches: list[int] = []

        def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            if "matmul" in getattr(func, "__name__", ""):
                self.batches.append(int(args[0].shape[0]))
            return func(*args, **(kwargs or {}))

    with Products() as seen:
        once = inputs.logits()
    assert seen.batches == [2]  # the two heads, not 5 x 2
    each = dataclasses.replace(inputs, repeats=1).logits()
    assert torch.equal(once, each)
