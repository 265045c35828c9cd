"""VCC: VIP-token centric compression (Zeng et al. 2023, "Scaling Transformers to 128K Tokens or More
by Prioritizing Important Tokens", arXiv 2305.04241).

The n_p VIP tokens P are kept exactly; the other n_c tokens C are replaced by the means of the
segments J chosen by Algorithm 1 (fine where the VIP queries look, coarse elsewhere). Exact softmax
attention then runs on the r = n_p + |J| compressed rows, with log(segment length) added to the
logit of each compressed key (the matrix D, ``scale_correction``), and each compressed row's output is
copied back to all of its tokens (the decompression S^+ = blockdiag(I, S_c^T D)).

Selection is per batch element by default: every (n, d) slice gets its own J, so batched inputs such as
temperature sweeps behave like separate calls. With ``share_heads=True`` the scores are pooled over the
last batch dimension (the heads of one layer) and all its heads share one J, as in the authors' code,
where compression acts on the hidden states before the heads split.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from core import vcc_tree
from core.approximation import Approximation, AttentionInputs, Cost, make_result
from core.errors import ParameterError
from core.registry import MethodSpec, ParamSpec, register

NAME = "vcc"
DEFAULT_VIP = 8
DEFAULT_BLOCK = 16
DEFAULT_FINE = 4


class OptionalIntList(ParamSpec):
    """An int_list that may be left empty (None or []): the method then falls back to another parameter."""

    def validate(self, value: Any, n: int, d: int, method: str) -> Any:
        if value is None or (isinstance(value, Sequence) and not isinstance(value, str) and len(value) == 0):
            return None
        checked = super().validate(value, n, d, method)
        if self.name == "vip_indices":
            label = f"{method}.{self.name}"
            duplicates = sorted({i for i in checked if checked.count(i) > 1})
            if duplicates:
                raise ParameterError(label, f"must name each position once; repeated: {duplicates}")
            if len(checked) >= n:
                raise ParameterError(
                    label,
                    f"covers all {n} positions, leaving nothing to compress; name at most {n - 1} of the "
                    f"positions 0..{n - 1} (with no compressed tokens VCC is exact attention)",
                )
        return checked


PARAMS = (
    ParamSpec(
        "vip",
        "int",
        DEFAULT_VIP,
        "Number of VIP tokens (the first positions): their attention is kept most exact and guides compression.",
        low=1,
        high=lambda n, d: max(1, n - 1),
    ),
    OptionalIntList(
        "vip_indices",
        "int_list",
        None,
        "VIP positions to use instead of the first `vip` (any order; empty = use `vip`).",
        low=0,
        high=lambda n, d: n - 1,
    ),
    ParamSpec(
        "mode",
        "choice",
        "two_level",
        "two_level: blocks of k tokens, the top h refined to single tokens (the paper's experiments). "
        "tree: Algorithm 1's dyadic tree, splitting h nodes per level from the whole sequence down.",
        choices=vcc_tree.MODES,
    ),
    ParamSpec(
        "block_size",
        "int",
        DEFAULT_BLOCK,
        "k, the coarse block length in two_level mode (the tree is always dyadic).",
        low=1,
        high=lambda n, d: n,
        log=True,
    ),
    ParamSpec(
        "fine_blocks",
        "int",
        DEFAULT_FINE,
        "Block count h: blocks refined (two_level), or nodes split per level (tree). Above the maximum it is clamped.",
        low=0,
        high=lambda n, d: n,
        budgeted=True,
    ),
    OptionalIntList(
        "level_blocks",
        "int_list",
        None,
        "tree mode: h_s per level, root first (overrides fine_blocks; missing levels split nothing).",
        low=0,
        high=lambda n, d: n,
    ),
    ParamSpec(
        "selector",
        "choice",
        "score",
        "score: priority mu of eq. (53); softmax: VIP- and head-averaged softmax (the authors' code); "
        "random; bottom: the lowest mu (worst, for teaching).",
        choices=vcc_tree.SELECTORS,
    ),
    ParamSpec(
        "scale_correction",
        "bool",
        True,
        "Add log(segment length) to each compressed key's logit (the matrix D).",
    ),
    ParamSpec(
        "share_heads",
        "bool",
        False,
        "Pool the selection over the last batch dimension (heads) so all heads share one J, as the authors do.",
    ),
)


# ----------------------------------------------------------------------------- block counts and cost


def vip_positions(n: int, params: dict[str, Any]) -> list[int]:
    indices = params.get("vip_indices")
    if indices:
        return sorted(int(i) for i in indices)
    return list(range(int(params["vip"])))


def plan_block_counts(hierarchy: vcc_tree.Hierarchy, params: dict[str, Any]) -> tuple[list[int], dict[str, Any]]:
    """Per-level block counts h_l (blocks split, root first) and a record of any clamping."""
    limits = vcc_tree.max_splits(hierarchy)
    note: dict[str, Any]
    if hierarchy.mode == "two_level":
        requested = int(params["fine_blocks"])
        most = limits[1]
        used = min(requested, most)
        note = {"requested": requested, "maximum": most, "used": used, "clamped": requested > most}
        return [1, used], note
    levels = params.get("level_blocks")
    if levels is not None:
        if len(levels) > hierarchy.depth:
            raise ParameterError(
                f"{NAME}.level_blocks",
                f"has {len(levels)} entries but the tree over {hierarchy.n_c} non-VIP tokens has "
                f"{hierarchy.depth} levels that can split; give at most {hierarchy.depth}",
            )
        asked = [int(h) for h in levels] + [0] * (hierarchy.depth - len(levels))
        used_levels = [min(h, m) for h, m in zip(asked, limits, strict=True)]
        clamped = any(h > m for h, m in zip(asked, limits, strict=True))
        note = {"requested": asked, "maximum": limits, "used": used_levels, "clamped": clamped}
        return used_levels, note
    requested = int(params["fine_blocks"])
    most = max(limits) if limits else 0
    used = min(requested, most)
    note = {"requested": requested, "maximum": most, "used": used, "clamped": requested > most}
    return [min(used, m) for m in limits], note


def analytic_r(n: int, n_p: int, mode: str, block_size: int, fine_blocks: int, level_blocks: Any = None) -> int:
    """Compressed length r = n_p + |J| (exact when no block holds padding, an upper bound otherwise).

    |J| = 1 + sum over splits of (children - 1): two_level gives n_c/k + h(k - 1); tree gives 1 + sum h_s.
    """
    n_c = n - n_p
    hierarchy = vcc_tree.build_hierarchy(n_c, mode, block_size)
    block_counts, _ = plan_block_counts(hierarchy, {"fine_blocks": fine_blocks, "level_blocks": level_blocks})
    size = 1
    available = 1
    for index, lv in enumerate(hierarchy.levels[:-1]):
        split = min(block_counts[index], available)
        children = lv.size // hierarchy.levels[index + 1].size
        size += split * (children - 1)
        available = split * children
    return min(n, n_p + size)


def _scored_nodes(mode: str, r: int, n_p: int, n_c: int, block_size: int) -> int:
    """Priority scores Algorithm 1 evaluates: every block (two_level), or the root and all children of splits."""
    if mode == "two_level":
        return math.ceil(n_c / block_size)
    return max(1, 2 * (r - n_p) - 1)


def cost_model(
    n: int,
    d: int,
    dv: int,
    n_p: int,
    mode: str,
    block_size: int,
    fine_blocks: int,
    level_blocks: Any = None,
    batch: int = 1,
) -> dict[str, int]:
    """The paper's complexity (App. 6.4) for one attention call, computed, not timed.

    memory = the r x r compressed scores + the n_p x (scored nodes) selection scores;
    flops = segment means (n (2d + dv)), scoring (2 n_p d per node), compressed attention
    (2 r^2 d + 2 r^2 dv + 3 r^2) and the broadcast back (n dv).
    """
    r = analytic_r(n, n_p, mode, block_size, fine_blocks, level_blocks)
    scored = _scored_nodes(mode, r, n_p, n - n_p, block_size)
    levels = 3 if mode == "two_level" else max(1, math.ceil(math.log2(max(2, n - n_p)))) + 1
    memory = r * r + n_p * scored
    flops = n * (2 * d + dv) * (levels - 1) + 2 * n_p * d * scored + 2 * r * r * (d + dv) + 3 * r * r + n * dv
    return {
        "r": r,
        "memory": batch * memory,
        "flops": batch * flops,
        "exact_memory": batch * n * n,
        "exact_flops": batch * (2 * n * n * (d + dv) + 3 * n * n),
    }


def _cost(inputs: AttentionInputs, params: dict[str, Any]) -> Cost:
    n_p = len(vip_positions(inputs.n, params))
    model = cost_model(
        inputs.n,
        inputs.d,
        inputs.dv,
        n_p,
        params["mode"],
        params["block_size"],
        params["fine_blocks"],
        params.get("level_blocks"),
        inputs.batch,
    )
    return Cost(memory=model["memory"], flops=model["flops"])


def _budget(n: int, d: int, fraction: float) -> dict[str, Any]:
    """fine_blocks giving about fraction * n^2 scalars with the default VIP count and block size (two_level).

    VCC's scores are the r x r matrix of the compressed sequence (plus n_p per scored block for the
    selection, a lower-order term left out here so that fraction 1 is the full, exact budget): r <= sqrt(fraction) n.
    """
    n_p = min(DEFAULT_VIP, max(1, n - 1))
    k = min(DEFAULT_BLOCK, n)
    n_c = n - n_p
    if n_c < 1:
        return {"fine_blocks": 0}
    blocks = math.ceil(n_c / k)
    target = fraction * n * n
    best = 0
    for h in range(blocks + 1):
        r = analytic_r(n, n_p, "two_level", k, h)
        if r * r <= target:
            best = h
        else:
            break
    return {"fine_blocks": best, "block_size": k}


# ----------------------------------------------------------------------------- the method


def _run(inputs: AttentionInputs, params: dict[str, Any]) -> Approximation:
    n = inputs.n
    vip = vip_positions(n, params)
    n_p = len(vip)
    if n_p >= n:
        raise ParameterError(f"{NAME}.vip", f"leaves no token to compress; use at most {n - 1} VIP tokens for n = {n}")
    vip_set = set(vip)
    positions_c = [i for i in range(n) if i not in vip_set]
    n_c = len(positions_c)
    device = inputs.device
    vip_index = torch.tensor(vip, dtype=torch.long, device=device)
    c_index = torch.tensor(positions_c, dtype=torch.long, device=device)
    hierarchy = vcc_tree.build_hierarchy(n_c, params["mode"], params["block_size"])
    block_counts, clamp_note = plan_block_counts(hierarchy, params)
    heads = inputs.batch_shape[-1] if params["share_heads"] and inputs.batch_shape else 1
    # With the default VIPs (the first positions) C is a slice of the keys, not an n x d copy.
    keys_c = inputs.k[:, n_p:] if vip == list(range(n_p)) else inputs.k[:, c_index]
    selection = vcc_tree.select(
        inputs.q[:, vip_index],
        keys_c,
        inputs.scale,
        hierarchy,
        block_counts,
        params["selector"],
        heads=heads,
        generator=inputs.generator(stream=1),
    )
    batch = inputs.batch
    segment = torch.empty(batch, n, dtype=torch.long, device=device)
    segment[:, vip_index] = torch.arange(n_p, device=device)
    segment[:, c_index] = n_p + selection.segments
    r = n_p + selection.num_segments
    rows = int(r.max())
    compressed = vcc_tree.compressed_attention(
        inputs.q, inputs.k, inputs.v, segment, rows, inputs.scale, params["scale_correction"]
    )
    r_list = [int(x) for x in r.tolist()]
    notice = ""
    if clamp_note["clamped"]:
        notice = (
            f"fine_blocks {clamp_note['requested']} is above the maximum {clamp_note['maximum']} for this input; "
            f"used {clamp_note['used']}."
        )
    info = {
        "mode": params["mode"],
        "n_p": n_p,
        "n_c": n_c,
        "padded_n_c": hierarchy.padded,
        "padding": hierarchy.padding,
        "r": r_list[0] if len(set(r_list)) == 1 else r_list,
        "r_min": min(r_list),
        "r_max": max(r_list),
        "block_counts": clamp_note,
        "block_count_clamped": bool(clamp_note["clamped"]),
        "notice": notice,
        "splits_per_level": selection.used()[0].tolist(),
        "selection_shared_over": heads,
    }

    def vip_log_z_hat() -> torch.Tensor:
        return compressed.log_z_hat[:, :n_p]

    def trees() -> list[list[vcc_tree.TreeNode]]:
        return [vcc_tree.tree_nodes(selection, e, positions_c) for e in range(batch)]

    def partition() -> list[list[dict[str, Any]]]:
        return [vcc_tree.partition_blocks(nodes) for nodes in trees()]

    def compression() -> list[dict[str, torch.Tensor]]:
        out = []
        for e in range(batch):
            s_c, lengths = vcc_tree.compression_matrix(selection.segments[e].cpu(), int(selection.num_segments[e]))
            out.append({"S_c": s_c, "D": lengths, "S_c_pinv": s_c.T * lengths[None, :]})
        return out

    def storage_trees() -> list[vcc_tree.StorageTree]:
        v_c = inputs.v[:, c_index].detach().cpu()
        return [vcc_tree.StorageTree.build(v_c[e], hierarchy) for e in range(batch)]

    def layer_update() -> list[dict[str, Any]]:
        # One layer X_new = attention(X) + X on the stored values: the new leaf means are S_c C + the
        # compressed rows' outputs (Prop. 6.5); Algorithm 2 writes them and refreshes their ancestors.
        out = []
        v_c = inputs.v[:, c_index].detach().cpu()
        for e, before in enumerate(storage_trees()):
            j = int(selection.num_segments[e])
            seg_c = selection.segments[e].cpu()
            s_c, lengths = vcc_tree.compression_matrix(seg_c, j)
            compressed_c = s_c.to(v_c.dtype) @ v_c[e]
            y_new = compressed_c + compressed.row_output[e, n_p : n_p + j].detach().cpu()
            leaves = [lf[e].cpu() for lf in selection.leaves]
            internal = [sp[e].cpu() for sp in selection.split]
            after, changed = before.update(leaves, internal, vcc_tree.leaf_values(selection, e, y_new))
            explicit = (s_c.T * lengths[None, :]).to(v_c.dtype) @ (y_new - compressed_c) + v_c[e]
            out.append(
                {
                    "before": before,
                    "after": after,
                    "changed": changed,
                    "n_changed": int(sum(int(c.sum()) for c in changed)),
                    "n_entries": before.entry_count(),
                    "explicit": explicit,
                    "materialised": after.materialise(),
                }
            )
        return out

    parts = {
        "vip_positions": lambda: list(vip),
        "padding": lambda: {"n_c": n_c, "padded_n_c": hierarchy.padded, "padding": hierarchy.padding},
        "partition": partition,
        "selection_tree": trees,
        "r": lambda: r,
        "segments": lambda: segment,
        "resolution": lambda: torch.gather(compressed.counts, 1, segment),
        "log_z_hat": vip_log_z_hat,
        "compressed_attention": lambda: compressed.probabilities,
        "compression": compression,
        "storage_tree": storage_trees,
        "layer_update": layer_update,
    }
    return make_result(inputs, NAME, compressed.output, dense=compressed.dense, parts=parts, info=info)


register(
    MethodSpec(
        name=NAME,
        title="VCC (VIP-token compression)",
        family="compression",
        description=(
            "Keeps the VIP tokens exact and compresses the rest into segment means at several resolutions, "
            "finer where the VIP queries attend (priority mu, eq. 53); softmax runs on the r compressed rows "
            "with a log(segment length) bias and is copied back to every token."
        ),
        params=PARAMS,
        fn=_run,
        budget=_budget,
        cost=_cost,
        randomized=True,
        no_causal_reason="VCC compresses the keys into segment means, chosen by the VIP queries' attention over the "
        "whole sequence, so a compressed key mixes past and future tokens; it has no causal form",
    )
)
