"""NSA, MoBA, Hedgehog and Based (issue #40): parity with short, plainly written references of the papers' equations
(flash-linear-attention's naive files need its Triton imports), and the sanity limits each paper implies."""

from __future__ import annotations

import math

import pytest
import torch

import core
from core.approximators.based import taylor_features
from core.approximators.hedgehog import HedgehogMap, log_features

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def _qkv(n: int = 70, d: int = 8, heads: int = 2, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(heads, n, d, generator=generator, dtype=torch.float64) for _ in range(3))
    return q / d**0.25, k / d**0.25, v


def _softmax_on(logits: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    return torch.softmax(logits.masked_fill(~keep, float("-inf")), dim=-1)


def _exact(q, k, v, scale: float, causal: bool) -> torch.Tensor:
    return core.approximate("exact", q, k, v, scale=scale, causal=causal).output


# ---------------------------------------------------------------- MoBA


def moba_reference(q, k, v, scale: float, block: int, top_k: int, causal: bool) -> torch.Tensor:
    """Eq. 6 and Alg. 1 row by row: gate <q_i, mean K_b>, own block forced, future blocks masked, top-k, one
    softmax over the chosen blocks' tokens (j <= i when causal). Ties: the lower block first."""
    heads, n, _ = q.shape
    blocks = math.ceil(n / block)
    out = torch.empty(heads, n, v.shape[-1], dtype=v.dtype)
    for h in range(heads):
        means = torch.stack([k[h, b * block : (b + 1) * block].mean(0) for b in range(blocks)])
        for i in range(n):
            own = i // block
            gate = [float(q[h, i] @ means[b]) for b in range(blocks)]
            allowed = [b for b in range(blocks) if not causal or b <= own]
            ranked = sorted((b for b in allowed if b != own), key=lambda b: (-gate[b], b))
            chosen = [own, *ranked][:top_k]
            keys = [j for b in chosen for j in range(b * block, min((b + 1) * block, n)) if not causal or j <= i]
            weights = torch.softmax(scale * (k[h, keys] @ q[h, i]), dim=0)
            out[h, i] = weights @ v[h, keys]
    return out


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(("block", "top_k"), [(8, 3), (16, 2), (5, 4)])
def test_moba_matches_the_papers_routing_row_by_row(causal: bool, block: int, top_k: int) -> None:
    q, k, v = _qkv(n=53)
    ours = core.approximate("moba", q, k, v, scale=1.5, block=block, top_k=top_k, causal=causal).output
    torch.testing.assert_close(ours, moba_reference(q, k, v, 1.5, block, top_k, causal), rtol=1e-10, atol=1e-12)
    assert not torch.allclose(ours, _exact(q, k, v, 1.5, causal), atol=1e-3)  # a small top_k drops blocks


@pytest.mark.parametrize("causal", [False, True])
def test_moba_with_every_block_is_exact_attention_and_one_block_is_block_diagonal(causal: bool) -> None:
    q, k, v = _qkv()
    every = core.approximate("moba", q, k, v, scale=1.2, block=8, top_k=9, causal=causal).output
    torch.testing.assert_close(every, _exact(q, k, v, 1.2, causal), rtol=1e-10, atol=1e-12)
    one = core.approximate("moba", q, k, v, scale=1.2, block=8, top_k=1, causal=causal).attention()
    pos = torch.arange(70)
    diagonal = (pos[:, None] // 8) == (pos[None, :] // 8)
    if causal:
        diagonal &= pos[:, None] >= pos[None, :]
    torch.testing.assert_close(one, _softmax_on(1.2 * q @ k.transpose(-1, -2), diagonal), rtol=1e-10, atol=1e-12)


def test_moba_routing_is_invariant_to_a_positive_scale_of_the_gate() -> None:
    q, k, v = _qkv(n=64)
    first = core.approximate("moba", q, k, v, block=8, top_k=3, causal=True).parts["support"]
    scaled = core.approximate("moba", 5 * q, k, v, block=8, top_k=3, causal=True).parts["support"]
    assert torch.equal(first, scaled)


# ---------------------------------------------------------------- NSA


def nsa_reference(q, k, v, scale, block, selected, window, gates, causal) -> torch.Tensor:
    """Eq. 5 row by row: mean-pooled compressed keys visible once their block is past, top-n blocks by the
    compressed probabilities (own block and block 0 forced), a window, gates renormalised over non-empty branches."""
    heads, n, _ = q.shape
    blocks = math.ceil(n / block)
    out = torch.empty(heads, n, v.shape[-1], dtype=v.dtype)
    for h in range(heads):
        k_cmp = torch.stack([k[h, b * block : (b + 1) * block].mean(0) for b in range(blocks)])
        v_cmp = torch.stack([v[h, b * block : (b + 1) * block].mean(0) for b in range(blocks)])
        for i in range(n):
            own = i // block
            seen = [b for b in range(blocks) if not causal or min((b + 1) * block, n) - 1 <= i]
            p = torch.zeros(blocks, dtype=q.dtype)
            branches, weights = [], []
            if seen:
                p[seen] = torch.softmax(scale * (k_cmp[seen] @ q[h, i]), dim=0)
                branches.append(p[seen] @ v_cmp[seen])
                weights.append(gates[0])
            if selected > 0:
                others = [b for b in range(blocks) if b not in (own, 0) and (not causal or b <= own)]
                order = [own] + ([0] if own != 0 else []) + sorted(others, key=lambda b: (-float(p[b]), b))
                keys = [j for b in order[:selected] for j in range(b * block, min(b * block + block, n))]
                keys = [j for j in keys if not causal or j <= i]
                branches.append(torch.softmax(scale * (k[h, keys] @ q[h, i]), dim=0) @ v[h, keys])
                weights.append(gates[1])
            near = [j for j in range(n) if (0 <= i - j <= window if causal else abs(i - j) <= window)]
            branches.append(torch.softmax(scale * (k[h, near] @ q[h, i]), dim=0) @ v[h, near])
            weights.append(gates[2])
            total = sum(weights)
            out[h, i] = sum(w / total * b for w, b in zip(weights, branches, strict=True))
    return out


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(
    ("block", "selected", "window", "gates"), [(8, 3, 5, (1 / 3,) * 3), (6, 2, 3, (0.2, 0.5, 0.3))]
)
def test_nsa_matches_the_papers_three_branches_row_by_row(causal, block, selected, window, gates) -> None:
    q, k, v = _qkv(n=45)
    names = dict(zip(("g_cmp", "g_slc", "g_win"), gates, strict=True))
    ours = core.approximate(
        "nsa", q, k, v, scale=1.4, block=block, selected_blocks=selected, window=window, causal=causal, **names
    ).output
    reference = nsa_reference(q, k, v, 1.4, block, selected, window, gates, causal)
    torch.testing.assert_close(ours, reference, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("causal", [False, True])
def test_nsa_limits_equal_exact_attention(causal: bool) -> None:
    q, k, v = _qkv()
    exact = _exact(q, k, v, 1.3, causal)
    every_block = core.approximate(
        "nsa", q, k, v, scale=1.3, block=8, selected_blocks=9, g_cmp=0, g_slc=1, g_win=0, causal=causal
    )
    torch.testing.assert_close(every_block.output, exact, rtol=1e-10, atol=1e-12)
    whole_window = core.approximate("nsa", q, k, v, scale=1.3, window=69, g_cmp=0, g_slc=0, g_win=1, causal=causal)
    torch.testing.assert_close(whole_window.output, exact, rtol=1e-10, atol=1e-12)
    # blocks of one token: the compressed branch is exact attention itself
    single = core.approximate("nsa", q, k, v, scale=1.3, block=1, g_cmp=1, g_slc=0, g_win=0, causal=causal)
    torch.testing.assert_close(single.output, exact, rtol=1e-10, atol=1e-12)


def test_nsa_always_selects_the_own_block_and_block_zero_and_keeps_constant_values() -> None:
    q, k, v = _qkv(n=64)
    result = core.approximate("nsa", q, k, v, block=8, selected_blocks=2, causal=True)
    support = result.parts["selection_support"][0]
    for i in range(64):
        assert bool(support[i, (i // 8) * 8 : i + 1].all())  # the own block up to i
        assert bool(support[i, : min(8, i + 1)].all())  # block 0
    constant = torch.full_like(v, 2.5)
    out = core.approximate("nsa", q, k, constant, block=8, selected_blocks=2, causal=True).output
    torch.testing.assert_close(out, constant, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- Hedgehog


def test_hedgehog_identity_map_is_a_sum_of_hyperbolic_cosines() -> None:
    generator = torch.Generator().manual_seed(1)
    x, y = (torch.randn(1, 6, 5, generator=generator, dtype=torch.float64) for _ in range(2))
    eye, zero = torch.eye(5, dtype=torch.float64)[None], torch.zeros(1, 1, 5, dtype=torch.float64)
    maps = HedgehogMap(eye, zero, eye, zero)
    fx = log_features(x, maps.w_q, maps.b_q, shift="row")
    fy = log_features(y, maps.w_k, maps.b_k, shift="row")
    kernel = (fx.psi * fx.log_shift.exp()) @ (fy.psi * fy.log_shift.exp()).transpose(-1, -2)
    expected = (2 * torch.cosh(x[0][:, None, :] + y[0][None, :, :])).sum(-1)
    torch.testing.assert_close(kernel[0], expected, rtol=1e-12, atol=0)


@pytest.mark.parametrize("causal", [False, True])
def test_hedgehog_fit_lowers_the_distillation_loss_and_the_error(causal: bool) -> None:
    x = core.data.clustered(96, 8, clusters=4, spread=0.3, seed=0, heads=1, dtype=torch.float64)
    exact = core.approximate("exact", x.q, x.k, x.v, scale=2.0, causal=causal).attention()
    errors = {}
    for steps in (0, 60):
        result = core.approximate("hedgehog", x.q, x.k, x.v, scale=2.0, features=8, steps=steps, causal=causal)
        attention = result.attention()
        assert float(attention.min()) >= 0
        errors[steps] = float((attention - exact).norm() / exact.norm())
        if steps:
            curve = result.parts["training_curve"]
            assert curve[-1] < 0.5 * curve[0] and min(curve) >= 0  # KL >= 0 and falls
    assert errors[60] < 0.7 * errors[0], errors


# ---------------------------------------------------------------- Based


def test_based_taylor_map_is_the_second_order_expansion() -> None:
    generator = torch.Generator().manual_seed(2)
    x, y = (torch.randn(40, 7, generator=generator, dtype=torch.float64) for _ in range(2))
    t = (x * y).sum(-1)
    kernel = (taylor_features(x) * taylor_features(y)).sum(-1)
    torch.testing.assert_close(kernel, 1 + t + t * t / 2, rtol=1e-13, atol=1e-13)
    assert taylor_features(x).shape[-1] == 1 + 7 + 7 * 8 // 2  # fla's triangular map
    assert float(kernel.min()) >= 0.5  # ((t + 1)^2 + 1) / 2


def based_reference(q, k, v, scale: float, window: int, causal: bool) -> torch.Tensor:
    """d' = d (no projection): exp(s) in the window, 1 + s + s^2/2 outside, one normaliser per row."""
    heads, n, _ = q.shape
    out = torch.empty(heads, n, v.shape[-1], dtype=v.dtype)
    for h in range(heads):
        for i in range(n):
            keys = range(i + 1) if causal else range(n)
            s = torch.stack([scale * q[h, i] @ k[h, j] for j in keys])
            inside = torch.tensor([abs(i - j) <= window for j in keys])
            c = max(float(s[inside].max()), 0.0)
            weights = torch.where(inside, torch.exp(s - c), math.exp(-c) * (1 + s + s * s / 2))
            out[h, i] = weights @ v[h, list(keys)] / weights.sum()
    return out


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("window", [0, 4])
def test_based_matches_taylor_outside_and_softmax_inside_the_window(causal: bool, window: int) -> None:
    q, k, v = _qkv(n=40)
    ours = core.approximate("based", q, k, v, scale=1.1, features=8, window=window, causal=causal).output
    torch.testing.assert_close(ours, based_reference(q, k, v, 1.1, window, causal), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("causal", [False, True])
def test_based_with_the_whole_window_is_exact_attention(causal: bool) -> None:
    q, k, v = _qkv()
    whole = core.approximate("based", q, k, v, scale=1.3, features=3, window=69, causal=causal).output
    torch.testing.assert_close(whole, _exact(q, k, v, 1.3, causal), rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------- the routed blocks' two paths


@pytest.mark.parametrize("method", ["moba", "nsa"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_routed_blocks_by_key_block_equal_the_query_block_path(
    method: str, causal: bool, dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MoBA and NSA's selection go key block by key block on a CPU (tiles of the queries routed to one block, one
    fused call, pieces merged by log-sum-exp): the query-block path's output to float precision, with a padded last
    block (n = 101), a scale per head, and a tile count past one memory group."""
    from core.approximators import block_select, common

    monkeypatch.setattr(common, "MIN_GROUP_BYTES", 2**14)  # several groups of tiles
    monkeypatch.setattr(block_select, "MIN_GROUP_BYTES", 2**14)
    q, k, v = (t.to(dtype) for t in _qkv(n=101, d=8, heads=3, seed=4))
    params = {"block": 8, "top_k": 3} if method == "moba" else {"block": 8, "selected_blocks": 3, "window": 5}
    calls: list[int] = []
    real = block_select._by_key_block
    monkeypatch.setattr(block_select, "_by_key_block", lambda *a: calls.append(1) or real(*a))
    scale = torch.tensor([0.5, 2.0, 6.0], dtype=dtype)
    outputs = []
    for by_key_block in (True, False):
        if not by_key_block:
            monkeypatch.setattr(block_select, "fused_attention_serves", lambda q, v: False)
        calls.clear()
        outputs.append(core.approximate(method, q, k, v, scale=scale, causal=causal, **params).output)
        assert bool(calls) == by_key_block
    tolerance = {"rtol": 1e-12, "atol": 1e-12} if dtype == torch.float64 else {"rtol": 1e-5, "atol": 1e-5}
    torch.testing.assert_close(outputs[0], outputs[1], **tolerance)
