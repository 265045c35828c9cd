"""Exact softmax attention against an independent float64 reference."""

from __future__ import annotations

import math

import pytest
import torch

import core


def reference_attention(q: torch.Tensor, k: torch.Tensor, scale: float) -> torch.Tensor:
    """softmax(scale q k^T) in float64, written out by hand (max-shifted exp / row sum)."""
    logits = scale * (q.double() @ k.double().transpose(-1, -2))
    logits = logits - logits.amax(-1, keepdim=True)
    weights = torch.exp(logits)
    return weights / weights.sum(-1, keepdim=True)


@pytest.mark.parametrize("shape", [(), (3,), (2, 3)])
@pytest.mark.parametrize("scale", [None, 0.0, 0.3, 2.0])
def test_exact_matches_float64_reference(shape: tuple[int, ...], scale: float | None, random_qkv) -> None:
    n, d, dv = 37, 16, 24
    q, k, v = random_qkv(shape, n, d, dv, seed=1)
    beta = 1.0 / math.sqrt(d) if scale is None else scale
    ref = reference_attention(q, k, beta)
    result = core.approximate("exact", q, k, v, scale=scale)
    assert result.output.shape == (*shape, n, dv)
    assert result.output.dtype == torch.float64
    torch.testing.assert_close(result.attention(), ref, rtol=0, atol=1e-12)
    torch.testing.assert_close(result.output, ref @ v, rtol=0, atol=1e-10)


def test_exact_float32_within_1e6_of_float64_reference(random_qkv) -> None:
    n, d, dv = 128, 64, 64
    q, k, v = random_qkv((4,), n, d, dv, seed=2, dtype=torch.float32)
    ref = reference_attention(q, k, 1.0 / math.sqrt(d))
    result = core.approximate("exact", q, k, v)
    assert result.output.dtype == torch.float32
    assert float((result.attention().double() - ref).abs().max()) < 1e-6
    assert float((result.output.double() - ref @ v.double()).abs().max()) < 1e-6


def test_rows_sum_to_one_and_nonnegative_even_at_low_temperature(random_qkv) -> None:
    q, k, v = random_qkv((2,), 50, 8, 8, seed=3)
    attention = core.approximate("exact", q, k, v, scale=500.0).attention()
    assert bool(torch.isfinite(attention).all())
    assert float(attention.min()) >= 0
    torch.testing.assert_close(attention.sum(-1), torch.ones(2, 50, dtype=torch.float64), rtol=0, atol=1e-12)


def test_zero_scale_is_uniform_average(random_qkv) -> None:
    q, k, v = random_qkv((), 20, 4, 3, seed=4)
    result = core.approximate("exact", q, k, v, scale=0.0)
    torch.testing.assert_close(result.output, v.mean(0, keepdim=True).expand(20, 3), rtol=0, atol=1e-12)


def test_tensor_scale_equals_separate_calls(random_qkv) -> None:
    q, k, v = random_qkv((3, 2), 24, 8, 8, seed=5)
    betas = torch.tensor([0.1, 1.0, 7.0], dtype=torch.float64)
    batched = core.approximate("exact", q, k, v, scale=betas[:, None])
    for i, beta in enumerate(betas.tolist()):
        single = core.approximate("exact", q[i], k[i], v[i], scale=beta)
        torch.testing.assert_close(batched.output[i], single.output, rtol=0, atol=1e-12)
        torch.testing.assert_close(batched.attention()[i], reference_attention(q[i], k[i], beta), rtol=0, atol=1e-12)


def test_numpy_inputs_accepted(random_qkv) -> None:
    q, k, v = random_qkv((), 10, 4, 4, seed=6)
    q, k, v = q.cpu(), k.cpu(), v.cpu()  # NumPy arrays live on the host whatever torch's default device
    result = core.approximate("exact", q.numpy(), k.numpy(), v.numpy(), scale=0.5)
    torch.testing.assert_close(result.output, reference_attention(q, k, 0.5) @ v, rtol=0, atol=1e-12)


def test_cost_is_quadratic_memory(random_qkv) -> None:
    q, k, v = random_qkv((2, 3), 40, 8, 8, seed=7)
    cost = core.approximate("exact", q, k, v).cost
    assert cost.memory == 6 * 40 * 40
    assert cost.flops >= 6 * 2 * 40 * 40 * 8
