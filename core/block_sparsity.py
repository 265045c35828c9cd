"""Block sparsity as a kernel sees it: a sparse support at the tile size of a block-sparse GPU kernel.

A block-sparse kernel (FlashAttention's block-sparse mode, FlexAttention's ``BlockMask``, Triton's block-sparse
matmul) computes whole tiles of ``block`` x ``block`` scores: it skips a tile only when none of its entries is in the
support. So its work is the fraction of TILES touched, not the fraction of entries kept: a support holding 1/8 of the
entries, scattered (LSH buckets at random positions), touches nearly every tile and saves nothing, while a routed or
banded support of the same size touches about 1/8 of them.

``block_map`` reduces a support to its tiles; ``occupancy`` gives both fractions for every method's support;
``block_sparse_attention`` is softmax attention restricted to the touched tiles (computed tile by tile, as a kernel
does), and ``time_block_sparse`` times it against dense attention (torch SDPA) on this device.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from core import profiling, registry
from core.approximation import approximate
from core.approximators.common import ceil_div
from core.budget import budget_params
from core.device import cpu_threads
from core.errors import ParameterError

BLOCK_SIZES = (16, 32, 64, 128)
DEFAULT_BLOCK = 64
# Families whose support is a set of entries (sparse parts); low-rank methods have no support to tile.
SUPPORT_FAMILIES = ("sparse", "routed-sparse", "sparse+low-rank")
MAX_N = 4096


def check_block(block: Any) -> int:
    if isinstance(block, bool) or not isinstance(block, int) or block not in BLOCK_SIZES:
        raise ParameterError("block", f"must be one of {', '.join(map(str, BLOCK_SIZES))}, got {block!r}")
    return block


def block_map(support: torch.Tensor, block: int) -> torch.Tensor:
    """(..., n, n) bool support -> (..., nb, nb) bool: tile (I, J) is touched when any entry in it is kept."""
    check_block(block)
    n = support.shape[-1]
    blocks = ceil_div(n, block)
    padded = support.new_zeros(*support.shape[:-2], blocks * block, blocks * block)
    padded[..., :n, :n] = support
    tiles = padded.reshape(*support.shape[:-2], blocks, block, blocks, block)
    return tiles.any(-1).any(-2)


def expand_blocks(blocks: torch.Tensor, block: int, n: int) -> torch.Tensor:
    """(..., nb, nb) tiles -> the (..., n, n) entries they cover."""
    return blocks.repeat_interleave(block, -2).repeat_interleave(block, -1)[..., :n, :n]


@dataclass(frozen=True)
class Occupancy:
    """One method's support at one tile size, on head 0 (the maps) and over all heads (the fractions)."""

    method: str
    params: dict[str, Any]
    block: int
    entry_fraction: float  # entries kept / n^2, mean over heads
    block_fraction: float  # tiles touched / nb^2, mean over heads
    causal: bool
    entries: torch.Tensor  # (n, n) bool, head 0
    blocks: torch.Tensor  # (nb, nb) bool, head 0

    @property
    def fill(self) -> float:
        """Entries kept per entry computed by a block-sparse kernel: 1 when every touched tile is full."""
        return self.entry_fraction / self.block_fraction if self.block_fraction > 0 else math.nan

    def row(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "block": self.block,
            "entries_kept": self.entry_fraction,
            "blocks_touched": self.block_fraction,
            "fill_of_touched_blocks": self.fill,
            "causal": self.causal,
        }


def support_methods() -> list[str]:
    """Registered methods that have a sparse support (in registry order), oracles left out."""
    return [name for name, spec in registry.methods().items() if spec.family in SUPPORT_FAMILIES]


def method_support(
    method: str,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    scale: float,
    fraction: float,
    seed: int = 0,
    causal: bool = False,
    overrides: Mapping[str, Any] | None = None,
) -> tuple[torch.Tensor, dict[str, Any]]:
    """The (heads, n, n) support of ``method`` at the budget (its sparse part) and the parameters it ran with."""
    if method not in support_methods():
        raise ParameterError("method", f"must be a method with a sparse support: {', '.join(support_methods())}")
    n, d = int(q.shape[-2]), int(q.shape[-1])
    if n > MAX_N:
        raise ParameterError("n", f"the block view draws n x n supports; it needs n <= {MAX_N}, got {n}")
    params = {**budget_params(method, n, d, fraction), **(overrides or {})}
    if causal:
        params["causal"] = True
    result = approximate(method, q, k, v, scale=scale, seed=seed, **params)
    heads = int(q.reshape(-1, n, d).shape[0])
    support = result.parts["support"].to(torch.bool).reshape(-1, n, n)
    return support.expand(heads, n, n).contiguous(), result.params  # a shared pattern (a band) for every head


def occupancy(support: torch.Tensor, block: int, method: str = "", params: dict | None = None) -> Occupancy:
    """Both fractions of a (heads, n, n) support at tile size ``block``.

    Causal supports are measured against the whole n x n square, as their kernel's grid is: a causal kernel skips
    the upper tiles, so dense causal attention itself touches about half the tiles (and keeps half the entries)."""
    support = support.reshape(-1, support.shape[-2], support.shape[-1])
    tiles = block_map(support, block)
    causal = bool(params.get("causal")) if params else False
    return Occupancy(
        method=method,
        params=dict(params or {}),
        block=block,
        entry_fraction=float(support.float().mean()),
        block_fraction=float(tiles.float().mean()),
        causal=causal,
        entries=support[0].cpu(),
        blocks=tiles[0].cpu(),
    )


# ------------------------------------------------------------------ the computation a block-sparse kernel does


def block_sparse_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, blocks: torch.Tensor, block: int, scale: float
) -> torch.Tensor:
    """softmax(scale q k^T) restricted to the entries of the touched tiles, applied to v: (B, n, dv).

    Tile row by tile row, as a block-sparse kernel's grid runs: each query tile gathers only the key tiles its row
    of ``blocks`` (B, nb, nb) touches (over the batch, the most any element touches), so the work follows the
    touched tiles. One fused SDPA call per query tile row.
    """
    batch, n, d = q.shape
    nb = ceil_div(n, block)
    if blocks.shape[-2:] != (nb, nb):
        raise ParameterError("blocks", f"must be (batch, {nb}, {nb}) for n = {n} and block {block}")
    padded = nb * block
    qp, kp, vp = (F.pad(t, (0, 0, 0, padded - n)) for t in (q, k, v))
    key_tiles, value_tiles = kp.view(batch, nb, block, d), vp.view(batch, nb, block, v.shape[-1])
    offsets = torch.arange(block, device=q.device)
    out = q.new_zeros(batch, padded, v.shape[-1])
    for row in range(nb):
        touched = blocks[:, row]  # (B, nb)
        width = int(touched.sum(-1).max())
        if width == 0:
            continue  # no key tile: the rows attend to nothing (0, as masked_softmax gives)
        order = torch.sort(touched.to(torch.int8), dim=-1, descending=True, stable=True).indices[:, :width]
        used = torch.arange(width, device=q.device) < touched.sum(-1, keepdim=True)  # (B, width)
        index = order[..., None, None]
        keys = torch.gather(key_tiles, 1, index.expand(-1, -1, block, d)).view(batch, width * block, d)
        values = torch.gather(value_tiles, 1, index.expand(-1, -1, block, v.shape[-1]))
        real = (order[..., None] * block + offsets < n) & used[..., None]  # (B, width, block)
        rows = slice(row * block, (row + 1) * block)
        out[:, rows] = F.scaled_dot_product_attention(
            qp[:, None, rows],
            keys[:, None],
            values.view(batch, 1, width * block, v.shape[-1]),
            attn_mask=real.view(batch, 1, 1, width * block),
            scale=scale,
        )[:, 0]
    return out[:, :n]


@dataclass(frozen=True)
class BlockTiming:
    """Seconds of dense attention and of the block-sparse computation on the touched tiles: the fastest of the
    warm runs (wall time)."""

    device: str
    n: int
    block: int
    block_fraction: float
    dense_s: float
    block_sparse_s: float
    repeats: int

    @property
    def speedup(self) -> float:
        return self.dense_s / self.block_sparse_s if self.block_sparse_s > 0 else math.nan


def time_block_sparse(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    blocks: torch.Tensor,
    block: int,
    scale: float,
    *,
    repeats: int = 5,
    budget_s: float = 2.0,
) -> BlockTiming:
    """Time dense attention (SDPA) and ``block_sparse_attention`` on the same heads, the fastest warm repeat each."""
    device = q.device
    with cpu_threads(1, device):  # one thread: on a shared 2-core machine two threads' times varied 10-fold
        return _time_both(q, k, v, blocks, block, scale, repeats, budget_s)


def _time_both(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    blocks: torch.Tensor,
    block: int,
    scale: float,
    repeats: int,
    budget_s: float,
) -> BlockTiming:
    device = q.device
    dense = profiling.time_call(
        lambda: F.scaled_dot_product_attention(q[None], k[None], v[None], scale=scale),
        device,
        repeats=repeats,
        budget_s=budget_s,
    )
    sparse = profiling.time_call(
        lambda: block_sparse_attention(q, k, v, blocks, block, scale), device, repeats=repeats, budget_s=budget_s
    )
    # The fastest warm run (wall time): on a shared machine, other work only ever adds to a run's time.
    return BlockTiming(
        device=str(device.type),
        n=int(q.shape[-2]),
        block=block,
        block_fraction=float(blocks.float().mean()),
        dense_s=min(dense.times),
        block_sparse_s=min(sparse.times),
        repeats=min(dense.repeats, sparse.repeats),
    )


def occupancies(
    methods: Sequence[str],
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    block: int,
    scale: float,
    fraction: float,
    seed: int = 0,
    causal: bool = False,
) -> list[Occupancy]:
    """``occupancy`` of every method's support at the same budget and tile size."""
    check_block(block)
    out = []
    for method in methods:
        support, params = method_support(method, q, k, v, scale=scale, fraction=fraction, seed=seed, causal=causal)
        out.append(occupancy(support, block, method, params))
    return out


# ------------------------------------------------------------------ the page's study

MAP_MAX = 512  # entry maps are any-pooled to at most this many rows and columns for drawing


def pooled(entries: torch.Tensor, size: int = MAP_MAX) -> torch.Tensor:
    """An (n, n) bool map any-pooled by the smallest whole factor that brings it to at most ``size`` per side."""
    n = entries.shape[-1]
    factor = ceil_div(n, size)
    if factor <= 1:
        return entries
    blocks = ceil_div(n, factor)
    padded = entries.new_zeros(blocks * factor, blocks * factor)
    padded[:n, :n] = entries
    return padded.view(blocks, factor, blocks, factor).any(-1).any(-2)


@dataclass
class BlockStudy:
    """Every method's entry and tile fractions, its two maps (head 0), and the timings on this device."""

    n: int
    block: int
    rows: list[dict[str, Any]]  # Occupancy.row() per method, plus its timing
    entry_maps: dict[str, Any]  # method -> (m, m) bool numpy map (pooled by ``map_factor``)
    block_maps: dict[str, Any]  # method -> (nb, nb) bool numpy map
    map_factor: int
    dense_s: float  # SDPA on head 0
    all_tiles_s: float  # block_sparse_attention with every tile touched, head 0
    device: str


def block_study(
    methods: Sequence[str],
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    block: int,
    scale: float,
    fraction: float,
    seed: int = 0,
    causal: bool = False,
    repeats: int = 5,
    budget_s: float = 1.0,
    progress: Any = None,
) -> BlockStudy:
    """``occupancies`` of the methods, their maps, and the time of the block-sparse computation on each method's
    tiles (head 0) beside dense SDPA and beside the same computation on every tile."""
    check_block(block)
    n = int(q.shape[-2])
    q, k, v = (t.reshape(-1, n, t.shape[-1]) for t in (q, k, v))
    head = (q[:1].float(), k[:1].float(), v[:1].float())
    nb = ceil_div(n, block)
    full = torch.ones(1, nb, nb, dtype=torch.bool, device=q.device)
    everything = time_block_sparse(*head, full, block, scale, repeats=repeats, budget_s=budget_s)
    rows, entry_maps, block_maps = [], {}, {}
    factor = ceil_div(n, MAP_MAX)
    for index, method in enumerate(methods):
        if progress is not None:
            progress(index / max(1, len(methods)), method)
        support, params = method_support(method, q, k, v, scale=scale, fraction=fraction, seed=seed, causal=causal)
        one = occupancy(support, block, method, params)
        timing = time_block_sparse(
            *head, one.blocks[None].to(q.device), block, scale, repeats=repeats, budget_s=budget_s
        )
        rows.append({**one.row(), "block_sparse_s": timing.block_sparse_s, "dense_s": everything.dense_s,
                     "all_tiles_s": everything.block_sparse_s})  # fmt: skip
        entry_maps[method] = pooled(one.entries).numpy()
        block_maps[method] = one.blocks.numpy()
    return BlockStudy(
        n=n,
        block=block,
        rows=rows,
        entry_maps=entry_maps,
        block_maps=block_maps,
        map_factor=max(1, factor),
        dense_s=everything.dense_s,
        all_tiles_s=everything.block_sparse_s,
        device=str(q.device.type),
    )
