"""Reference knobs of performer / scatterbrain: hyperbolic ("cosh") features and the eps stabiliser.

The eps test reproduces lucidrains/performer-pytorch's softmax_kernel + linear_attention on the same projection
(the peer is a benchmark requirement, requirements-bench.txt, as in tests/test_benchmarks.py).
"""

from __future__ import annotations

import math

import ci_env
import pytest
import torch

import core
from core.approximation import prepare_inputs
from core.approximators.performer import frequencies, kernel_estimate, performer_features, projection_for

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def _inputs(n: int = 64, d: int = 16, heads: int = 2, seed: int = 0) -> core.data.Inputs:
    return core.data.gaussian(n, d, seed=seed, heads=heads, dtype=torch.float64)


def test_hyperbolic_features_are_the_cosh_map() -> None:
    x = _inputs()
    m = 32
    inputs = prepare_inputs(x.q, x.k, x.v, 0.7, 4)
    w = projection_for(inputs, frequencies(m, "hyperbolic"), True)
    assert w.shape == (m // 2, 16)
    for per_row in (True, False):
        feats = performer_features(inputs.q, w, "hyperbolic", inputs.scale, per_row_shift=per_row)
        phi = feats.psi * torch.exp(feats.log_shift)
        xs = inputs.q * math.sqrt(0.7)
        proj = xs @ w.T
        expected = torch.exp(-0.5 * (xs * xs).sum(-1, keepdim=True)) * torch.cat([proj.exp(), (-proj).exp()], -1)
        torch.testing.assert_close(phi, expected / math.sqrt(m), rtol=1e-12, atol=0)
        assert float(feats.psi.max()) <= 1.0


def test_hyperbolic_estimate_is_unbiased_for_exp_qk() -> None:
    x = core.data.sphere(6, 8, seed=1, dtype=torch.float64)
    q, k = x.q * 0.6, x.k * 0.6  # |x + y| <= 1.2 keeps the variance small
    truth = torch.exp(q @ k.transpose(-1, -2))
    mean = torch.stack([kernel_estimate(q, k, 1.0, 16, "hyperbolic", False, seed) for seed in range(3000)]).mean(0)
    # 3000 draws of 8 iid cosh pairs: the relative standard error at these norms is about 1%.
    assert float(((mean - truth).abs() / truth).max()) < 0.06


@pytest.mark.parametrize("method", ["performer", "scatterbrain"])
def test_eps_zero_is_the_default_and_eps_changes_the_numbers(method: str) -> None:
    x = _inputs()
    base = core.approximate(method, x.q, x.k, x.v, scale=2.0, seed=3, features=32)
    zero = core.approximate(method, x.q, x.k, x.v, scale=2.0, seed=3, features=32, eps=0.0)
    assert torch.equal(base.output, zero.output)
    stabilised = core.approximate(method, x.q, x.k, x.v, scale=2.0, seed=3, features=32, eps=1e-2)
    assert not torch.allclose(stabilised.output, base.output)
    with pytest.raises(core.ParameterError, match="eps"):
        core.approximate(method, x.q, x.k, x.v, features=32, kernel="trig", eps=1e-4)


@pytest.mark.parametrize("kernel", ["positive", "trig", "hyperbolic"])
def test_scatterbrain_without_support_is_performer_for_every_feature_map(kernel: str) -> None:
    x = _inputs()
    # the stabiliser eps exists for the positive and hyperbolic maps only; trig refuses it
    params = {"features": 32, "kernel": kernel, **({} if kernel == "trig" else {"eps": 1e-4})}
    performer = core.approximate("performer", x.q, x.k, x.v, scale=1.5, seed=2, **params)
    scatterbrain = core.approximate("scatterbrain", x.q, x.k, x.v, scale=1.5, seed=2, support="none", **params)
    torch.testing.assert_close(scatterbrain.output, performer.output, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("eps", [1e-4, 1e-6, 0.0])
def test_performer_matches_performer_pytorch_on_the_same_projection(eps: float) -> None:
    peer = ci_env.import_or_unavailable("performer_pytorch.performer_pytorch")
    x = _inputs(n=128, d=16, heads=3, seed=5)
    q, k, v = (t.unsqueeze(0) for t in (x.q, x.k, x.v))  # (batch 1, heads 3, n, d)
    m = 48
    # performer-pytorch: data_normalizer d^-1/4 on q and k, i.e. beta = 1/sqrt(d), our default scale.
    ours = core.approximate("performer", q, k, v, seed=9, features=m, orthogonal=True, eps=eps)
    w = projection_for(prepare_inputs(q, k, v, None, 9), m, True)
    q_prime = peer.softmax_kernel(q, projection_matrix=w, is_query=True, eps=eps)
    k_prime = peer.softmax_kernel(k, projection_matrix=w, is_query=False, eps=eps)
    theirs = peer.linear_attention(q_prime, k_prime, v)
    torch.testing.assert_close(ours.output, theirs, rtol=1e-9, atol=1e-12)
