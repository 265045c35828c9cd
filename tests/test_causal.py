"""Causal attention (issue #30, item 2): the ``causal`` parameter, each method's own causal algorithm, parity with
the peers' causal modes, causality itself, and the refusals.

The peers (performer-pytorch, reformer-pytorch, local-attention) are benchmark requirements (requirements-bench.txt);
their tests skip where a peer is not installed, as tests/test_reference_knobs.py does.
"""

from __future__ import annotations

import functools
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import ci_env
import pytest
import torch
import torch.nn.functional as F

import core
from core import registry
from core.approximation import prepare_inputs
from core.approximators.common import masked_softmax
from core.approximators.exact import causal_mask
from core.approximators.lsh import causal_self_rule
from core.approximators.performer import projection_for

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py
REPO = Path(__file__).resolve().parent.parent

# Every causal method, with the settings that take its different causal paths.
CAUSAL_CASES: list[tuple[str, dict[str, Any]]] = [
    ("exact", {}),
    ("performer", {"features": 24}),
    ("performer", {"features": 24, "kernel": "trig"}),
    ("performer", {"features": 24, "kernel": "hyperbolic", "eps": 1e-3}),
    ("lsh", {"rounds": 3, "buckets": 5}),
    ("local", {"window": 6}),
    ("scatterbrain", {"features": 16, "support": "lsh", "rounds": 2, "buckets": 4}),
    ("scatterbrain", {"features": 16, "support": "local", "window": 5}),
    ("scatterbrain", {"features": 16, "support": "none"}),
    ("scatterbrain", {"features": 16, "support": "local", "window": 5, "kernel": "trig"}),
    ("topk", {"top_k": 5}),
    ("topk_renormalized", {"top_k": 5}),
    ("nsa", {"block": 8, "selected_blocks": 3, "window": 5}),
    ("moba", {"block": 8, "top_k": 3}),
    ("hedgehog", {"features": 8, "steps": 0}),  # a fitted map has read the whole input (its docstring)
    ("based", {"features": 4, "window": 5}),
]
CASE_IDS = [f"{method}-{'-'.join(str(v) for v in params.values()) or 'default'}" for method, params in CAUSAL_CASES]
# Methods whose sparse support comes from sorting every token's hash into balanced chunks (see the causality test).
HASHED = {("lsh", "lsh"), ("scatterbrain", "lsh")}


def _qkv(n: int = 70, d: int = 8, heads: int = 2, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Seeded float64 q, k, v of shape (heads, n, d), q and k scaled so that q . k has unit variance."""
    generator = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(heads, n, d, generator=generator, dtype=torch.float64) for _ in range(3))
    return q / d**0.25, k / d**0.25, v


# ---------------------------------------------------------------- the parameter


def test_every_method_has_a_causal_form_or_says_why_not() -> None:
    for name, spec in registry.methods().items():
        names = [p.name for p in spec.params]
        if spec.causal_form:
            assert names.count("causal") == 1, name
            assert spec.param("causal") is registry.CAUSAL_PARAM
            assert spec.defaults()["causal"] is False
        else:
            # No control for a toggle that could only be refused; and a reason of its own.
            assert "causal" not in names, name
            assert len(spec.no_causal_reason) > 20, name
    assert registry.causal_methods() == [
        "exact",
        "performer",
        "lsh",
        "local",
        "scatterbrain",
        "topk",
        "topk_renormalized",
        "nsa",
        "moba",
        "hedgehog",
        "based",
    ]


REFUSING = ["nystrom", "linformer", "vcc", "learned_kernel", "linear_elu", "svd", "rpca"]


@pytest.mark.parametrize("method", REFUSING)
def test_methods_without_a_causal_form_refuse_causal_true_and_say_why(method: str) -> None:
    q, k, v = _qkv(n=32)
    spec = registry.get(method)
    with pytest.raises(core.ParameterError, match=r"causal") as refused:
        core.approximate(method, q, k, v, causal=True)
    assert refused.value.parameter == f"{method}.causal"
    assert spec.no_causal_reason in str(refused.value)
    # causal=False is the method's only form: accepted, and it leaves the parameters (cache keys) as they were.
    assert spec.validate({"causal": False}, 32, 8) == spec.validate({}, 32, 8)
    with pytest.raises(core.ParameterError, match=r"causal: must be True or False"):
        spec.validate({"causal": "yes please"}, 32, 8)


def test_causal_false_changes_nothing() -> None:
    q, k, v = _qkv()
    for method, params in CAUSAL_CASES:
        plain = core.approximate(method, q, k, v, seed=4, scale=1.3, **params)
        explicit = core.approximate(method, q, k, v, seed=4, scale=1.3, causal=False, **params)
        assert torch.equal(plain.output, explicit.output), method
        assert plain.params == explicit.params and plain.params["causal"] is False


# ---------------------------------------------------------------- the causal results


@pytest.mark.parametrize(("method", "params"), CAUSAL_CASES, ids=CASE_IDS)
def test_causal_dense_matrix_is_lower_triangular_and_gives_the_output(method: str, params: dict[str, Any]) -> None:
    q, k, v = _qkv()
    result = core.approximate(method, q, k, v, seed=1, scale=1.7, causal=True, **params)
    attention = result.attention()
    assert torch.count_nonzero(torch.triu(attention, diagonal=1)) == 0
    torch.testing.assert_close(result.output, attention @ v, rtol=1e-9, atol=1e-10)
    if method != "topk":  # the sparse oracle keeps the k largest probabilities as they are (rows sum below 1)
        torch.testing.assert_close(attention.sum(-1), torch.ones(2, 70, dtype=torch.float64), rtol=1e-9, atol=1e-10)
    if "support" in result.parts:
        assert not bool(torch.triu(result.parts["support"], diagonal=1).any())
    # and the causal result is not the non-causal one
    full = core.approximate(method, q, k, v, seed=1, scale=1.7, **params)
    assert not torch.allclose(full.output, result.output)


def test_exact_causal_is_masked_softmax() -> None:
    q, k, v = _qkv(n=50)
    result = core.approximate("exact", q, k, v, scale=2.0, causal=True)
    reference = masked_softmax(2.0 * q @ k.transpose(-1, -2), causal_mask(50, q.device)) @ v
    torch.testing.assert_close(result.output, reference, rtol=1e-12, atol=1e-12)
    assert result.cost.memory == 2 * 50 * 51 // 2  # the pairs on and below the diagonal, two heads


@pytest.mark.parametrize("support", ["lsh", "local"])
def test_scatterbrain_with_a_full_causal_support_is_exact_causal_attention(support: str) -> None:
    q, k, v = _qkv()
    exact = core.approximate("exact", q, k, v, scale=1.5, causal=True)
    whole = {"buckets": 1} if support == "lsh" else {"window": 69}
    result = core.approximate("scatterbrain", q, k, v, scale=1.5, features=8, support=support, causal=True, **whole)
    torch.testing.assert_close(result.output, exact.output, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kernel", ["positive", "hyperbolic", "trig"])
def test_causal_performer_is_the_prefix_sum_of_its_features(kernel: str) -> None:
    """Against the plain float64 formula sum_{l <= i} phi(q_i).phi(k_l) v_l / sum_{l <= i} phi(q_i).phi(k_l), with
    key lengths growing along the sequence, so the running key reference rises in every block (3 blocks)."""
    n, m, beta = 150, 32, 0.8
    q, k, v = _qkv(n=n, d=8, heads=2, seed=9)
    k = k * torch.linspace(0.3, 2.5, n, dtype=torch.float64).unsqueeze(-1)
    result = core.approximate("performer", q, k, v, scale=beta, seed=4, features=m, kernel=kernel, causal=True)
    rows = m if kernel == "positive" else m // 2
    w = projection_for(prepare_inputs(q, k, v, beta, 4), rows, True)

    def phi(x: torch.Tensor) -> torch.Tensor:
        x = x * math.sqrt(beta)
        projected, half_norm = x @ w.T, 0.5 * (x * x).sum(-1, keepdim=True)
        if kernel == "positive":
            return torch.exp(projected - half_norm) / math.sqrt(m)
        if kernel == "hyperbolic":
            return torch.exp(-half_norm) * torch.cat([projected.exp(), (-projected).exp()], -1) / math.sqrt(m)
        return torch.exp(half_norm) * torch.cat([projected.sin(), projected.cos()], -1) / math.sqrt(m)

    weights = (phi(q) @ phi(k).transpose(-1, -2)).tril()
    expected = (weights @ v) / weights.sum(-1, keepdim=True)
    tolerance = 1e-8 if kernel == "trig" else 1e-11  # trig normalisers can come near 0
    torch.testing.assert_close(result.output, expected, rtol=tolerance, atol=tolerance)


def test_scatterbrain_without_support_is_causal_performer() -> None:
    q, k, v = _qkv()
    performer = core.approximate("performer", q, k, v, scale=1.5, seed=7, features=16, eps=1e-4, causal=True)
    scatterbrain = core.approximate(
        "scatterbrain", q, k, v, scale=1.5, seed=7, features=16, eps=1e-4, support="none", causal=True
    )
    torch.testing.assert_close(scatterbrain.output, performer.output, rtol=1e-12, atol=1e-14)


def test_scatterbrain_is_exact_on_the_causal_support_and_the_causal_estimate_off_it() -> None:
    q, k, v = _qkv()
    result = core.approximate("scatterbrain", q, k, v, scale=1.2, features=16, support="lsh", buckets=4, causal=True)
    omega = result.parts["support"]
    low_rank = result.parts["unnormalized_low_rank"]
    combined = result.parts["unnormalized_sparse"] + low_rank
    exact = torch.exp(1.2 * q @ k.transpose(-1, -2))
    torch.testing.assert_close(combined[omega], exact[omega], rtol=1e-10, atol=0)
    assert torch.count_nonzero(torch.triu(low_rank, diagonal=1)) == 0
    # the method's matrix is that combination, normalised
    attention = torch.where(omega, exact, low_rank)
    torch.testing.assert_close(result.attention(), attention / attention.sum(-1, keepdim=True), rtol=1e-9, atol=0)


def test_causal_lsh_follows_reformers_self_rule() -> None:
    q, k, v = _qkv()
    result = core.approximate("lsh", q, k, v, rounds=2, buckets=6, causal=True, seed=2)
    support = result.parts["support"]
    chunks = result.parts["support_rounds"].any(1)  # the rounds' causal chunk supports, before the rule
    diagonal = torch.eye(70, dtype=torch.bool)
    has_other = (chunks & ~diagonal).any(-1)
    assert bool(has_other.any()) and bool((~has_other).any())  # both kinds of row occur: the test can fail
    torch.testing.assert_close(support, (chunks & ~diagonal) | (diagonal & ~has_other.unsqueeze(-1)), rtol=0, atol=0)
    lonely = ~has_other
    torch.testing.assert_close(result.output[lonely], v[lonely], rtol=0, atol=0)  # alone: its own value


def test_causal_runs_batch_independently_under_a_temperature_sweep() -> None:
    q, k, v = _qkv(heads=1)
    scales = torch.tensor([0.5, 2.0, 4.0], dtype=torch.float64)
    stacked = [t.expand(3, -1, -1) for t in (q[0], k[0], v[0])]
    for method, params in CAUSAL_CASES:
        swept = core.approximate(method, *stacked, scale=scales, seed=3, causal=True, **params).output
        for index, beta in enumerate(scales.tolist()):
            alone = core.approximate(method, q[0], k[0], v[0], scale=beta, seed=3, causal=True, **params).output
            torch.testing.assert_close(swept[index], alone, rtol=1e-10, atol=1e-12, msg=method)


@pytest.mark.parametrize("method", ["exact", "performer", "lsh", "local", "scatterbrain", "nsa", "moba"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_causal_stays_near_float32(method: str, dtype: torch.dtype) -> None:
    q, k, v = (t.to(dtype) for t in _qkv(n=96, heads=2, seed=5))
    params = {"features": 16, "buckets": 4, "window": 8} if method == "scatterbrain" else {}
    half = core.approximate(method, q, k, v, scale=2.0, causal=True, **params).output
    wide = core.approximate(method, q.float(), k.float(), v.float(), scale=2.0, causal=True, **params).output
    assert half.dtype == dtype
    error = float((half.float() - wide).norm() / wide.norm())
    # the non-causal paths' stated bound (core.approximation.HALF_ERROR_FACTOR), with a margin of 2
    assert error < 2 * core.approximation.half_error_bound(method, dtype), error


# ---------------------------------------------------------------- causality itself


@pytest.mark.parametrize(("method", "params"), CAUSAL_CASES, ids=CASE_IDS)
def test_rows_do_not_see_later_keys_and_values(method: str, params: dict[str, Any]) -> None:
    q, k, v = _qkv()
    cut = 40  # rows <= cut must not move when anything after position cut changes
    base = core.approximate(method, q, k, v, seed=5, scale=1.4, causal=True, **params).output
    v_later = v.clone()
    v_later[:, cut + 1 :] = 100 * torch.randn_like(v_later[:, cut + 1 :])
    moved = core.approximate(method, q, k, v_later, seed=5, scale=1.4, causal=True, **params).output
    torch.testing.assert_close(moved[:, : cut + 1], base[:, : cut + 1], rtol=0, atol=1e-12)
    assert not torch.allclose(moved[:, cut + 1 :], base[:, cut + 1 :])  # the change is seen where it may be
    k_later = k.clone()
    if (method, params.get("support", "lsh")) in HASHED:
        # Balanced chunks cut the hash-sorted sequence, so a later key's hash moves the chunk boundaries of earlier
        # tokens (Reformer and SMYRF chunk the same way). Angular hashes ignore a key's length: scaling later keys
        # keeps the chunks, so this checks that no later key's score or value reaches an earlier row.
        k_later[:, cut + 1 :] *= 7.0
    else:
        # Later keys 30 times longer: with a global shift of the key features (performer's non-causal path)
        # the earlier keys would underflow; with per-key shifts they are untouched.
        k_later[:, cut + 1 :] = 30 * torch.randn_like(k_later[:, cut + 1 :])
    moved = core.approximate(method, q, k_later, v, seed=5, scale=1.4, causal=True, **params).output
    torch.testing.assert_close(moved[:, : cut + 1], base[:, : cut + 1], rtol=0, atol=1e-12)
    assert not torch.allclose(moved[:, cut + 1 :], base[:, cut + 1 :])
    q_later = q.clone()
    q_later[:, cut + 1 :] = torch.randn_like(q_later[:, cut + 1 :])
    if (method, params.get("support", "lsh")) not in HASHED:  # (a query's hash moves chunk boundaries too)
        moved = core.approximate(method, q_later, k, v, seed=5, scale=1.4, causal=True, **params).output
        torch.testing.assert_close(moved[:, : cut + 1], base[:, : cut + 1], rtol=0, atol=1e-12)


def test_non_causal_performer_fails_the_causality_check() -> None:
    """The check above can fail: non-causal performer's earlier rows move with later keys."""
    q, k, v = _qkv()
    base = core.approximate("performer", q, k, v, seed=5, features=24).output
    k_later = k.clone()
    k_later[:, 41:] = 30 * torch.randn_like(k_later[:, 41:])
    moved = core.approximate("performer", q, k_later, v, seed=5, features=24).output
    assert not torch.allclose(moved[:, :41], base[:, :41], rtol=0, atol=1e-12)


# ---------------------------------------------------------------- parity with the peers' causal modes


@pytest.fixture
def performer_peer() -> Any:
    return ci_env.import_or_unavailable("performer_pytorch.performer_pytorch")


def test_performer_matches_performer_pytorch_causal_fast_attention(performer_peer: Any, monkeypatch: Any) -> None:
    """FastAttention(causal=True) with our projection, its stabilisers off: the same numbers.

    What is switched off, and why exact agreement needs it: softmax_kernel's eps = 1e-4 is relative to the largest
    feature of ALL keys (later ones included) and causal_linear_attention_noncuda adds 1e-6 to every prefix sum of
    the normaliser. Both are stabilisers of the reference, not of the estimator; ours is eps relative to each key's
    own largest feature (see the next test)."""
    q, k, v = (t.unsqueeze(0) for t in _qkv(n=150, d=16, heads=3, seed=5))  # (1, heads, n, d); two causal blocks
    m = 48
    module = performer_peer.FastAttention(dim_heads=16, nb_features=m, causal=True).double()
    module.projection_matrix.copy_(projection_for(prepare_inputs(q, k, v, None, 9), m, True))
    monkeypatch.setattr(performer_peer, "softmax_kernel", functools.partial(performer_peer.softmax_kernel, eps=0.0))
    module.causal_linear_fn = functools.partial(performer_peer.causal_linear_attention_noncuda, eps=0.0)
    theirs = module(q, k, v)
    ours = core.approximate("performer", q, k, v, seed=9, features=m, orthogonal=True, causal=True).output
    torch.testing.assert_close(ours, theirs, rtol=1e-10, atol=1e-12)


def test_performer_pytorch_causal_stabiliser_sees_later_keys_ours_does_not(performer_peer: Any) -> None:
    """Where the two differ with the reference's defaults: its key stabiliser is relative to the global key
    maximum, so its row i moves when later keys change; ours (eps relative to each key's own maximum) does not."""
    q, k, v = (t.unsqueeze(0) for t in _qkv(n=96, d=16, heads=2, seed=6))
    m = 32
    module = performer_peer.FastAttention(dim_heads=16, nb_features=m, causal=True).double()
    module.projection_matrix.copy_(projection_for(prepare_inputs(q, k, v, None, 2), m, True))
    k_later = k.clone()
    k_later[..., 48:, :] *= 3.0
    theirs_moved = float((module(q, k_later, v) - module(q, k, v))[..., :48, :].abs().max())
    ours = [
        core.approximate("performer", q, x, v, seed=2, features=m, eps=1e-4, causal=True).output for x in (k, k_later)
    ]
    assert theirs_moved > 1e-3
    torch.testing.assert_close(ours[1][..., :48, :], ours[0][..., :48, :], rtol=0, atol=1e-12)


def test_lsh_matches_reformer_causal_on_the_same_full_support() -> None:
    """reformer-pytorch's causal LSHAttention against ours where both supports are every earlier token.

    Reformer hashes shared QK into n / bucket_size buckets, sorts, and lets each chunk see itself and the chunk
    before it; ours hashes q and k apart into balanced chunks with no look-back, so on a real hash the supports
    differ and no seed makes them the same. With two Reformer chunks (each looking back at the other) and one
    chunk of ours, both supports are all earlier tokens, and the causal masking and self rule are compared."""
    peer = ci_env.import_or_unavailable("reformer_pytorch")
    q, _, v = _qkv(n=64, d=8, heads=2, seed=1)
    beta = 0.7
    module = peer.LSHAttention(bucket_size=32, n_hashes=1, causal=True)
    torch.manual_seed(0)
    # dots = qk . normalize(qk) * d^-1/2: pre-scaled by beta sqrt(d) (benchmarks/peers.reformer_peer)
    theirs = module(q * (beta * math.sqrt(8)), v)[0]
    ours = core.approximate("lsh", q, F.normalize(q, dim=-1), v, scale=beta, rounds=1, buckets=1, causal=True)
    torch.testing.assert_close(ours.output, theirs, rtol=1e-12, atol=1e-12)


def test_reformer_causal_is_a_softmax_on_its_support_under_our_self_rule() -> None:
    """On a real hash (8 chunks), Reformer's causal output is the shared-QK softmax over its own support with the
    rule ``causal_self_rule`` implements (float32: its return_attn path needs it)."""
    peer = ci_env.import_or_unavailable("reformer_pytorch")
    q, _, v = (t.float() for t in _qkv(n=64, d=8, heads=2, seed=1))
    beta = 0.7
    module = peer.LSHAttention(bucket_size=8, n_hashes=1, causal=True, return_attn=True)
    torch.manual_seed(0)
    output, attention, _ = module(q * (beta * math.sqrt(8)), v)
    support = causal_self_rule(attention > 0)
    assert torch.count_nonzero(torch.triu(attention, diagonal=1)) == 0
    assert int(support.sum()) < 64 * 65  # a real hash: most earlier tokens are out
    logits = beta * q @ F.normalize(q, dim=-1).transpose(-1, -2)
    torch.testing.assert_close(masked_softmax(logits, support) @ v, output, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(support, attention > 0, rtol=0, atol=0)  # already under the rule: no self pairs


@pytest.mark.parametrize(("n", "window"), [(37, 5), (64, 8), (50, 1)])
def test_local_matches_local_attention_causal_windows(n: int, window: int) -> None:
    peer = ci_env.import_or_unavailable("local_attention")
    q, k, v = _qkv(n=n, d=8, heads=2, seed=n)
    module = peer.LocalAttention(
        window_size=window,
        causal=True,
        look_backward=1,
        look_forward=0,
        dropout=0.0,
        autopad=True,
        exact_windowsize=True,
        scale=0.9,
        dim=8,
        use_rotary_pos_emb=False,
    ).eval()
    theirs = module(q, k, v)
    ours = core.approximate("local", q, k, v, window=window, scale=0.9, causal=True)
    torch.testing.assert_close(ours.output, theirs, rtol=1e-12, atol=1e-12)
    # keys i - w .. i: 2 blocks of w keys per query block, not the non-causal 3
    full = core.approximate("local", q, k, v, window=window, scale=0.9)
    assert 3 * ours.cost.memory == 2 * full.cost.memory


# ---------------------------------------------------------------- memory: never an n x n mask on the efficient path

MEMORY_N = 16384
MEMORY_SCRIPT = r"""
import json, sys
import torch
torch.set_num_threads(1)
import core

n, d = int(sys.argv[1]), 64
g = torch.Generator().manual_seed(0)

def inputs(size):
    return [torch.randn(1, size, d, generator=g) / d ** 0.25 for _ in range(3)]

def peak_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024

def reset_peak():  # the high-water mark back to the current RSS (tests/test_memory.py)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")

out = {}
q, k, v = inputs(n)
reset_peak()
before = peak_bytes()
block = torch.ones(n, n // 8)  # the control: exactly 1/8 of an n x n float32 matrix
out["control"] = {"growth": peak_bytes() - before}
del block
for method in ("performer", "lsh", "local", "scatterbrain"):
    core.approximate(method, *inputs(1024), **{**core.budget_params(method, 1024, d, 1 / 64), "causal": True})
    params = {**core.budget_params(method, n, d, 1 / 64), "causal": True}
    reset_peak()
    before = peak_bytes()
    result = core.approximate(method, q, k, v, **params)
    assert bool(torch.isfinite(result.output).all())
    out[method] = {"growth": peak_bytes() - before, "cost_memory": result.cost.memory}
    del result
print(json.dumps(out))
"""


def test_causal_paths_peak_below_an_eighth_of_n_squared() -> None:
    """At n = 16384 (budget 1/64) each causal path grows the peak RSS by less than 1/8 of an n x n float32 matrix
    (128 MiB; an n x n boolean mask alone is 256 MiB), as tests/test_memory.py checks for the non-causal paths."""
    ci_env.require(Path("/proc/self/clear_refs").exists(), "needs Linux's peak-RSS reset (/proc/self/clear_refs)")
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", MEMORY_SCRIPT, str(MEMORY_N)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    measured = json.loads(done.stdout.strip().splitlines()[-1])
    limit = MEMORY_N * MEMORY_N * 4 // 8
    assert measured.pop("control")["growth"] >= 0.9 * limit  # the measurement sees such a tensor
    for method, one in measured.items():
        assert one["growth"] < limit, (method, one)
        assert one["cost_memory"] < MEMORY_N * MEMORY_N / 8, (method, one)


def test_a_mode_switch_and_the_budgets_knobs_combine_in_one_call() -> None:
    # The README's engine call with the causal switch added (#42: it raised "got multiple values for 'causal'").
    import core

    n, d = 64, 16
    q, k, v = (torch.randn(n, d, generator=torch.Generator().manual_seed(i)) for i in range(3))
    for name in core.registry.causal_methods():
        out = core.approximate(name, q, k, v, causal=True, **core.budget_params(name, n, d, 1 / 8))
        assert out.params["causal"] is True, name
    # A method without a causal form refuses in words, naming itself and why, not in code.
    with pytest.raises(core.Refusal) as refused:
        core.approximate("nystrom", q, k, v, causal=True, **core.budget_params("nystrom", n, d, 1 / 8))
    message = str(refused.value)
    assert message.startswith("Nystrom cannot run under the causal mask: ") and "causal=True" not in message
    assert refused.value.parameter == "nystrom.causal"
