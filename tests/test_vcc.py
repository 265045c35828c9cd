"""VCC (arXiv 2305.04241) against the checkable claims of shared/papers/vcc.md section 9."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr

import core
from core import vcc_tree
from core.approximators.vcc import analytic_r, cost_model
from core.errors import ParameterError


def exact(q, k, v, scale):
    return core.approximate("exact", q, k, v, scale=scale)


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.linalg.norm(a - b) / torch.linalg.norm(b))


def reference_output(q, k, v, vip: list[int], blocks: list[dict], scale: float, correction: bool = True):
    """An independent float64 VCC from the reported partition: dense, by the formula of vcc.md section 4."""
    n = q.shape[-2]
    c_positions = [i for i in range(n) if i not in set(vip)]
    groups = [[i] for i in sorted(vip)]
    for block in blocks:
        groups.append(c_positions[block["start"] : block["start"] + block["length"]])
    covered = sorted(i for g in groups for i in g)
    assert covered == list(range(n)), "the partition must cover every token exactly once"
    qb = torch.stack([q[g].mean(0) for g in groups]).double()
    kb = torch.stack([k[g].mean(0) for g in groups]).double()
    vb = torch.stack([v[g].mean(0) for g in groups]).double()
    sizes = torch.tensor([len(g) for g in groups], dtype=torch.float64)
    weights = torch.exp(scale * qb @ kb.T) * (sizes[None, :] if correction else 1.0)
    rows = (weights / weights.sum(-1, keepdim=True)) @ vb
    out = torch.empty(n, v.shape[-1], dtype=torch.float64)
    for row, g in enumerate(groups):
        out[g] = rows[row]
    return out


# ----------------------------------------------------------------------------- registry and API


def test_registered_with_api_parameter_names() -> None:
    spec = core.registry.methods()["vcc"]  # the registry module, equivalent to core.methods()
    names = [p.name for p in spec.params]
    for name in ("vip", "vip_indices", "mode", "block_size", "fine_blocks", "selector", "scale_correction"):
        assert name in names
    assert spec.param("mode").choices == ("two_level", "tree")
    assert spec.param("selector").choices == ("score", "softmax", "random", "bottom")
    assert spec.param("scale_correction").default is True
    assert spec.family == "compression"


def test_output_shape_attention_rows_and_consistency(random_qkv) -> None:
    q, k, v = random_qkv((2, 3), 70, 8, seed=1, dv=5)
    result = core.approximate("vcc", q, k, v, vip=5, block_size=8, fine_blocks=2, scale=0.7)
    assert result.output.shape == (2, 3, 70, 5)
    attention = result.attention()
    assert attention.shape == (2, 3, 70, 70)
    assert float(attention.min()) >= 0
    torch.testing.assert_close(attention.sum(-1), torch.ones(2, 3, 70, dtype=torch.float64))
    torch.testing.assert_close(attention @ v, result.output)
    assert result.parts["r"].shape == (2, 3)


def test_budget_params_and_cost_grow_with_fraction(random_qkv) -> None:
    n, d = 512, 32
    previous = -1
    for fraction in (0.02, 0.05, 0.1, 0.2, 0.4):
        params = core.budget_params("vcc", n, d, fraction)
        assert params["fine_blocks"] >= previous
        previous = params["fine_blocks"]
        q, k, v = random_qkv((), n, d, seed=2)
        result = core.approximate("vcc", q, k, v, **params)
        # r^2 within the target, and one more refined block would overshoot it (r from the analytic bound,
        # which is exact unless the refined blocks include the padded last one).
        h = params["fine_blocks"]
        bound = analytic_r(n, 8, "two_level", 16, h)
        assert bound**2 <= fraction * n * n or h == 0
        assert analytic_r(n, 8, "two_level", 16, h + 1) ** 2 > fraction * n * n
        assert result.info["r"] <= bound
        assert result.cost.memory == bound**2 + 8 * math.ceil((n - 8) / 16)
    assert previous > 0
    assert core.budget_params("vcc", n, d, 1.0)["fine_blocks"] == math.ceil((n - 8) / 16)


def test_cost_matches_compressed_length_and_beats_exact_at_large_n(random_qkv) -> None:
    q, k, v = random_qkv((), 256, 16, seed=3)
    result = core.approximate("vcc", q, k, v, vip=16, block_size=16, fine_blocks=3)
    r = 16 + 240 // 16 + 3 * 15
    assert result.info["r"] == r
    assert result.cost.memory == r * r + 16 * 15
    small = cost_model(2**16, 64, 64, 48, "two_level", 16, 90)
    assert small["r"] == 48 + (2**16 - 48 + 15) // 16 + 90 * 15
    assert small["flops"] < small["exact_flops"] / 50
    assert small["memory"] < small["exact_memory"] / 50


# ----------------------------------------------------------------------------- structure (HARD 1, 2)


def _leaf_counts(nodes: list[vcc_tree.TreeNode]) -> dict[int, int]:
    counts: dict[int, int] = {}
    for node in nodes:
        if node.status == "leaf":
            counts[node.size] = counts.get(node.size, 0) + 1
    return counts


@pytest.mark.parametrize("levels", [[0], [1, 1, 1], [1, 2, 1, 2, 1, 0], [1, 2, 4, 8, 16, 32], [1, 1, 2, 3, 5, 8]])
def test_tree_partition_is_dyadic_and_counts_match_algorithm1(levels: list[int], random_qkv) -> None:
    n_p, n_c = 4, 64
    q, k, v = random_qkv((), n_p + n_c, 8, seed=4)
    result = core.approximate("vcc", q, k, v, vip=n_p, mode="tree", level_blocks=levels, scale=0.5)
    blocks = result.parts["partition"][0]
    covered = []
    for block in blocks:
        s = block["length"]
        assert s & (s - 1) == 0, "segment lengths are powers of two"
        assert block["start"] % s == 0, "segments are dyadic intervals"
        covered.extend(range(block["start"], block["start"] + s))
    assert covered == list(range(n_c)), "J partitions the non-VIP positions, in row order"
    used = result.info["splits_per_level"]
    assert used == levels + [0] * (6 - len(levels))
    assert len(blocks) == 1 + sum(used)  # |J| = 1 + sum h_s
    assert result.info["r"] == n_p + len(blocks)
    nodes = result.parts["selection_tree"][0]
    assert len(nodes) == 1 + 2 * sum(used)
    assert sum(node.status == "split" for node in nodes) == sum(used)
    # Leaves at level s (s < n_c): 2 h_{2s} - h_s with h_1 = 0.
    h = {n_c >> i: used[i] for i in range(6)}
    h[1] = 0
    leaves = _leaf_counts(nodes)
    for s in (32, 16, 8, 4, 2, 1):
        assert leaves.get(s, 0) == 2 * h[2 * s] - h[s]
    # Every column of S_c has exactly one non-zero (constraint 25).
    s_c = result.parts["compression"][0]["S_c"]
    assert bool(((s_c != 0).sum(0) == 1).all())


@pytest.mark.parametrize("k", [2, 4, 8, 16])
def test_two_level_compressed_length(k: int, random_qkv) -> None:
    n_p, n_c = 6, 128
    q, k_, v = random_qkv((2,), n_p + n_c, 8, seed=5)
    blocks = n_c // k
    for h in (0, 1, blocks // 2, blocks):
        result = core.approximate("vcc", q, k_, v, vip=n_p, block_size=k, fine_blocks=h)
        assert result.info["r"] == n_p + n_c // k + h * (k - 1)
        assert len(result.parts["partition"][1]) == n_c // k + h * (k - 1)
    assert core.approximate("vcc", q, k_, v, vip=n_p, block_size=k, fine_blocks=0).info["r"] == n_p + n_c // k
    assert core.approximate("vcc", q, k_, v, vip=n_p, block_size=k, fine_blocks=blocks).info["r"] == n_p + n_c


# ----------------------------------------------------------------------------- pseudo-inverse, Prop. 6.2, eq. (51)


@pytest.mark.parametrize("mode", ["tree", "two_level"])
def test_decompression_is_the_pseudo_inverse(mode: str, random_qkv) -> None:
    q, k, v = random_qkv((), 100, 8, seed=6)
    result = core.approximate("vcc", q, k, v, vip=4, mode=mode, block_size=8, fine_blocks=3)
    part = result.parts["compression"][0]
    s_c, lengths = part["S_c"], part["D"]
    pinv = torch.linalg.pinv(s_c)
    torch.testing.assert_close(pinv, s_c.T @ torch.diag(lengths), atol=1e-12, rtol=0)
    torch.testing.assert_close(part["S_c_pinv"], pinv, atol=1e-12, rtol=0)
    torch.testing.assert_close(s_c @ pinv, torch.eye(s_c.shape[0], dtype=torch.float64), atol=1e-12, rtol=0)
    one_hot = part["S_c_pinv"]
    assert bool(((one_hot == 1).sum(1) == 1).all()) and bool(((one_hot != 0).sum(1) == 1).all()), "rows one-hot"


def test_prop_6_2_and_error_identity_51(random_qkv) -> None:
    beta = 0.8
    q, k, v = random_qkv((), 72, 6, seed=7)
    result = core.approximate("vcc", q, k, v, vip=8, mode="tree", fine_blocks=3, scale=beta)
    part = result.parts["compression"][0]
    s_c, lengths = part["S_c"], part["D"]
    p, c = beta * q[:8], k[8:]
    approx = torch.exp(p @ c.T @ s_c.T) @ torch.diag(lengths) @ s_c
    segments = result.parts["segments"][8:] - 8
    means = torch.stack([c[segments == j].mean(0) for j in range(len(lengths))])
    direct = torch.exp(p @ means[segments].T)
    torch.testing.assert_close(approx, direct, rtol=1e-12, atol=0)
    exact_rows = torch.exp(p @ c.T)
    error = ((exact_rows - approx) ** 2).sum(-1)
    # Eq. (51) with the squared leading factor exp(2 <p, c_bar>) (the printed single factor is an erratum).
    dev = p @ c.T - p @ means[segments].T
    identity = (torch.exp(2 * p @ means[segments].T) * (torch.exp(dev) - 1) ** 2).sum(-1)
    torch.testing.assert_close(identity, error, rtol=1e-10, atol=0)
    printed = (torch.exp(p @ means[segments].T) * (torch.exp(dev) - 1) ** 2).sum(-1)
    assert not torch.allclose(printed, error, rtol=1e-3)


# ----------------------------------------------------------------------------- exactness (HARD 7, 9, 10)


@pytest.mark.parametrize("n", [96, 101])
def test_full_budget_is_exact(n: int, random_qkv) -> None:
    q, k, v = random_qkv((3,), n, 8, seed=8)
    reference = exact(q, k, v, 0.9)
    for params in ({"block_size": 8, "fine_blocks": n}, {"mode": "tree", "fine_blocks": n}, {"block_size": 1}):
        result = core.approximate("vcc", q, k, v, vip=5, scale=0.9, **params)
        torch.testing.assert_close(result.output, reference.output, atol=1e-12, rtol=0)
        torch.testing.assert_close(result.attention(), reference.attention(), atol=1e-12, rtol=0)
        assert result.info["r_max"] == n


def test_no_compressed_tokens_is_exact_in_the_core_and_refused_by_the_api(random_qkv) -> None:
    q, k, v = random_qkv((2,), 20, 4, seed=9)
    segment = torch.arange(20).expand(2, 20).contiguous()
    scale = torch.full((2, 1, 1), 0.6, dtype=torch.float64)
    compressed = vcc_tree.compressed_attention(q, k, v, segment, 20, scale)
    torch.testing.assert_close(compressed.output, exact(q, k, v, 0.6).output, atol=1e-12, rtol=0)
    with pytest.raises(ParameterError, match="vip_indices"):
        core.approximate("vcc", q, k, v, vip_indices=list(range(20)))


def test_vip_to_vip_part_is_never_approximated(random_qkv) -> None:
    q, k, v = random_qkv((), 80, 8, seed=10)
    vip = [3, 17, 40, 41, 79]
    result = core.approximate("vcc", q, k, v, vip_indices=vip, fine_blocks=1, block_size=8, scale=1.3)
    approx = result.attention()[vip][:, vip]
    truth = exact(q, k, v, 1.3).attention()[vip][:, vip]
    ratio = approx / truth  # one factor Z / Z_hat per row
    torch.testing.assert_close(ratio, ratio[:, :1].expand_as(ratio), rtol=1e-10, atol=0)
    assert float((ratio - 1).abs().max()) > 1e-3, "the rows are renormalised, so the factor is not 1"


@pytest.mark.parametrize("mode", ["two_level", "tree"])
def test_identical_tokens_in_every_block_give_zero_error_at_any_budget(mode: str, random_qkv) -> None:
    n_p, n_c, k = 4, 128, 8
    q, key, v = random_qkv((2,), n_p + n_c, 8, seed=11)
    base = torch.arange(n_c) // k  # tokens of one k-block are identical
    for t in (q, key, v):
        t[..., n_p:, :] = t[..., n_p:, :][..., base * k, :]
    reference = exact(q, key, v, 1.0)
    budgets = range(0, n_c // k + 1, 3) if mode == "two_level" else [0, 1, 3, 7]
    for h in budgets:
        # In tree mode the leaves must be no longer than k: split everything above that level.
        params = {"block_size": k, "fine_blocks": h} if mode == "two_level" else {"level_blocks": [1, 2, 4, 8, h]}
        result = core.approximate("vcc", q, key, v, vip=n_p, mode=mode, scale=1.0, **params)
        torch.testing.assert_close(result.output, reference.output, atol=1e-12, rtol=0)
    # Break one block's homogeneity: the coarse result is no longer exact.
    q[..., n_p + 1, :] += 3.0
    key[..., n_p + 1, :] += 3.0
    result = core.approximate("vcc", q, key, v, vip=n_p, block_size=k, fine_blocks=0, scale=1.0)
    assert rel(result.output, exact(q, key, v, 1.0).output) > 1e-3


# ----------------------------------------------------------------------------- zero temperature (HARD 8)


@pytest.mark.parametrize("mode", ["two_level", "tree"])
def test_zero_temperature_exact_with_d_and_wrong_without(mode: str, random_qkv) -> None:
    q, k, v = random_qkv((2,), 90, 8, seed=12)
    reference = exact(q, k, v, 0.0)
    torch.testing.assert_close(reference.output, v.mean(-2, keepdim=True).expand_as(v), atol=1e-12, rtol=0)
    with_d = core.approximate("vcc", q, k, v, vip=6, mode=mode, block_size=8, fine_blocks=2, scale=0.0)
    torch.testing.assert_close(with_d.output, reference.output, atol=1e-12, rtol=0)
    without = core.approximate(
        "vcc", q, k, v, vip=6, mode=mode, block_size=8, fine_blocks=2, scale=0.0, scale_correction=False
    )
    assert rel(without.output, reference.output) > 0.05


# ----------------------------------------------------------------------------- softmax mass (HARD 11)


def test_normaliser_lower_bound_and_monotone_under_splitting(random_qkv) -> None:
    beta = 1.1
    q, k, v = random_qkv((), 4 + 64, 8, seed=13)
    log_z = torch.logsumexp(beta * q[:4] @ k.T, dim=-1)
    for h in (0, 1, 3, 64):
        result = core.approximate("vcc", q, k, v, vip=4, mode="tree", fine_blocks=h, scale=beta)
        log_z_hat = result.parts["log_z_hat"]
        assert bool((log_z_hat <= log_z + 1e-12).all())
    torch.testing.assert_close(log_z_hat, log_z, atol=1e-12, rtol=0)  # full budget: equality
    # Split each leaf of a coarse tree in turn: Z_hat never decreases, for every VIP query.
    result = core.approximate("vcc", q, k, v, vip=4, mode="tree", fine_blocks=2, scale=beta)
    segment = result.parts["segments"]
    rows = int(result.info["r"])
    scale = torch.full((1, 1, 1), beta, dtype=torch.float64)
    before = vcc_tree.compressed_attention(q[None], k[None], v[None], segment[None], rows, scale).log_z_hat[0, :4]
    tried = 0
    for block in result.parts["partition"][0]:
        if block["length"] < 2:
            continue
        start = 4 + block["start"] + block["length"] // 2
        finer = segment.clone()
        finer[start : 4 + block["start"] + block["length"]] = rows  # the right half becomes a new row
        after = vcc_tree.compressed_attention(q[None], k[None], v[None], finer[None], rows + 1, scale).log_z_hat[0, :4]
        assert bool((after >= before - 1e-12).all())
        assert bool((after > before).any())
        tried += 1
    assert tried >= 2


# ----------------------------------------------------------------------------- storage tree (HARD 5, 6)


@pytest.mark.parametrize(("mode", "n_c"), [("tree", 64), ("tree", 50), ("two_level", 64), ("two_level", 61)])
def test_storage_tree_round_trip_and_one_layer_update(mode: str, n_c: int, random_qkv) -> None:
    n_p = 4
    q, k, v = random_qkv((), n_p + n_c, 8, seed=14, dv=3)
    result = core.approximate("vcc", q, k, v, vip=n_p, mode=mode, block_size=8, fine_blocks=3, scale=1.0)
    tree = result.parts["storage_tree"][0]
    hierarchy = tree.hierarchy
    if mode == "tree" and n_c == 64:
        assert tree.entry_count() == 2 * n_c - 1
    c = v[n_p:]
    for level, lv in enumerate(hierarchy.levels):
        for node in range(lv.nodes):
            count = int(lv.counts[node])
            if count == 0:
                continue
            start = int(lv.starts[node])
            torch.testing.assert_close(tree.retrieve(level, node), c[start : start + count].mean(0), atol=1e-12, rtol=0)
    torch.testing.assert_close(tree.materialise(), c, atol=1e-12, rtol=0)

    update = result.parts["layer_update"][0]
    nodes = result.parts["selection_tree"][0]
    leaves = sum(node.status == "leaf" for node in nodes)
    internal = sum(node.status in ("split", "pass") for node in nodes)
    assert update["n_changed"] == leaves + internal
    # Materialising T(C_new) equals explicit decompression S_c^+ (Y_new - S_c C) + C.
    torch.testing.assert_close(update["materialised"], update["explicit"], atol=1e-12, rtol=0)
    # ... and equals C plus the attention output each token received (the layer X + alpha(X)).
    torch.testing.assert_close(update["materialised"], c + result.output[n_p:], atol=1e-12, rtol=0)
    # Deltas below J's leaves are untouched (Prop. 6.4); changed entries are exactly the selection tree.
    after, before = update["after"], update["before"]
    for level, changed in enumerate(update["changed"]):
        if level == 0:
            continue
        same = torch.isclose(after.deltas[level], before.deltas[level], atol=1e-13).all(-1)
        assert bool(same[~changed].all())
    active_nodes = {(node.level, node.index) for node in nodes}
    changed_nodes = {(lv, int(i)) for lv, ch in enumerate(update["changed"]) for i in torch.nonzero(ch).flatten()}
    assert active_nodes == changed_nodes


# ----------------------------------------------------------------------------- two-level error (HARD 13)


def test_two_level_unnormalised_error_non_increasing_in_h(random_qkv) -> None:
    beta, n_p, k = 1.0, 8, 8
    for seed in range(3):
        q, key, v = random_qkv((), n_p + 128, 8, seed=100 + seed)
        target = torch.exp(beta * q[:n_p] @ key[n_p:].T)
        errors = []
        for h in range(0, 17):
            result = core.approximate("vcc", q, key, v, vip=n_p, block_size=k, fine_blocks=h, scale=beta)
            segments = result.parts["segments"][n_p:]
            means = torch.stack([key[n_p:][segments == j].mean(0) for j in range(n_p, int(segments.max()) + 1)])
            approx = torch.exp(beta * q[:n_p] @ means[segments - n_p].T)
            errors.append(float(((target - approx) ** 2).sum()))
        assert all(b <= a * (1 + 1e-12) for a, b in zip(errors, errors[1:], strict=False))
        assert errors[-1] < 1e-20 and errors[0] > 0


# ----------------------------------------------------------------------------- padding, VIP positions, batches


def test_padding_is_reported_and_never_changes_real_tokens(random_qkv) -> None:
    n_p, n_c, k = 3, 61, 8  # 61 = 7 * 8 + 5: the last block holds 5 real tokens and 3 padding slots
    q, key, v = random_qkv((), n_p + n_c, 8, seed=15)
    for mode in ("two_level", "tree"):
        for h in (0, 2, 8):
            result = core.approximate("vcc", q, key, v, vip=n_p, mode=mode, block_size=k, fine_blocks=h, scale=1.2)
            assert result.info["padding"] == (3 if mode == "two_level" else 3)
            assert result.info["padded_n_c"] == 64
            assert result.parts["padding"] == {"n_c": n_c, "padded_n_c": 64, "padding": 3}
            blocks = result.parts["partition"][0]
            assert max(b["start"] + b["length"] for b in blocks) == n_c
            # Padding never spends the budget: |J| = 1 + sum h_s in the tree; in two levels a refined block
            # adds (its real tokens - 1) rows, so the padded block adds 4, not 7.
            used = result.info["splits_per_level"]
            if mode == "tree":
                assert len(blocks) == 1 + sum(used)
            else:
                refined = [nd for nd in result.parts["selection_tree"][0] if nd.level == 1 and nd.status == "split"]
                assert len(refined) == used[1] == min(h, 8)
                assert len(blocks) == 8 + sum(nd.count - 1 for nd in refined)
            reference = reference_output(q, key, v, list(range(n_p)), blocks, 1.2)
            torch.testing.assert_close(result.output, reference, atol=1e-12, rtol=0)


def test_vip_indices_equal_vip_first_after_permuting(random_qkv) -> None:
    q, k, v = random_qkv((2,), 60, 8, seed=16)
    vip = [50, 3, 22, 9]
    order = sorted(vip) + [i for i in range(60) if i not in vip]
    for mode in ("two_level", "tree"):
        scattered = core.approximate("vcc", q, k, v, vip_indices=vip, mode=mode, block_size=4, fine_blocks=2)
        first = core.approximate(
            "vcc", q[:, order], k[:, order], v[:, order], vip=4, mode=mode, block_size=4, fine_blocks=2
        )
        torch.testing.assert_close(scattered.output[:, order], first.output, atol=1e-12, rtol=0)
        assert scattered.parts["vip_positions"] == sorted(vip)
    empty = core.approximate("vcc", q, k, v, vip=4, vip_indices=[], block_size=4, fine_blocks=2)
    torch.testing.assert_close(
        empty.output, core.approximate("vcc", q, k, v, vip=4, block_size=4, fine_blocks=2).output
    )


def test_selection_is_per_slice_unless_heads_share_it(random_qkv) -> None:
    q, k, v = random_qkv((2, 3), 64, 8, seed=17)
    batched = core.approximate("vcc", q, k, v, vip=4, block_size=4, fine_blocks=3, scale=2.0)
    for i in range(2):
        for j in range(3):
            alone = core.approximate("vcc", q[i, j], k[i, j], v[i, j], vip=4, block_size=4, fine_blocks=3, scale=2.0)
            torch.testing.assert_close(batched.output[i, j], alone.output, atol=1e-12, rtol=0)
    segments = batched.parts["segments"]
    assert not all(torch.equal(segments[0, 0], segments[0, j]) for j in range(3)), "heads choose differently"
    shared = core.approximate("vcc", q, k, v, vip=4, block_size=4, fine_blocks=3, scale=2.0, share_heads=True)
    seg = shared.parts["segments"]
    for i in range(2):
        assert all(torch.equal(seg[i, 0], seg[i, j]) for j in range(3))
    assert not torch.equal(seg[0, 0], seg[1, 0])
    # The pooled priority is mu summed over heads and VIP queries (eq. 53 per head, then summed).
    nodes = shared.parts["selection_tree"]
    per_head = batched.parts["selection_tree"]
    block_mu = {nd.index: nd.log_mu for nd in nodes[0] if nd.level == 1}
    head_mu = [{nd.index: nd.log_mu for nd in per_head[j] if nd.level == 1} for j in range(3)]
    for index, value in block_mu.items():
        expected = torch.logsumexp(torch.tensor([head_mu[j][index] for j in range(3)], dtype=torch.float64), 0)
        assert abs(value - float(expected)) < 1e-9
    assert shared.info["selection_shared_over"] == 3


def test_tensor_scale_runs_each_temperature_separately(random_qkv) -> None:
    q, k, v = random_qkv((), 48, 8, seed=18)
    betas = torch.tensor([0.0, 0.5, 2.0], dtype=torch.float64)
    stacked = [t.expand(3, *t.shape) for t in (q, k, v)]
    result = core.approximate("vcc", *stacked, vip=4, block_size=4, fine_blocks=2, scale=betas)
    for i, beta in enumerate(betas.tolist()):
        alone = core.approximate("vcc", q, k, v, vip=4, block_size=4, fine_blocks=2, scale=beta)
        torch.testing.assert_close(result.output[i], alone.output, atol=1e-12, rtol=0)


# ----------------------------------------------------------------------------- selectors


def test_selectors_rank_as_documented(random_qkv) -> None:
    q, k, v = random_qkv((), 4 + 128, 8, seed=19)
    beta = 1.5
    top = core.approximate("vcc", q, k, v, vip=4, block_size=8, fine_blocks=4, selector="score", scale=beta)
    low = core.approximate("vcc", q, k, v, vip=4, block_size=8, fine_blocks=4, selector="bottom", scale=beta)
    blocks = [nd for nd in top.parts["selection_tree"][0] if nd.level == 1]
    mus = torch.tensor([nd.log_mu for nd in blocks], dtype=torch.float64)
    chosen = {nd.index for nd in blocks if nd.status == "split"}
    assert chosen == set(torch.topk(mus, 4).indices.tolist())
    # mu recomputed by hand from eq. (53).
    c = k[4:].reshape(16, 8, 8).mean(1)
    torch.testing.assert_close(mus, torch.logsumexp(beta * q[:4] @ c.T, dim=0), atol=1e-9, rtol=0)
    low_chosen = {nd.index for nd in low.parts["selection_tree"][0] if nd.level == 1 and nd.status == "split"}
    assert low_chosen == set(torch.topk(-mus, 4).indices.tolist())
    soft = core.approximate("vcc", q, k, v, vip=4, block_size=8, fine_blocks=4, selector="softmax", scale=beta)
    probs = torch.softmax(beta * q[:4] @ c.T, dim=-1).mean(0)
    soft_chosen = {nd.index for nd in soft.parts["selection_tree"][0] if nd.level == 1 and nd.status == "split"}
    assert soft_chosen == set(torch.topk(probs, 4).indices.tolist())
    rand_a = core.approximate("vcc", q, k, v, vip=4, block_size=8, fine_blocks=4, selector="random", seed=1)
    rand_b = core.approximate("vcc", q, k, v, vip=4, block_size=8, fine_blocks=4, selector="random", seed=1)
    rand_c = core.approximate("vcc", q, k, v, vip=4, block_size=8, fine_blocks=4, selector="random", seed=2)
    torch.testing.assert_close(rand_a.output, rand_b.output, atol=0, rtol=0)
    assert not torch.equal(rand_a.parts["segments"], rand_c.parts["segments"])


# ----------------------------------------------------------------------------- bad input


def test_bad_input_gives_clear_errors_and_budget_clamps(random_qkv) -> None:
    q, k, v = random_qkv((), 40, 4, seed=20)
    with pytest.raises(ParameterError, match=r"vcc\.vip_indices.*\[0, 39\]"):
        core.approximate("vcc", q, k, v, vip_indices=[1, 40])
    with pytest.raises(ParameterError, match=r"vcc\.vip_indices.*repeated: \[3\]"):
        core.approximate("vcc", q, k, v, vip_indices=[3, 5, 3])
    with pytest.raises(ParameterError, match=r"vcc\.vip_indices.*all 40 positions"):
        core.approximate("vcc", q, k, v, vip_indices=list(range(39, -1, -1)))
    with pytest.raises(ParameterError, match=r"vcc\.vip.*\[1, 39\]"):
        core.approximate("vcc", q, k, v, vip=40)
    for bad in (0, 41):
        with pytest.raises(ParameterError, match=r"vcc\.block_size.*\[1, 40\]"):
            core.approximate("vcc", q, k, v, block_size=bad)
    with pytest.raises(ParameterError, match=r"vcc\.level_blocks.*at most 5"):
        core.approximate("vcc", q, k, v, vip=8, mode="tree", level_blocks=[1, 1, 1, 1, 1, 1])
    clamped = core.approximate("vcc", q, k, v, vip=8, block_size=4, fine_blocks=30)
    assert clamped.info["block_count_clamped"] and "above the maximum 8" in clamped.info["notice"]
    at_max = core.approximate("vcc", q, k, v, vip=8, block_size=4, fine_blocks=8)
    assert not at_max.info["block_count_clamped"] and at_max.info["notice"] == ""
    torch.testing.assert_close(clamped.output, at_max.output, atol=0, rtol=0)
    tree_clamp = core.approximate("vcc", q, k, v, vip=8, mode="tree", level_blocks=[1, 5])
    assert tree_clamp.info["block_count_clamped"] and tree_clamp.info["splits_per_level"][:2] == [1, 2]


# ----------------------------------------------------------------------------- STAT over 50 seeds (claims 14-16)


def _clustered_batch(seeds: range, n: int = 256, d: int = 16):
    # VCC compresses contiguous blocks of positions: this statistic is about clusters laid out in runs.
    inputs = [core.data.clustered(n, d, clusters=8, spread=0.5, seed=s, order_by_cluster=True) for s in seeds]
    return [torch.cat([getattr(x, name) for x in inputs]) for name in ("q", "k", "v")]


def test_stat_over_50_seeds_on_clustered_input() -> None:
    q, k, v = _clustered_batch(range(50))
    beta, n_p = 4.0, 8
    truth = exact(q, k, v, beta).output[:, :n_p]

    def vip_error(**params) -> np.ndarray:
        out = core.approximate("vcc", q, k, v, vip=n_p, block_size=16, scale=beta, seed=3, **params).output[:, :n_p]
        return (torch.linalg.matrix_norm(out - truth) / torch.linalg.matrix_norm(truth)).numpy()

    budgets = [0, 1, 2, 4, 8, 12, 16]
    score = np.stack([vip_error(fine_blocks=h) for h in budgets])  # (budgets, seeds)
    random = vip_error(fine_blocks=2, selector="random")
    no_d = vip_error(fine_blocks=2, scale_correction=False)
    at = budgets.index(2)
    assert (score[at] < random).mean() >= 0.8
    assert (score[at] < no_d).mean() >= 0.95
    assert (score[-1] < score[0]).mean() == 1.0
    rho = np.array([spearmanr(budgets, score[:, s]).statistic for s in range(50)])
    assert float(np.mean(rho)) < 0 and (rho < 0).mean() >= 0.9
    bottom = vip_error(fine_blocks=2, selector="bottom")
    assert float(np.median(bottom)) > float(np.median(random))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu(random_qkv) -> None:
    q, k, v = random_qkv((2,), 96, 8, seed=21)
    cpu = core.approximate("vcc", q, k, v, vip=4, block_size=8, fine_blocks=3, selector="random", seed=5)
    gpu = core.approximate(
        "vcc", q.cuda(), k.cuda(), v.cuda(), vip=4, block_size=8, fine_blocks=3, selector="random", seed=5
    )
    torch.testing.assert_close(gpu.output.cpu(), cpu.output, atol=1e-10, rtol=0)
    assert torch.equal(gpu.parts["segments"].cpu(), cpu.parts["segments"])
