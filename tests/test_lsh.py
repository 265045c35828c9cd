"""LSH sparse attention (Reformer/SMYRF): exactness with one bucket, recall vs rounds, union semantics, linear cost."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

import core
from core.approximation import prepare_inputs
from core.approximators.common import HASH_STREAM
from core.approximators.lsh import MAX_DIRECTIONS


class LargestTensor(TorchDispatchMode):
    """Records the largest tensor (in elements) any torch op produces while active."""

    def __init__(self) -> None:
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        out = func(*args, **(kwargs or {}))
        for item in tree_flatten(out)[0]:
            if isinstance(item, torch.Tensor):
                self.largest = max(self.largest, item.numel())
        return out


def masked_reference(q: torch.Tensor, k: torch.Tensor, beta: float, support: torch.Tensor) -> torch.Tensor:
    """Softmax restricted to the support, each pair counted once (the union of the rounds)."""
    logits = beta * q.double() @ k.double().transpose(-1, -2)
    weights = torch.exp(logits - logits.amax(-1, keepdim=True)) * support
    return weights / weights.sum(-1, keepdim=True)


@pytest.mark.parametrize("rounds", [1, 3])
@pytest.mark.parametrize("beta", [0.2, 2.0, 50.0])
def test_one_bucket_is_exact(rounds: int, beta: float) -> None:
    x = core.data.gaussian(70, 16, seed=0, heads=2, dtype=torch.float64)
    result = core.approximate("lsh", x.q, x.k, x.v, scale=beta, rounds=rounds, buckets=1)
    exact = torch.softmax(beta * x.q @ x.k.transpose(-1, -2), dim=-1)
    assert bool(result.parts["support"].all())
    torch.testing.assert_close(result.attention(), exact, rtol=0, atol=1e-10)
    torch.testing.assert_close(result.output, exact @ x.v, rtol=0, atol=1e-10)


@pytest.mark.parametrize(("rounds", "buckets"), [(1, 4), (2, 4), (4, 8), (3, 5)])
def test_output_is_softmax_over_the_union_of_rounds_each_pair_once(rounds: int, buckets: int) -> None:
    """Q != K (hashed separately); pairs found in several rounds must not be double counted."""
    x = core.data.gaussian(96, 16, seed=1, dtype=torch.float64)
    beta = 1.5
    result = core.approximate("lsh", x.q, x.k, x.v, scale=beta, seed=3, rounds=rounds, buckets=buckets)
    support = result.parts["support"]
    per_round = result.parts["support_rounds"]
    assert per_round.shape == (1, rounds, 96, 96)
    assert torch.equal(per_round.any(dim=1), support)
    if rounds > 1:
        assert bool((per_round.sum(1) > 1).any())  # some pairs are found twice: the case being tested
    reference = masked_reference(x.q, x.k, beta, support)
    torch.testing.assert_close(result.attention(), reference, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(result.output, reference @ x.v, rtol=1e-9, atol=1e-10)


def test_balanced_chunks_each_query_sees_about_n_over_buckets_keys_per_round() -> None:
    x = core.data.gaussian(128, 16, seed=2, dtype=torch.float64)
    result = core.approximate("lsh", x.q, x.k, x.v, rounds=2, buckets=8)
    per_round = result.parts["support_rounds"]
    keys_per_query = per_round.sum(-1)
    assert bool((keys_per_query == 16).all())  # 128 / 8, whatever the raw bucket sizes


def recall_of_top_entries(x: core.data.Inputs, beta: float, rounds: int, buckets: int, seeds: range) -> float:
    logits = x.q[0].double() @ x.k[0].double().T
    top = torch.zeros_like(logits, dtype=torch.bool).scatter(-1, logits.topk(8, dim=-1).indices, True)
    found = []
    for seed in seeds:
        support = core.approximate("lsh", x.q, x.k, x.v, scale=beta, seed=seed, rounds=rounds, buckets=buckets).parts[
            "support"
        ][0]
        found.append(float((support & top).sum() / top.sum()))
    return sum(found) / len(found)


def test_more_rounds_recall_more_of_the_true_top_entries() -> None:
    x = core.data.clustered(256, 32, clusters=16, spread=0.5, seed=0)
    recalls = [recall_of_top_entries(x, 4.0, rounds, 16, range(2)) for rounds in (1, 2, 4, 8)]
    assert all(a < b for a, b in zip(recalls, recalls[1:], strict=False)), recalls
    # and hashing is far better than chance (1/16 of keys per round)
    assert recalls[0] > 3 / 16, recalls


def test_lsh_finds_the_large_entries_better_than_chance_on_gaussian_qk() -> None:
    x = core.data.gaussian(256, 32, seed=4)
    recall = recall_of_top_entries(x, 1.0, 1, 16, range(4))
    assert recall > 1.5 / 16  # chance is 1/16 of the keys


def test_cost_grows_linearly_in_n_at_fixed_bucket_size() -> None:
    """O(n * bucket size): analytic memory and FLOPs, and the largest tensor actually built, grow ~linearly."""
    chunk = 32
    memory, flops, largest = {}, {}, {}
    for n in (1024, 2048, 4096):
        x = core.data.gaussian(n, 32, seed=0)
        with LargestTensor() as tracker:
            result = core.approximate("lsh", x.q, x.k, x.v, rounds=2, buckets=n // chunk)
        memory[n], flops[n], largest[n] = result.cost.memory, result.cost.flops, tracker.largest
        assert result.cost.memory < n * n / 8
    for n in (1024, 2048):
        assert memory[2 * n] / memory[n] == pytest.approx(2, rel=0.05), memory
        # sorting adds a log factor: allow 2.3 per doubling, a quadratic term would give ~4
        assert flops[2 * n] / flops[n] < 2.3, flops
    assert largest[4096] / largest[1024] < 4 * 1.25, largest


def test_fixed_bucket_count_memory_matches_budget() -> None:
    """With buckets fixed, chunk = n / buckets: the memory is rounds * n^2 / buckets (a fixed fraction)."""
    n = 1024
    x = core.data.gaussian(n, 16, seed=0)
    result = core.approximate("lsh", x.q, x.k, x.v, rounds=2, buckets=16)
    assert result.cost.memory == pytest.approx(2 * n * n / 16, rel=0.01)


@pytest.mark.parametrize("method", ["lsh", "scatterbrain"])
def test_a_repeated_input_is_hashed_once_with_the_same_result(method: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A temperature sweep stacks one q, k as an expanded view: the hashes of its first copy serve every copy."""
    from core.approximators import lsh, scatterbrain

    x = core.data.clustered(n=128, d=16, clusters=8, spread=0.2, seed=1, heads=2)
    betas = torch.tensor([0.5, 4.0, 30.0]).reshape(3, 1)
    stacked = [t.unsqueeze(0).expand(3, *t.shape) for t in (x.q, x.k, x.v)]
    params = {"rounds": 2, "buckets": 8} if method == "lsh" else {"rounds": 2, "buckets": 8, "features": 16}
    hashed: list[int] = []
    real_hash_plan = lsh.hash_plan
    for module in (lsh, scatterbrain):
        monkeypatch.setattr(
            module, "hash_plan", lambda inputs, *a: hashed.append(inputs.repeats) or real_hash_plan(inputs, *a)
        )
    shared = core.approximate(method, *stacked, scale=betas, seed=3, **params)
    copied = core.approximate(method, *[t.contiguous() for t in stacked], scale=betas, seed=3, **params)
    assert hashed[0] == 3 and hashed[-1] == 1
    torch.testing.assert_close(shared.attention(), copied.attention(), rtol=0, atol=0)
    torch.testing.assert_close(shared.output, copied.output, rtol=0, atol=0)


def test_the_angular_hash_is_the_argmax_over_xr_and_minus_xr() -> None:
    """Reformer's h(x) = argmax([x R, -x R]) on unit x: the engine takes the largest |x R| and its sign instead of
    building the concatenation; the buckets must be the concatenation's argmax, queries and keys alike."""
    x = core.data.gaussian(200, 16, seed=4, heads=2)
    result = core.approximate("lsh", x.q, x.k, x.v, scale=1.0, seed=7, rounds=3, buckets=8)
    rotations = prepare_inputs(x.q, x.k, x.v, 1.0, 7).randn(3, 16, 2 * MAX_DIRECTIONS, stream=HASH_STREAM)
    for side, t in enumerate((x.q, x.k)):
        unit = t.reshape(-1, 200, 16) / t.reshape(-1, 200, 16).norm(dim=-1, keepdim=True)
        rotated = torch.einsum("bnd,rdk->brnk", unit, rotations[..., :MAX_DIRECTIONS])
        expected = torch.cat([rotated, -rotated], dim=-1).argmax(dim=-1)
        found = result.parts["buckets"][:, :, side]
        assert found.shape == expected.shape
        assert bool((expected >= MAX_DIRECTIONS).any()) and bool((expected < MAX_DIRECTIONS).any())
        assert torch.equal(found, expected)


def test_float16_keeps_long_chunks_in_range() -> None:
    """With one bucket a chunk is the whole sequence: unnormalised weights times values summed over 4,096 keys
    would pass float16's 65,504 for values near 40, so the half path normalises before its product."""
    x = core.data.gaussian(4096, 16, seed=5, heads=1)
    v = x.v + 40.0
    exact = torch.softmax(0.1 * x.q @ x.k.transpose(-1, -2), dim=-1) @ v
    half = core.approximate("lsh", x.q.half(), x.k.half(), v.half(), scale=0.1, rounds=1, buckets=1).output
    assert bool(torch.isfinite(half).all())
    torch.testing.assert_close(half.float(), exact, rtol=0, atol=0.1)
