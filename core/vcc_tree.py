"""VCC's multiresolution machinery (Zeng et al. 2023, arXiv 2305.04241), in plain torch.

Notation follows the paper: P = VIP tokens (never compressed), C = the n_c remaining tokens,
c^s_x = mean of the x-th s-length segment of C, J = the chosen segments (a partition of C),
S_c = the compression matrix whose rows are J's box functions b^s_x (value 1/s on the segment),
D = diag(segment lengths), S_c^+ = S_c^T D (the decompression, Prop. 6.3), T(C) = the storage tree.

Pieces:
- ``Hierarchy``: nested partitions of C. ``tree`` mode is the paper's dyadic tree (Algorithm 1);
  ``two_level`` is the root, blocks of k tokens and single tokens (the paper's experiments).
  C is padded at the end to a power of two (tree) or a multiple of k (two-level); padded slots carry
  no token, nodes made only of padding do not exist, and means divide by the real count.
- ``select``: Algorithm 1 generalised to any hierarchy: level by level, split the top h_l candidates.
- ``compressed_attention``: softmax attention on the compressed sequence with the log-length bias
  (D), broadcast back to every token (S^+).
- ``StorageTree``: T(C) with its difference entries, retrieval (eq. 16) and the one-layer update
  of Algorithm 2.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from core.device import row_blocks

MODES = ("two_level", "tree")
SELECTORS = ("score", "softmax", "random", "bottom")


# ----------------------------------------------------------------------------- hierarchy


@dataclass(frozen=True)
class Level:
    """One resolution: N nodes of nominal length ``size``; ``counts`` real tokens in each."""

    size: int
    starts: torch.Tensor  # (N,) start position in padded C
    counts: torch.Tensor  # (N,) real (non-padding) tokens in the node
    parent: torch.Tensor  # (N,) index of the parent in the previous level (-1 at the root)

    @property
    def nodes(self) -> int:
        return int(self.starts.numel())


@dataclass(frozen=True)
class Hierarchy:
    """Nested partitions of the n_c non-VIP tokens, coarsest (the root) first, single tokens last."""

    mode: str
    n_c: int
    padded: int
    levels: tuple[Level, ...]
    block_size: int  # k in two-level mode; 2 (the branching) in tree mode

    @property
    def padding(self) -> int:
        return self.padded - self.n_c

    @property
    def depth(self) -> int:
        """Number of levels whose nodes can be split (all but the token level)."""
        return len(self.levels) - 1

    def entries(self) -> int:
        """Stored entries of T(C): one per non-empty node."""
        return int(sum(int((lv.counts > 0).sum()) for lv in self.levels))


def _level(size: int, nodes: int, n_c: int, branching: int | None) -> Level:
    starts = torch.arange(nodes, dtype=torch.long) * size
    counts = (n_c - starts).clamp(min=0, max=size)
    parent = torch.full((nodes,), -1, dtype=torch.long) if branching is None else torch.arange(nodes) // branching
    return Level(size=size, starts=starts, counts=counts, parent=parent)


def build_hierarchy(n_c: int, mode: str, block_size: int) -> Hierarchy:
    """The nested partitions for ``mode``; C is padded at the end to fit them."""
    if n_c < 1:
        raise ValueError(f"n_c must be at least 1, got {n_c}")
    if mode == "tree":
        depth = max(0, math.ceil(math.log2(n_c)))
        padded = 2**depth
        levels = tuple(_level(2 ** (depth - lv), 2**lv, n_c, None if lv == 0 else 2) for lv in range(depth + 1))
        return Hierarchy(mode, n_c, padded, levels, 2)
    if mode == "two_level":
        k = int(block_size)
        if k < 1:
            raise ValueError(f"block_size must be at least 1, got {k}")
        blocks = math.ceil(n_c / k)
        padded = blocks * k
        root = _level(padded, 1, n_c, None)
        block_level = _level(k, blocks, n_c, blocks)  # every block's parent is the root (index 0)
        token_level = _level(1, padded, n_c, k)
        return Hierarchy(mode, n_c, padded, (root, block_level, token_level), k)
    raise ValueError(f"mode must be one of {MODES}, got {mode!r}")


def level_means(x: torch.Tensor, hierarchy: Hierarchy) -> list[torch.Tensor]:
    """c^s_x for every node of every level: x (B, n_c, f) -> list of (B, N_l, f); empty nodes are 0."""
    batch, n_c, features = x.shape
    padded = torch.zeros(batch, hierarchy.padded, features, dtype=x.dtype, device=x.device)
    padded[:, :n_c] = x
    out = []
    for lv in hierarchy.levels:
        sums = padded.reshape(batch, lv.nodes, lv.size, features).sum(2)
        counts = lv.counts.to(device=x.device, dtype=x.dtype).clamp(min=1)
        out.append(sums / counts[None, :, None])
    return out


# ----------------------------------------------------------------------------- selection (Algorithm 1)


@dataclass
class Selection:
    """Algorithm 1's result for a batch: which nodes are in the tree, split, or leaves (rows of S_c C)."""

    hierarchy: Hierarchy
    active: list[torch.Tensor]  # (B, N_l) bool: node is in the selection tree
    split: list[torch.Tensor]  # (B, N_l) bool: node was refined (internal)
    log_mu: list[torch.Tensor]  # (B, N_l) log of the priority mu (eq. 53), every node
    score: list[torch.Tensor]  # (B, N_l) the selector's ranking key at selection time (nan: not ranked)
    requested: list[int]  # h_l asked for, per splittable level
    passthrough: list[torch.Tensor]  # (B, N_l) bool: split for free, its tokens all lie in its first child
    segments: torch.Tensor = field(init=False)  # (B, n_c) row of S_c C holding each token
    num_segments: torch.Tensor = field(init=False)  # (B,) |J|
    lengths: torch.Tensor = field(init=False)  # (B, n_c) length s of each token's segment

    def __post_init__(self) -> None:
        self.segments, self.num_segments, self.lengths = _segments_from_leaves(self)

    @property
    def leaves(self) -> list[torch.Tensor]:
        return [a & ~s for a, s in zip(self.active, self.split, strict=True)]

    def used(self) -> torch.Tensor:
        """(B, depth) number of nodes split by the block counts at each splittable level (pass-throughs are free)."""
        charged = [(s & ~p).sum(-1) for s, p in zip(self.split[:-1], self.passthrough[:-1], strict=True)]
        return torch.stack(charged, dim=-1) if charged else torch.zeros(self.split[0].shape[0], 0, dtype=torch.long)


def _segments_from_leaves(sel: Selection) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    hier = sel.hierarchy
    batch = sel.active[0].shape[0]
    device = sel.active[0].device
    starts = torch.zeros(batch, hier.padded, dtype=torch.bool, device=device)
    lengths = torch.zeros(batch, hier.padded, dtype=torch.long, device=device)
    for lv, leaf in zip(hier.levels, sel.leaves, strict=True):
        if lv.size == 1:
            covered = leaf
        else:
            covered = leaf.repeat_interleave(lv.size, dim=1)
        starts[:, lv.starts.to(device)] |= leaf
        lengths = torch.where(covered, lv.counts.to(device).repeat_interleave(lv.size)[None, :], lengths)
    starts = starts[:, : hier.n_c]
    segments = torch.cumsum(starts.long(), dim=1) - 1
    return segments, starts.sum(1), lengths[:, : hier.n_c]


def _top_h(score: torch.Tensor, candidates: torch.Tensor, h: int) -> torch.Tensor:
    """Mark the h highest-scoring candidates of each row (fewer if there are fewer candidates)."""
    chosen = torch.zeros_like(candidates)
    h = min(h, score.shape[-1])
    if h <= 0:
        return chosen
    masked = torch.where(candidates, score, torch.full_like(score, -math.inf))
    values, index = torch.topk(masked, h, dim=-1)
    chosen.scatter_(-1, index, values > -math.inf)
    return chosen & candidates


def _combine_heads(values: torch.Tensor, heads: int, how: str) -> torch.Tensor:
    """Pool a per-element (B, N) score over groups of ``heads`` consecutive elements, broadcast back."""
    if heads <= 1:
        return values
    grouped = values.reshape(-1, heads, values.shape[-1])
    pooled = torch.logsumexp(grouped, dim=1) if how == "logsumexp" else grouped.mean(dim=1)
    return pooled.repeat_interleave(heads, dim=0)


def select(
    vip_queries: torch.Tensor,
    keys_c: torch.Tensor,
    scale: torch.Tensor,
    hierarchy: Hierarchy,
    block_counts: Sequence[int],
    selector: str = "score",
    *,
    heads: int = 1,
    generator: torch.Generator | None = None,
) -> Selection:
    """Algorithm 1 on every batch element.

    vip_queries (B, n_p, d); keys_c (B, n_c, d); scale (B, 1, 1) the inverse temperature.
    block_counts: h_l for each splittable level (root first). ``heads`` > 1 pools the scores over groups of
    that many consecutive batch elements (the heads of one layer), so they share one J.
    mu (eq. 53) is the sum over VIP queries of exp(beta <p_i, c^s_x>), kept as its log.
    """
    if selector not in SELECTORS:
        raise ValueError(f"selector must be one of {SELECTORS}, got {selector!r}")
    if len(block_counts) != hierarchy.depth:
        raise ValueError(f"need {hierarchy.depth} per-level block_counts, got {len(block_counts)}")
    batch = keys_c.shape[0]
    device = keys_c.device
    means = level_means(keys_c, hierarchy)
    beta_q = vip_queries * scale
    logits = [beta_q @ m.transpose(-1, -2) for m in means]  # (B, n_p, N_l)
    log_mu = [_combine_heads(torch.logsumexp(lg, dim=1), heads, "logsumexp") for lg in logits]
    active = [torch.ones(batch, 1, dtype=torch.bool, device=device)]
    splits: list[torch.Tensor] = []
    passes: list[torch.Tensor] = []
    scores: list[torch.Tensor] = []
    for index, lv in enumerate(hierarchy.levels):
        nonempty = (lv.counts > 0).to(device)[None, :]
        act = active[index] & nonempty
        active[index] = act
        if index == hierarchy.depth:  # single tokens cannot be split
            splits.append(torch.zeros_like(act))
            passes.append(torch.zeros_like(act))
            scores.append(torch.full(act.shape, math.nan, dtype=keys_c.dtype, device=device))
            break
        if selector == "score":
            score = log_mu[index]
        elif selector == "bottom":
            score = -log_mu[index]
        elif selector == "softmax":
            masked = logits[index].masked_fill(~act[:, None, :], -math.inf)
            score = _combine_heads(torch.softmax(masked, dim=-1).mean(dim=1), heads, "mean")
        else:
            # One draw shared by every batch element (like Performer's projection), so an element's random
            # selection does not depend on its position in the batch.
            draw = torch.rand(1, lv.nodes, generator=generator, dtype=torch.float64, device="cpu")
            score = draw.to(device=device, dtype=keys_c.dtype).expand(batch, -1)
        # A tree node whose real tokens all sit in its left child (padding fills the right) holds the same
        # tokens as that child: it passes down for free, so padding never spends a block count.
        free = act & _passes_down(hierarchy, index).to(device)[None, :]
        candidates = act & ~free & (lv.counts >= 2).to(device)[None, :]
        chosen = _top_h(score, candidates, int(block_counts[index])) | free
        passes.append(free)
        splits.append(chosen)
        scores.append(torch.where(act, score, torch.full_like(score, math.nan)))
        nxt = hierarchy.levels[index + 1]
        active.append(chosen[:, nxt.parent.to(device)])
    return Selection(hierarchy, active, splits, log_mu, scores, [int(b) for b in block_counts], passes)


def _passes_down(hierarchy: Hierarchy, index: int) -> torch.Tensor:
    """(N_l,) nodes of a binary tree level whose tokens all lie in the first child (the rest is padding)."""
    lv = hierarchy.levels[index]
    if hierarchy.mode != "tree" or lv.size < 2:
        return torch.zeros(lv.nodes, dtype=torch.bool)
    return (lv.counts > 0) & (lv.counts <= lv.size // 2)


def max_splits(hierarchy: Hierarchy) -> list[int]:
    """Most nodes each level can split with the block counts if every level above splits everything it can."""
    return [
        int(((lv.counts >= 2) & ~_passes_down(hierarchy, index)).sum())
        for index, lv in enumerate(hierarchy.levels[:-1])
    ]


# ----------------------------------------------------------------------------- compressed attention


@dataclass
class Compressed:
    """Softmax attention run on the compressed sequence of r rows (VIP tokens, then J in order)."""

    output: torch.Tensor  # (B, n, dv) decompressed: every token gets its row's output
    probabilities: torch.Tensor  # (B, R, R) softmax over compressed keys (R = max r; empty rows padded)
    row_output: torch.Tensor  # (B, R, dv) outputs of the compressed rows
    counts: torch.Tensor  # (B, R) tokens per compressed row (0 for padding rows)
    log_z_hat: torch.Tensor  # (B, R) log of the approximate softmax normaliser of each compressed query
    segment: torch.Tensor  # (B, n) compressed row of every token

    def dense(self) -> torch.Tensor:
        """The n x n matrix implied: A_hat[i, j] = p[seg(i), seg(j)] / count[seg(j)]."""
        batch, n = self.segment.shape
        rows = torch.gather(
            self.probabilities, 1, self.segment[:, :, None].expand(batch, n, self.probabilities.shape[-1])
        )
        cols = torch.gather(rows, 2, self.segment[:, None, :].expand(batch, n, n))
        per_col = torch.gather(self.counts, 1, self.segment).to(cols.dtype)
        return cols / per_col[:, None, :]


def segment_means(x: torch.Tensor, segment: torch.Tensor, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Means of x (B, n, f) over the rows named by segment (B, n): (B, rows, f) and counts (B, rows)."""
    batch, _, features = x.shape
    sums = torch.zeros(batch, rows, features, dtype=x.dtype, device=x.device)
    sums.scatter_add_(1, segment[:, :, None].expand(-1, -1, features), x)
    counts = torch.zeros(batch, rows, dtype=torch.long, device=x.device)
    counts.scatter_add_(1, segment, torch.ones_like(segment))
    return sums / counts.clamp(min=1)[:, :, None].to(x.dtype), counts


def compressed_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    segment: torch.Tensor,
    rows: int,
    scale: torch.Tensor,
    scale_correction: bool = True,
) -> Compressed:
    """softmax(beta S Q (S K)^T + log D) (S V), decompressed by S^+.

    segment (B, n) assigns every token to one of ``rows`` compressed rows (a VIP token is its own row);
    rows with no token are masked out. With scale_correction, a compressed key of s tokens gets +log s
    on its logit (the matrix D), which makes the normaliser a lower bound of the exact one.
    """
    q_bar, counts = segment_means(q, segment, rows)
    k_bar, _ = segment_means(k, segment, rows)
    present = counts > 0
    if scale_correction:
        bias = torch.log(counts.to(q.dtype))  # log 0 = -inf masks empty rows
    else:
        bias = torch.where(present, 0.0, -math.inf).to(q.dtype)
    # Block by block of compressed queries: the r x r probabilities are the only r x r tensor allocated (the
    # logits and logsumexp's temporaries are block-sized); each row's numbers are the whole-matrix ones.
    probabilities = q_bar.new_empty(q_bar.shape[0], rows, rows)
    log_z_hat = q_bar.new_empty(q_bar.shape[0], rows)
    k_bar_t = k_bar.transpose(-1, -2)
    for block in row_blocks(rows, q_bar.shape[0] * rows, q_bar.device):  # blocks span the batch
        logits = (q_bar[:, block] @ k_bar_t).mul_(scale).add_(bias[:, None, :])
        log_z_hat[:, block] = torch.logsumexp(logits, dim=-1)
        torch.exp(logits.sub_(log_z_hat[:, block, None]), out=probabilities[:, block])
    del q_bar, k_bar, k_bar_t  # before V's means and the output
    v_bar, _ = segment_means(v, segment, rows)
    row_output = probabilities @ v_bar
    output = torch.gather(row_output, 1, segment[:, :, None].expand(-1, -1, v.shape[-1]))
    return Compressed(output, probabilities, row_output, counts, log_z_hat, segment)


def compression_matrix(segments_c: torch.Tensor, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
    """S_c (rows, n_c) with 1/s on each segment, and D's diagonal (rows,), for one element's segments (n_c,)."""
    n_c = segments_c.shape[0]
    lengths = torch.bincount(segments_c, minlength=rows).to(torch.float64)
    s_c = torch.zeros(rows, n_c, dtype=torch.float64, device=segments_c.device)
    s_c[segments_c, torch.arange(n_c, device=segments_c.device)] = 1.0 / lengths[segments_c]
    return s_c, lengths


# ----------------------------------------------------------------------------- storage tree T(C)


@dataclass
class StorageTree:
    """T(C): the root mean c^{n_c}_1 and, for every other non-empty node, delta = parent mean - own mean (15)."""

    hierarchy: Hierarchy
    root: torch.Tensor  # (f,)
    deltas: list[torch.Tensor]  # per level (N_l, f); level 0 holds zeros (the root stores its mean)

    @classmethod
    def build(cls, x: torch.Tensor, hierarchy: Hierarchy) -> StorageTree:
        """From C (n_c, f), bottom-up means (14) then differences (15)."""
        means = [m[0] for m in level_means(x[None], hierarchy)]
        deltas = [torch.zeros_like(means[0])]
        for index in range(1, len(hierarchy.levels)):
            lv = hierarchy.levels[index]
            delta = means[index - 1][lv.parent] - means[index]
            deltas.append(torch.where((lv.counts > 0)[:, None], delta, torch.zeros_like(delta)))
        return cls(hierarchy, means[0][0].clone(), deltas)

    def retrieve(self, level: int, index: int) -> torch.Tensor:
        """c^s_x by walking from the root and subtracting the deltas on the path (eq. 16 / 63)."""
        path = [index]
        for lv in reversed(self.hierarchy.levels[1 : level + 1]):
            path.append(int(lv.parent[path[-1]]))
        path.reverse()  # path[l] = ancestor index at level l
        value = self.root.clone()
        for lv_index in range(1, level + 1):
            value = value - self.deltas[lv_index][path[lv_index]]
        return value

    def means(self) -> list[torch.Tensor]:
        """All c^s_x, top-down (materialisation, eq. 66); the last level is C itself (plus padding)."""
        out = [self.root[None].clone()]
        for index in range(1, len(self.hierarchy.levels)):
            lv = self.hierarchy.levels[index]
            out.append(out[-1][lv.parent] - self.deltas[index])
        return out

    def materialise(self) -> torch.Tensor:
        """The n_c token states stored in the tree."""
        return self.means()[-1][: self.hierarchy.n_c]

    def entry_count(self) -> int:
        return self.hierarchy.entries()

    def update(
        self, leaves: Sequence[torch.Tensor], internal: Sequence[torch.Tensor], leaf_means: Sequence[torch.Tensor]
    ) -> tuple[StorageTree, list[torch.Tensor]]:
        """Algorithm 2: write the new leaf means (c_new)^s_x of J and refresh their ancestors only.

        leaves / internal: per level (N_l,) bool masks of J and of the split nodes (one element's
        selection). leaf_means: per level (N_l, f) new means, read where ``leaves`` is set.
        Returns T(C_new) and, per level, which entries were rewritten (|J| + #internal in total).
        Deltas below J's leaves are untouched: every token of a segment gets the same update (Prop. 6.4).
        """
        levels = self.hierarchy.levels
        new_deltas = [d.clone() for d in self.deltas]
        changed = [torch.zeros(lv.nodes, dtype=torch.bool) for lv in levels]
        known = [lm.clone() for lm in leaf_means]  # new means, valid where leaf or (after the pass) internal
        for index in range(len(levels) - 1, -1, -1):
            lv = levels[index]
            is_new = leaves[index] | internal[index]
            if index + 1 < len(levels):
                child = levels[index + 1]
                child_new = leaves[index + 1] | internal[index + 1]
                weights = (child.counts * child_new).to(known[index + 1].dtype)
                sums = torch.zeros_like(known[index]).index_add_(0, child.parent, known[index + 1] * weights[:, None])
                totals = torch.zeros(lv.nodes, dtype=weights.dtype).index_add_(0, child.parent, weights)
                from_children = sums / totals.clamp(min=1)[:, None]  # (14): count-weighted mean of the children
                known[index] = torch.where(internal[index][:, None], from_children, known[index])
            changed[index] = is_new
        # Parents of rewritten nodes are internal, so every new mean is known now: refresh the deltas (15).
        for index in range(1, len(levels)):
            lv = levels[index]
            fresh = known[index - 1][lv.parent] - known[index]
            new_deltas[index] = torch.where(changed[index][:, None], fresh, new_deltas[index])
        root = known[0][0] if bool(changed[0][0]) else self.root.clone()
        return StorageTree(self.hierarchy, root, new_deltas), changed


# ----------------------------------------------------------------------------- per-element views for the UI


@dataclass(frozen=True)
class TreeNode:
    """A node of the selection tree (the paper's Fig. 3)."""

    id: int
    level: int
    index: int
    start: int  # in C coordinates (0-based, padded layout)
    size: int  # nominal length s
    count: int  # real tokens (s minus padding)
    first: int  # first original position covered
    last: int  # last original position covered
    log_mu: float
    score: float  # the selector's ranking key (nan where the level was not ranked)
    status: str  # "split" (refined), "pass" (padding pass-through, free) or "leaf" (a row of S_c C)
    parent: int  # node id, -1 for the root
    row: int  # row of S_c C for leaves, -1 for internal nodes


def tree_nodes(selection: Selection, element: int, positions_c: Sequence[int]) -> list[TreeNode]:
    """The selection tree of one batch element, top-down, nodes of a level left to right."""
    hier = selection.hierarchy
    nodes: list[TreeNode] = []
    ids: dict[tuple[int, int], int] = {}
    leaf_rows: dict[tuple[int, int], int] = {}
    # Rows of S_c C are the leaves ordered by start position.
    leaf_keys = []
    for index, (lv, leaf) in enumerate(zip(hier.levels, selection.leaves, strict=True)):
        for node in torch.nonzero(leaf[element]).flatten().tolist():
            leaf_keys.append((int(lv.starts[node]), index, node))
    for row, (_, index, node) in enumerate(sorted(leaf_keys)):
        leaf_rows[(index, node)] = row
    for index, lv in enumerate(hier.levels):
        act = selection.active[index][element]
        split = selection.split[index][element]
        passes = selection.passthrough[index][element]
        log_mu = selection.log_mu[index][element].tolist()
        score = selection.score[index][element].tolist()
        for node in torch.nonzero(act).flatten().tolist():
            start = int(lv.starts[node])
            count = int(lv.counts[node])
            parent = ids.get((index - 1, int(lv.parent[node])), -1) if index > 0 else -1
            ids[(index, node)] = len(nodes)
            nodes.append(
                TreeNode(
                    id=len(nodes),
                    level=index,
                    index=node,
                    start=start,
                    size=lv.size,
                    count=count,
                    first=int(positions_c[start]),
                    last=int(positions_c[start + count - 1]),
                    log_mu=float(log_mu[node]),
                    score=float(score[node]),
                    status=("pass" if bool(passes[node]) else "split") if bool(split[node]) else "leaf",
                    parent=parent,
                    row=leaf_rows.get((index, node), -1),
                )
            )
    return nodes


def partition_blocks(nodes: Sequence[TreeNode]) -> list[dict[str, Any]]:
    """J as blocks (the leaves), in row order of S_c C."""
    leaves = sorted((n for n in nodes if n.status == "leaf"), key=lambda n: n.row)
    return [
        {
            "row": n.row,
            "level": n.level,
            "start": n.start,
            "length": n.count,
            "size": n.size,
            "first": n.first,
            "last": n.last,
            "log_mu": n.log_mu,
            "score": n.score,
        }
        for n in leaves
    ]


def leaf_values(selection: Selection, element: int, row_values: torch.Tensor) -> list[torch.Tensor]:
    """Per level (N_l, f): each J leaf's row of ``row_values`` (|J|, f) in S_c C order; zeros elsewhere."""
    hier = selection.hierarchy
    segments = selection.segments[element].cpu()
    out = []
    for lv, leaf in zip(hier.levels, selection.leaves, strict=True):
        rows = segments[lv.starts.clamp(max=hier.n_c - 1)]
        values = row_values[rows]
        out.append(torch.where(leaf[element].cpu()[:, None], values, torch.zeros_like(values)))
    return out
