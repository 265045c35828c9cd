"""SMYRF's hashing for lsh and scatterbrain (hashing="xbox_e2lsh"): the XBOX+ transform, the E2LSH buckets, seeded
draws, the angular default unchanged, and where each hashing finds more of the true top keys."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

import core
from core.approximation import prepare_inputs
from core.approximators import smyrf_hashing
from core.approximators.common import HASH_STREAM
from core.errors import ParameterError

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def varied_norms(n: int, d: int, seed: int, heads: int = 2) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Queries and keys whose norms differ by factors of e and more (log-normal scales)."""
    g = torch.Generator().manual_seed(seed)

    def draw() -> torch.Tensor:
        scales = torch.exp(torch.randn(heads, n, 1, generator=g, dtype=torch.float64))
        return torch.randn(heads, n, d, generator=g, dtype=torch.float64) * scales

    return draw(), draw(), torch.randn(heads, n, d, generator=g, dtype=torch.float64)


def test_xbox_plus_keeps_every_inner_product_and_puts_queries_and_keys_on_one_sphere() -> None:
    q, k, _ = varied_norms(40, 8, seed=0)
    q_wide, k_wide = smyrf_hashing.xbox_plus(q, k)
    assert q_wide.shape == k_wide.shape == (2, 40, 8 + smyrf_hashing.XBOX_EXTRA)
    torch.testing.assert_close(q_wide @ k_wide.transpose(-1, -2), q @ k.transpose(-1, -2), rtol=0, atol=1e-12)
    # Every transformed query and key of a head has norm M = sqrt(M_Q^2 + M_K^2) (per head, not over the batch).
    common = q.norm(dim=-1).amax(-1) ** 2 + k.norm(dim=-1).amax(-1) ** 2  # (heads,)
    assert not torch.allclose(common[0], common[1])  # the heads differ, so a batch-wide maximum would fail
    for wide in (q_wide, k_wide):
        torch.testing.assert_close(wide.square().sum(-1), common[:, None].expand(2, 40), rtol=1e-12, atol=0)
    # Hence |T(q) - T(k)|^2 = 2 M^2 - 2 q.k: the Euclidean order of the pairs is their inner-product order.
    distances = torch.cdist(q_wide, k_wide) ** 2
    torch.testing.assert_close(distances, 2 * common[:, None, None] - 2 * q @ k.transpose(-1, -2), rtol=1e-9, atol=1e-9)


def test_e2lsh_bucket_is_floor_of_shifted_projection_over_width() -> None:
    projection = torch.tensor([[[-2.5, -1.0, -0.2, 0.0, 0.3, 1.0, 2.999, 7.5]]], dtype=torch.float64)
    expected = [[[math.floor(p / smyrf_hashing.E2LSH_WIDTH) for p in projection[0, 0].tolist()]]]
    assert smyrf_hashing.e2lsh_buckets(projection).tolist() == expected
    directions, offsets = smyrf_hashing.e2lsh_draws(torch.Generator().manual_seed(0), 500, 3)
    assert bool((offsets >= 0).all()) and bool((offsets < smyrf_hashing.E2LSH_WIDTH).all())  # b ~ U(0, r)
    assert abs(float(directions.mean())) < 0.1 and abs(float(directions.std()) - 1) < 0.1  # a ~ N(0, I)


@pytest.mark.parametrize("method", ["lsh", "scatterbrain"])
def test_engine_hashes_by_xbox_plus_then_e2lsh_with_its_seeded_draws(method: str) -> None:
    """The engine's buckets are floor((a.T(x) + b) / r) of the call's seeded draws, and its chunks cut the rows
    sorted by a.T(x) + b (SMYRF's order) into equal clusters."""
    q, k, v = varied_norms(30, 6, seed=1)
    rounds, buckets, seed = 3, 5, 17
    params = {"rounds": rounds, "buckets": buckets, "hashing": "xbox_e2lsh"}
    extra = {"features": 4} if method == "scatterbrain" else {}
    result = core.approximate(method, q, k, v, seed=seed, **params, **extra)
    generator = prepare_inputs(q, k, v, None, seed).generator(HASH_STREAM)
    directions, offsets = smyrf_hashing.e2lsh_draws(generator, rounds, 6 + smyrf_hashing.XBOX_EXTRA)
    plan = core.approximators.lsh.hash_plan(prepare_inputs(q, k, v, None, seed), rounds, buckets, "xbox_e2lsh")
    for side, wide in enumerate(smyrf_hashing.xbox_plus(q, k)):
        projection = torch.einsum("bnd,rd->brn", wide, directions) + offsets[:, None]
        by_hand = [
            [[math.floor(p / smyrf_hashing.E2LSH_WIDTH) for p in row] for row in head] for head in projection.tolist()
        ]
        chunk = math.ceil(30 / buckets)
        chunks = projection.argsort(dim=-1, stable=True).argsort(dim=-1) // chunk
        if method == "lsh":
            assert result.parts["buckets"][:, :, side].tolist() == by_hand
            assert torch.equal(result.parts["chunks"][:, :, side], chunks)
        else:
            assert torch.equal((plan.q_chunk, plan.k_chunk)[side], chunks)
    expected_support = (plan.q_chunk.unsqueeze(-1) == plan.k_chunk.unsqueeze(-2)).any(dim=1)
    assert torch.equal(result.parts["support"], expected_support)


@pytest.mark.parametrize("method", ["lsh", "scatterbrain"])
def test_xbox_e2lsh_is_deterministic_in_the_seed(method: str) -> None:
    q, k, v = varied_norms(48, 8, seed=2)
    extra = {"features": 4} if method == "scatterbrain" else {}

    def run(seed: int) -> core.Approximation:
        return core.approximate(method, q, k, v, seed=seed, rounds=2, buckets=6, hashing="xbox_e2lsh", **extra)

    first, again, other = run(5), run(5), run(6)
    assert torch.equal(first.output, again.output)
    assert torch.equal(first.parts["support_rounds"], again.parts["support_rounds"])
    assert not torch.equal(first.parts["support_rounds"], other.parts["support_rounds"])


@pytest.mark.parametrize("rounds", [1, 3])
def test_xbox_e2lsh_output_is_softmax_over_its_support_and_one_bucket_is_exact(rounds: int) -> None:
    q, k, v = varied_norms(50, 8, seed=3)
    beta = 0.7
    result = core.approximate("lsh", q, k, v, scale=beta, seed=4, rounds=rounds, buckets=5, hashing="xbox_e2lsh")
    logits = beta * q @ k.transpose(-1, -2)
    weights = torch.exp(logits - logits.amax(-1, keepdim=True)) * result.parts["support"]
    reference = weights / weights.sum(-1, keepdim=True)
    torch.testing.assert_close(result.output, reference @ v, rtol=1e-9, atol=1e-10)
    assert bool((result.parts["support_rounds"].sum(-1) == 10).all())  # balanced: n / buckets keys per round
    whole = core.approximate("lsh", q, k, v, scale=beta, rounds=rounds, buckets=1, hashing="xbox_e2lsh")
    torch.testing.assert_close(whole.output, torch.softmax(logits, -1) @ v, rtol=0, atol=1e-10)


def test_scatterbrain_lsh_support_is_the_same_hashing_as_lsh() -> None:
    q, k, v = varied_norms(40, 8, seed=4)
    params = {"rounds": 2, "buckets": 4, "hashing": "xbox_e2lsh"}
    lsh = core.approximate("lsh", q, k, v, seed=9, **params)
    sb = core.approximate("scatterbrain", q, k, v, seed=9, features=4, **params)
    assert torch.equal(lsh.parts["support"], sb.parts["support"])
    assert torch.equal(lsh.parts["support_rounds"], sb.parts["support_rounds"])


# Chunk ids of the angular hashing before the hashing choice existed: core.data.gaussian(24, 8, seed=5, heads=2,
# float64), seed 11, 2 rounds, 4 buckets; per head and round, the queries' then the keys' chunk of each position.
ANGULAR_CHUNKS = (
    (
        ("123110230033113202020231", "023231211320023203130011"),
        ("220322203111301010333201", "101103023003223221332011"),
    ),
    (
        ("103222311231331001230002", "333133310020121102201220"),
        ("021000123221331121020333", "023031332233022112001101"),
    ),
)
# Their outputs, [head 0, row 0, :3] and [head 1, row 5, :3] (scatterbrain with 8 features).
ANGULAR_OUTPUTS = {
    "lsh": (
        (-0.334979865304798, 0.045031079156873, 0.132436981866253),
        (0.239345472019553, -0.389926006835336, -0.420168509483962),
    ),
    "scatterbrain": (
        (-0.237039101144242, -0.073043921725635, 0.072926333962149),
        (0.048393425783037, 0.046850224848701, -0.128813956473216),
    ),
}


@pytest.mark.parametrize("hashing", [None, "angular"])
@pytest.mark.parametrize("method", ["lsh", "scatterbrain"])
def test_angular_hashing_is_unchanged(method: str, hashing: str | None) -> None:
    x = core.data.gaussian(24, 8, seed=5, heads=2, dtype=torch.float64)
    params = {"rounds": 2, "buckets": 4, **({"hashing": hashing} if hashing else {})}
    extra = {"features": 8} if method == "scatterbrain" else {}
    result = core.approximate(method, x.q, x.k, x.v, scale=1.0, seed=11, **params, **extra)
    assert result.params["hashing"] == "angular"
    expected = torch.tensor([[[[int(c) for c in side] for side in rnd] for rnd in head] for head in ANGULAR_CHUNKS])
    chunks = core.approximate("lsh", x.q, x.k, x.v, scale=1.0, seed=11, **params).parts["chunks"]
    assert torch.equal(chunks, expected)
    first, second = ANGULAR_OUTPUTS[method]
    got = (result.output[0, 0, :3], result.output[1, 5, :3])
    torch.testing.assert_close(got[0], torch.tensor(first, dtype=torch.float64), rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(got[1], torch.tensor(second, dtype=torch.float64), rtol=1e-9, atol=1e-12)


def top_key_recall(
    q: torch.Tensor, k: torch.Tensor, hashing: str, seeds: range, rounds: int, buckets: int, top: int = 8
) -> float:
    """Share of each query's ``top`` keys by q.k that lsh's support finds, averaged over hash seeds."""
    logits = q @ k.transpose(-1, -2)
    top_keys = torch.zeros_like(logits, dtype=torch.bool).scatter(-1, logits.topk(top, dim=-1).indices, True)
    found = []
    for seed in seeds:
        support = core.approximate("lsh", q, k, k, seed=seed, rounds=rounds, buckets=buckets, hashing=hashing).parts[
            "support"
        ]
        found.append(float((support & top_keys).sum() / top_keys.sum()))
    return sum(found) / len(found)


def test_xbox_e2lsh_recalls_more_top_keys_when_key_norms_differ_and_keys_share_an_offset() -> None:
    """Keys with log-normal norms around a shared offset (as trained heads' keys have): cosine and inner-product
    rankings differ, angular hashing sees nearly one direction for every key, XBOX+ keeps q.k."""
    g = torch.Generator().manual_seed(0)
    n, d = 128, 16
    offset = 4 * torch.nn.functional.normalize(torch.randn(d, generator=g, dtype=torch.float64), dim=0)
    q = torch.randn(2, n, d, generator=g, dtype=torch.float64)
    k = torch.randn(2, n, d, generator=g, dtype=torch.float64) * torch.exp(
        torch.randn(2, n, 1, generator=g, dtype=torch.float64)
    )
    k = k + offset
    by_product = (q @ k.transpose(-1, -2)).topk(8, dim=-1).indices
    by_cosine = (q @ torch.nn.functional.normalize(k, dim=-1).transpose(-1, -2)).topk(8, dim=-1).indices
    shared = (by_product.unsqueeze(-1) == by_cosine.unsqueeze(-2)).any(-1).double().mean()
    assert shared < 0.75, shared  # the rankings differ: the case being tested
    angular, smyrf = (top_key_recall(q, k, hashing, range(3), 4, 8) for hashing in ("angular", "xbox_e2lsh"))
    assert smyrf > 1.1 * angular, (smyrf, angular)


def test_angular_recalls_more_top_keys_on_the_clustered_input() -> None:
    """Process 1 (K = Q, norms near 1): cosine and inner product agree, and angular's 64 x 64 codes separate the
    clusters better than one E2LSH projection per round. This is why angular stays the default."""
    x = core.data.clustered(256, 32, 32, 0.3, seed=0, heads=1, dtype=torch.float64)
    angular, smyrf = (top_key_recall(x.q, x.k, hashing, range(2), 2, 16) for hashing in ("angular", "xbox_e2lsh"))
    assert angular > 1.1 * smyrf, (angular, smyrf)


@pytest.mark.parametrize("method", ["lsh", "scatterbrain"])
def test_an_unknown_hashing_is_refused_naming_the_choices(method: str) -> None:
    q, k, v = varied_norms(16, 4, seed=6)
    with pytest.raises(ParameterError, match=r"hashing.*'angular', 'xbox_e2lsh'"):
        core.approximate(method, q, k, v, hashing="cosine")


@pytest.mark.parametrize("method", ["lsh", "scatterbrain"])
def test_half_inputs_and_temperature_sweeps_hash_like_their_float32_single_calls(method: str) -> None:
    x = core.data.clustered(256, 8, 8, 0.3, seed=1, heads=2)
    q, k, v = (t.bfloat16() for t in (x.q, x.k, x.v))
    params = {"seed": 3, "rounds": 2, "buckets": 32, "hashing": "xbox_e2lsh"}  # chunks of 8: hashing in bf16 moves some
    half = core.approximate(method, q, k, v, scale=2.0, **params)
    wide = core.approximate(method, q.float(), k.float(), v.float(), scale=2.0, **params)
    assert torch.equal(half.parts["support_rounds"], wide.parts["support_rounds"])
    # A sweep stacks one q and k over a tensor scale; its plan is hashed once and must be each single call's.
    stacked = (t.float().expand(3, *t.shape) for t in (q, k, v))
    sweep = core.approximate(method, *stacked, scale=torch.tensor([[1.0], [2.0], [4.0]]), **params)
    torch.testing.assert_close(sweep.output[1], wide.output, rtol=1e-5, atol=1e-6)


def test_the_hashing_benchmark_writes_both_hashings_for_every_row(tmp_path: Path) -> None:
    from benchmarks import hashing

    result = hashing.main(["--quick", "--real-heads", "2", "--repeats", "1", "--out", str(tmp_path)])
    sources = {row["source"] for row in result["rows"]}
    assert sources == {"clustered", "offset keys", "real"}
    assert {row["method"] for row in result["rows"]} == {"lsh", "scatterbrain"}
    for row in result["rows"]:
        for name in ("angular", "xbox_e2lsh"):
            assert 0 <= row[name]["top_key_recall"] <= 1 and row[name]["output_error"] >= 0 and row[name]["seconds"] > 0
    table = (tmp_path / "hashing_quick.md").read_text()
    assert table.count("| lsh |") == table.count("| scatterbrain |") == 3
