"""Block sparsity as a kernel sees it (issue #40, item 3): tiles touched against entries kept, the block-sparse
computation on the touched tiles, and every sparse or routed method's support."""

from __future__ import annotations

import pytest
import torch

import core
from core import block_sparsity as bs
from core.approximators.common import masked_softmax

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def test_a_scattered_eighth_touches_every_tile_and_a_band_few() -> None:
    n, block = 256, 64
    generator = torch.Generator().manual_seed(0)
    scattered = torch.rand(1, n, n, generator=generator) < 1 / 8
    pos = torch.arange(n)
    band = ((pos[:, None] - pos[None, :]).abs() <= 8)[None]
    far = bs.occupancy(scattered, block)
    near = bs.occupancy(band, block)
    assert far.entry_fraction == pytest.approx(1 / 8, rel=0.05) and far.block_fraction == 1.0
    assert near.block_fraction == pytest.approx(10 / 16)  # the diagonal tiles and their neighbours: 4 + 2 * 3
    assert bs.block_map(band, block)[0].diagonal().all()


def test_block_map_of_one_entry_per_tile_and_its_expansion_covers_the_support() -> None:
    support = torch.zeros(1, 100, 100, dtype=torch.bool)
    support[0, 5, 70] = support[0, 99, 0] = True
    tiles = bs.block_map(support, 32)
    assert tiles.shape == (1, 4, 4) and int(tiles.sum()) == 2 and bool(tiles[0, 0, 2]) and bool(tiles[0, 3, 0])
    assert bool((bs.expand_blocks(tiles, 32, 100) >= support).all())


@pytest.mark.parametrize("n", [100, 128])
def test_block_sparse_attention_is_softmax_on_the_touched_tiles(n: int) -> None:
    generator = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, n, 8, generator=generator, dtype=torch.float64) for _ in range(3))
    tiles = torch.rand(2, 4, 4, generator=generator) < 0.5
    tiles[0, 1] = False  # a query tile with no key tile: its rows are 0
    ours = bs.block_sparse_attention(q, k, v, tiles, 32, 0.7)
    reference = masked_softmax(0.7 * q @ k.transpose(-1, -2), bs.expand_blocks(tiles, 32, n)) @ v
    torch.testing.assert_close(ours, reference, rtol=1e-10, atol=1e-12)
    assert float(ours[0, 32:64].abs().max()) == 0.0


def test_every_sparse_or_routed_method_has_a_support_and_the_study_measures_it() -> None:
    methods = bs.support_methods()
    assert {"lsh", "local", "scatterbrain", "nsa", "moba", "based"} <= set(methods)
    x = core.data.clustered(128, 16, clusters=8, spread=0.2, seed=0, heads=2)
    study = bs.block_study(methods, x.q, x.k, x.v, block=32, scale=3.0, fraction=1 / 4, repeats=1, budget_s=0.2)
    for row in study.rows:
        assert 0 < row["entries_kept"] <= row["blocks_touched"] <= 1, row
        assert row["block_sparse_s"] > 0 and row["dense_s"] > 0
        assert study.block_maps[row["method"]].shape == (4, 4)
        assert study.entry_maps[row["method"]].shape == (128, 128)
    local = next(r for r in study.rows if r["method"] == "local")
    assert local["blocks_touched"] < 1  # a band at this budget leaves far tiles out


def test_bad_block_sizes_and_methods_are_refused() -> None:
    x = core.data.clustered(64, 8, clusters=4, spread=0.2, seed=0)
    with pytest.raises(core.ParameterError, match="block"):
        bs.block_map(torch.ones(1, 64, 64, dtype=torch.bool), 48)
    with pytest.raises(core.ParameterError, match="method"):
        bs.method_support("performer", x.q, x.k, x.v, scale=1.0, fraction=1 / 8)
