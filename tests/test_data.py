"""core.data: the Scatterbrain Process-1 clustered input and its regimes, the baselines, and the real model."""

from __future__ import annotations

import math
import socket

import pytest
import torch

import core
from core import metrics


def exact_attention(q: torch.Tensor, k: torch.Tensor, beta: float) -> torch.Tensor:
    return torch.softmax(beta * q.double() @ k.double().transpose(-1, -2), dim=-1)


def test_clustered_shapes_labels_and_geometry() -> None:
    x = core.data.clustered(n=512, d=64, clusters=16, spread=0.3, seed=0, heads=2)
    assert x.q.shape == x.k.shape == x.v.shape == (2, 512, 64)
    assert torch.equal(x.q, x.k)  # Process 1 is self-attention, K = Q
    assert x.labels is not None and x.labels.shape == (512,)
    counts = torch.bincount(x.labels, minlength=16)
    assert int(counts.min()) == int(counts.max()) == 32
    # |c| ~ 1 and |r| ~ spread: points near the unit sphere
    norms = x.q.double().norm(dim=-1)
    assert abs(float(norms.mean()) - math.sqrt(1 + 0.3**2)) < 0.05
    # same-cluster points are closer than different-cluster points
    q = x.q[0].double()
    same = x.labels[:, None] == x.labels[None, :]
    inner = q @ q.T
    assert float(inner[same].mean()) > 0.8
    assert abs(float(inner[~same].mean())) < 0.1


def test_clustered_positions_are_a_seeded_permutation_and_sorting_only_reorders() -> None:
    x = core.data.clustered(n=256, d=16, clusters=16, spread=0.3, seed=5, heads=2, dtype=torch.float64)
    assert x.labels is not None
    # Process 1 ties nothing to position: neighbours are rarely in the same cluster (1/16 by chance).
    assert float((x.labels[1:] == x.labels[:-1]).double().mean()) < 0.2
    again = core.data.clustered(n=256, d=16, clusters=16, spread=0.3, seed=5, heads=2, dtype=torch.float64)
    assert torch.equal(x.labels, again.labels) and torch.equal(x.q, again.q)
    other = core.data.clustered(n=256, d=16, clusters=16, spread=0.3, seed=6, heads=2, dtype=torch.float64)
    assert other.labels is not None and not torch.equal(x.labels, other.labels)
    ordered = core.data.clustered(
        n=256, d=16, clusters=16, spread=0.3, seed=5, heads=2, dtype=torch.float64, order_by_cluster=True
    )
    assert ordered.labels is not None
    order = core.data.cluster_order(x.labels)
    assert bool((ordered.labels[1:] >= ordered.labels[:-1]).all())  # contiguous runs
    for name in ("q", "k", "v"):
        assert torch.equal(getattr(ordered, name), getattr(x, name)[:, order])
    assert torch.equal(ordered.labels, x.labels[order])


def test_local_window_is_not_an_oracle_on_fair_positions() -> None:
    """Measured (n=256, C=16, sigma=0.3, beta=24, window 8): local error 1.46 on random positions, 0.37 sorted."""
    errors = []
    for order in (False, True):
        x = core.data.clustered(256, 64, 16, 0.3, seed=0, dtype=torch.float64, order_by_cluster=order)
        exact = core.approximate("exact", x.q, x.k, x.v, scale=24.0).attention()
        local = core.approximate("local", x.q, x.k, x.v, scale=24.0, window=8).attention()
        errors.append(float(metrics.relative_frobenius_error(local, exact).max()))
    assert errors[0] > 1.0 > 0.5 > errors[1], errors


def test_clustered_spread_controls_intra_cluster_distance() -> None:
    tight = core.data.clustered(n=256, d=32, clusters=8, spread=0.05, seed=1)
    loose = core.data.clustered(n=256, d=32, clusters=8, spread=0.8, seed=1)

    def intra(x: core.data.Inputs) -> float:
        q = x.q[0].double()
        assert x.labels is not None
        same = x.labels[:, None] == x.labels[None, :]
        return float(torch.cdist(q, q)[same].mean())

    assert intra(tight) < 0.1 < 0.5 < intra(loose)


def test_clustered_mean_row_entropy_falls_monotonically_with_beta() -> None:
    x = core.data.clustered(n=256, d=64, clusters=16, spread=0.3, seed=0)
    betas = [0.0, 0.25, 0.5, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48]
    entropies = [float(metrics.mean_row_entropy(exact_attention(x.q[0], x.k[0], b))) for b in betas]
    assert entropies[0] == pytest.approx(math.log(256), abs=1e-9)
    assert all(a > b for a, b in zip(entropies, entropies[1:], strict=False)), entropies
    # at large beta the rows concentrate on the own cluster (16 members): entropy well below ln 16
    assert entropies[-1] < math.log(16)


def test_clustered_entropy_via_engine_matches() -> None:
    x = core.data.clustered(n=128, d=32, clusters=8, spread=0.3, seed=2)
    attention = core.approximate("exact", x.q, x.k, x.v, scale=4.0).attention()
    torch.testing.assert_close(attention.double(), exact_attention(x.q, x.k, 4.0), rtol=0, atol=1e-6)


def _equal_budget_errors(beta: float) -> tuple[float, float]:
    n, d = 256, 64
    x = core.data.clustered(n=n, d=d, clusters=16, spread=0.3, seed=0, dtype=torch.float64)
    exact = core.approximate("exact", x.q, x.k, x.v, scale=beta).attention()
    errors = []
    for method in ("topk", "svd"):
        params = core.budget_params(method, n, d, 1 / 8)
        approx = core.approximate(method, x.q, x.k, x.v, scale=beta, **params).attention()
        errors.append(float(metrics.relative_frobenius_error(approx, exact).max()))
    return errors[0], errors[1]


def test_clustered_low_rank_wins_at_small_beta_sparse_at_large_beta() -> None:
    # Calibration (independent top-k / SVD, n=256, C=16, sigma=0.3, k=32, rank=16):
    # beta=1: topk 2.3, svd 0.016; beta=24: topk 0.000, svd 0.65.
    topk_small, svd_small = _equal_budget_errors(1.0)
    assert svd_small < topk_small / 10
    topk_large, svd_large = _equal_budget_errors(24.0)
    assert topk_large < svd_large / 10


def test_gaussian_and_sphere_baselines() -> None:
    g = core.data.gaussian(n=2048, d=64, seed=0)
    assert g.q.shape == g.k.shape == (1, 2048, 64)
    assert not torch.equal(g.q, g.k)
    dots = (g.q[0].double() * g.k[0].double()).sum(-1)
    assert abs(float(dots.var()) - 1.0) < 0.1  # q.k has unit variance: temperature 1 is standard attention
    s = core.data.sphere(n=100, d=16, seed=0, heads=3)
    assert s.q.shape == (3, 100, 16)
    torch.testing.assert_close(s.q.double().norm(dim=-1), torch.ones(3, 100, dtype=torch.float64), atol=1e-6, rtol=0)
    torch.testing.assert_close(s.k.double().norm(dim=-1), torch.ones(3, 100, dtype=torch.float64), atol=1e-6, rtol=0)


@pytest.mark.parametrize("make", [core.data.gaussian, core.data.sphere])
def test_baselines_are_seeded(make) -> None:
    a, b, c = make(64, 8, seed=3), make(64, 8, seed=3), make(64, 8, seed=4)
    assert torch.equal(a.q, b.q) and torch.equal(a.k, b.k) and torch.equal(a.v, b.v)
    assert not torch.equal(a.q, c.q)


def test_clustered_is_seeded() -> None:
    a = core.data.clustered(64, 8, 4, 0.3, seed=3)
    b = core.data.clustered(64, 8, 4, 0.3, seed=3)
    c = core.data.clustered(64, 8, 4, 0.3, seed=4)
    assert torch.equal(a.q, b.q) and torch.equal(a.v, b.v)
    assert not torch.equal(a.q, c.q)


# ---------------------------------------------------------------- the real model


@pytest.fixture(scope="module")
def real_inputs() -> core.data.RealInputs:
    """Load the embedded model with every network connection refused: it must work offline."""
    core.data._load_model.cache_clear()
    original = socket.socket.connect

    def refuse(self, *args, **kwargs):
        raise OSError("network access is disabled in this test")

    socket.socket.connect = refuse  # type: ignore[method-assign]
    try:
        return core.data.real()
    finally:
        socket.socket.connect = original  # type: ignore[method-assign]


def test_real_loads_offline_with_6_layers_of_12_heads(real_inputs: core.data.RealInputs) -> None:
    r = real_inputs
    n = len(r.tokens)
    assert n >= 8
    assert (r.layers, r.heads) == (6, 12)
    assert r.q.shape == r.k.shape == r.v.shape == (6, 12, n, 32)
    assert r.attentions.shape == (6, 12, n, n)
    assert r.tokens[0] == "[CLS]" and r.tokens[-1] == "[SEP]"
    assert r.model_name == "all-MiniLM-L6-v2"


def test_real_dense_softmax_reproduces_model_attention(real_inputs: core.data.RealInputs) -> None:
    r = real_inputs
    dense = torch.softmax(r.q.double() @ r.k.double().transpose(-1, -2), dim=-1)
    assert float((dense - r.attentions.double()).abs().max()) < 1e-5
    # and through the engine at temperature 1 (scale = 1, q is pre-scaled)
    engine = core.approximate("exact", r.q, r.k, r.v, scale=1.0).attention()
    assert float((engine.double() - r.attentions.double()).abs().max()) < 1e-5
    # the model's heads are neither uniform nor all one-hot
    entropy = metrics.mean_row_entropy(r.attentions.double())
    assert 0.5 < float(entropy.mean()) and float(entropy.max()) < math.log(r.q.shape[-2]) - 0.1


def test_real_head_selection(real_inputs: core.data.RealInputs) -> None:
    head = real_inputs.head(2, 5)
    assert torch.equal(head.q[0], real_inputs.q[2, 5])
    assert torch.equal(head.k[0], real_inputs.k[2, 5])
    with pytest.raises(ValueError, match="layer"):
        real_inputs.head(6, 0)
    with pytest.raises(ValueError, match="head"):
        real_inputs.head(0, 12)


def test_real_respects_max_tokens_and_custom_text() -> None:
    short = core.data.real("The cat sat on the mat.", max_tokens=5)
    assert short.q.shape[-2] == 5
    assert short.attentions.shape == (6, 12, 5, 5)
    dense = torch.softmax(short.q.double() @ short.k.double().transpose(-1, -2), dim=-1)
    assert float((dense - short.attentions.double()).abs().max()) < 1e-5
