"""What the VCC page computes on one input, as plain functions: the shown head's view (the selection tree, the
mixed-resolution attention, the storage tree T(C) and the entries one layer update rewrites), the error-vs-block-count
sweep over every selector with and without D, and the computed cost curves (App. 6.4). No Streamlit."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from core.approximation import approximate, at_least_float32
from core.approximators.vcc import cost_model
from core.cancel import ProgressFn
from core.vcc_tree import SELECTORS, TreeNode

BLOCK_SIZES = (1, 2, 4, 8, 16, 32, 64, 128)
COST_LENGTHS = tuple(2**e for e in range(8, 18))  # 256 … 128K, the paper's Fig. 1 range


# ----------------------------------------------------------------------------- settings helpers


@dataclass(frozen=True)
class ParsedPositions:
    positions: list[int]  # sorted, unique, inside 0 … n − 1
    ignored: list[str]  # the parts that were not a position of the sequence, as typed


def parse_positions(raw: str, n: int) -> ParsedPositions:
    """Comma- (or semicolon-) separated token positions; bad or out-of-range parts are set aside, not fatal."""
    parsed: list[int] = []
    bad: list[str] = []
    for part in raw.replace(";", ",").split(","):
        part = part.strip()
        if not part:
            continue
        try:
            parsed.append(int(part))
        except ValueError:
            bad.append(part)
    outside = [str(i) for i in parsed if not 0 <= i < n]
    return ParsedPositions(sorted({i for i in parsed if 0 <= i < n}), [*bad, *outside])


def block_sizes(n_c: int) -> list[int]:
    """The two-level block sizes k offered for n_c compressed tokens (never longer than n_c, at least [1])."""
    return [k for k in BLOCK_SIZES if k <= max(1, n_c)]


def sweep_block_counts(maximum: int) -> list[int]:
    """Budgets h for the sweep: 0 … 4 one by one, then growing by half each step, always ending at ``maximum``."""
    grid = {0, maximum}
    h = 1
    while h < maximum:
        grid.add(h)
        h = h + 1 if h < 4 else int(math.ceil(h * 1.5))
    return sorted(grid)


def relative_error(approx: torch.Tensor, exact: torch.Tensor) -> np.ndarray:
    """Relative Frobenius error per matrix of the leading dimensions (per head)."""
    wide = at_least_float32(approx.dtype)  # NumPy has no bfloat16
    approx, exact = approx.to(wide), exact.to(wide)
    return (torch.linalg.matrix_norm(approx - exact) / torch.linalg.matrix_norm(exact).clamp_min(1e-30)).numpy()


# ----------------------------------------------------------------------------- one run, everything shown


@dataclass(frozen=True)
class StorageEntry:
    """One stored entry of T(C): the root mean (level 0) or a node's Δ, and whether the layer update rewrote it."""

    level: int
    index: int
    start: int  # in C coordinates (padded layout)
    count: int  # real tokens under the node
    size: int  # nominal length s
    changed: bool
    before: float  # |entry| before the update
    after: float  # |entry| after it


@dataclass
class VccView:
    """One VCC run and its exact reference, reduced to what the page draws (numpy and plain Python)."""

    info: dict[str, Any]
    vip: list[int]
    vip_error: np.ndarray  # (H,) relative output error of the VIP rows
    all_error: np.ndarray  # (H,) of every row
    memory: int
    flops: int
    r: np.ndarray  # compressed length, per head (or shared)
    attention: np.ndarray  # (n, n) the shown head, VCC
    exact: np.ndarray  # (n, n) the shown head, exact softmax
    nodes: list[TreeNode]  # the selection tree of the shown head, top-down
    resolution: np.ndarray  # (n,) length of the segment each token ended in
    storage: list[StorageEntry]
    n_changed: int
    n_entries: int
    update_gap: float  # max |tree-materialised update − explicit decompression|
    positions_c: list[int]  # original positions of the compressed (non-VIP) tokens

    def compressed_length(self, head: int) -> int:
        """r of the shown head (one r for all heads when they share J)."""
        return int(self.r[head]) if self.r.ndim else int(self.r)

    def memory_percent(self, heads: int, n: int) -> float:
        """VCC's memory against the n² scores per head of exact attention, in per cent."""
        return 100 * self.memory / (heads * n * n)

    def difference(self) -> np.ndarray:
        """VCC − exact attention of the shown head."""
        return self.attention - self.exact


def storage_entries(update: dict[str, Any]) -> list[StorageEntry]:
    """T(C)'s non-empty entries before and after one layer update (``parts["layer_update"][head]``)."""
    before_tree, after_tree = update["before"], update["after"]
    entries = []
    for level, lv in enumerate(before_tree.hierarchy.levels):
        before = before_tree.deltas[level] if level else before_tree.root[None]
        after = after_tree.deltas[level] if level else after_tree.root[None]
        for index in range(lv.nodes):
            count = int(lv.counts[index])
            if count == 0:
                continue
            entries.append(
                StorageEntry(
                    level=level,
                    index=index,
                    start=int(lv.starts[index]),
                    count=count,
                    size=lv.size,
                    changed=bool(update["changed"][level][index]),
                    before=float(before[index].norm()),
                    after=float(after[index].norm()),
                )
            )
    return entries


def tree_counts(nodes: Sequence[TreeNode]) -> tuple[int, int]:
    """(|J|, #internal): the leaves (rows of S_c C) and the split or pass-through nodes of a selection tree."""
    leaves = sum(1 for node in nodes if node.status == "leaf")
    internal = sum(1 for node in nodes if node.status in ("split", "pass"))
    return leaves, internal


def vcc_view(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, beta: float, params: dict[str, Any], seed: int, head: int
) -> VccView:
    """Run VCC and exact attention once; keep the errors, the shown head's maps, trees and the layer update."""
    result = approximate("vcc", q, k, v, scale=beta, seed=seed, **params)
    exact = approximate("exact", q, k, v, scale=beta)
    vip = result.parts["vip_positions"]
    update = result.parts["layer_update"][head]
    vip_set = set(vip)
    return VccView(
        info=dict(result.info),
        vip=vip,
        vip_error=relative_error(result.output[:, vip], exact.output[:, vip]),
        all_error=relative_error(result.output, exact.output),
        memory=int(result.cost.memory),
        flops=int(result.cost.flops),
        r=result.parts["r"].numpy(),
        attention=result.attention()[head].float().numpy(),
        exact=exact.attention()[head].float().numpy(),
        nodes=list(result.parts["selection_tree"][head]),
        resolution=result.parts["resolution"][head].numpy(),
        storage=storage_entries(update),
        n_changed=update["n_changed"],
        n_entries=update["n_entries"],
        update_gap=float((update["materialised"] - update["explicit"]).abs().max()),
        positions_c=[i for i in range(q.shape[-2]) if i not in vip_set],
    )


# ----------------------------------------------------------------------------- error vs block count


@dataclass(frozen=True)
class SweepPoint:
    selector: str
    scale_correction: bool  # the length bias D on
    h: int
    r: float  # compressed length, mean over heads
    vip_error: float  # relative output error of the VIP rows, mean over heads
    all_error: float  # of every row, mean over heads


def error_sweep(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    beta: float,
    params: dict[str, Any],
    seed: int,
    maximum: int,
    progress: ProgressFn | None = None,
) -> list[SweepPoint]:
    """VIP-row and all-row output errors for every selector, with and without D, at every ``sweep_block_counts`` h.

    ``params`` are VCC's other settings (mode, block size, VIPs); ``progress(fraction, label)`` is called before
    every run, which is also where a cancelled job stops.
    """
    exact = approximate("exact", q, k, v, scale=beta).output
    block_counts = sweep_block_counts(maximum)
    total = 2 * len(SELECTORS) * len(block_counts)
    points: list[SweepPoint] = []
    for selector in SELECTORS:
        for with_d in (True, False):
            for h in block_counts:
                if progress is not None:
                    progress(len(points) / total, selector)
                run = dict(params, selector=selector, scale_correction=with_d, fine_blocks=h)
                result = approximate("vcc", q, k, v, scale=beta, seed=seed, **run)
                vip = result.parts["vip_positions"]
                points.append(
                    SweepPoint(
                        selector=selector,
                        scale_correction=with_d,
                        h=h,
                        r=float(result.parts["r"].float().mean()),
                        vip_error=float(relative_error(result.output[:, vip], exact[:, vip]).mean()),
                        all_error=float(relative_error(result.output, exact).mean()),
                    )
                )
    return points


def sweep_runs(maximum: int) -> int:
    """VCC calls ``error_sweep`` makes (for limits and time estimates)."""
    return 2 * len(SELECTORS) * len(sweep_block_counts(maximum))


# One VCC call in ``error_sweep``: a fixed part (the tree, the selection, Python) and a part per attention entry.
# The page used 1/3e7 s per entry alone: 0.2 s shown, 0.8 s taken at n = 256, 3.9 s shown, 1.1 s taken at n = 1024
# (benchmarks/limits_calibration.py).
SWEEP_SECONDS_PER_RUN = 0.0026
SWEEP_SECONDS_PER_ENTRY = 2.2e-9


def sweep_seconds(runs: int, heads: int, n: int) -> float:
    """The time ``error_sweep`` takes for ``runs`` VCC calls on (heads, n, d) (shown before its button)."""
    return runs * (SWEEP_SECONDS_PER_RUN + heads * n * n * SWEEP_SECONDS_PER_ENTRY)


# ----------------------------------------------------------------------------- cost (computed, not timed)


@dataclass(frozen=True)
class CostCurve:
    n: np.ndarray  # sequence lengths
    r: np.ndarray  # VCC's compressed length
    flops: np.ndarray  # VCC FLOPs per head
    exact_flops: np.ndarray  # exact attention FLOPs per head


def cost_curve(
    lengths: Sequence[int], d: int, dv: int, n_p: int, mode: str, block_size: int, block_count: int
) -> CostCurve:
    """The paper's complexity (App. 6.4) over ``lengths`` with n_p, k and h held fixed (clipped to short n)."""
    costs = [cost_model(m, d, dv, min(n_p, m - 1), mode, min(block_size, m), int(block_count)) for m in lengths]
    return CostCurve(
        n=np.asarray(lengths, dtype=np.int64),
        r=np.asarray([c["r"] for c in costs], dtype=np.int64),
        flops=np.asarray([c["flops"] for c in costs], dtype=np.int64),
        exact_flops=np.asarray([c["exact_flops"] for c in costs], dtype=np.int64),
    )


# ----------------------------------------------------------------------------- the paper's numbers (quoted)

# Zeng et al. 2023 (arXiv 2305.04241), Tables 1-3: trained models on A100s, quoted, not reproduced here.
PAPER_TABLES: dict[str, dict[str, list[Any]]] = {
    "Table 1 (encoder-only, 4K, base; runtime ms / accuracy)": {
        "method": ["RoBERTa-4K", "Big Bird", "Longformer", "MRA", "VCC (Ours)"],
        "HotpotQA ms": [422.3, 297.9, 371.0, 203.5, 114.6],
        "HotpotQA F1": [76.1, 73.2, 73.6, 77.0, 74.6],
        "WikiHop ms": [414.1, 293.3, 369.7, 199.2, 108.0],
        "WikiHop acc": [75.2, 74.5, 74.3, 76.1, 75.9],
    },
    "Table 2 (T5 base, 4K; whole/encoder ms, WikiHop EM)": {
        "method": ["T5-4K", "LongT5-4K", "LED-4K", "VCC (Ours) 4K"],
        "WikiHop ms": ["594.3/553.7", "270.7/233.9", "236.6/222.9", "181.7/148.1"],
        "EM": [76.2, 72.7, 70.0, 76.7],
    },
    "Table 3 (NarrativeQA, base, k = block size, h = refined blocks)": {
        "length": ["16K", "32K", "64K", "128K"],
        "k": [16, 16, 16, 16],
        "h": [90, 90, 90, 90],
        "runtime ms": [518.2, 1027.9, 2244.8, 6267.8],
        "F1": [16.6, 17.5, 19.3, 19.6],
    },
}
