"""The in-app hashing comparison (core/hashing_study.py, the Sparse + low rank page's section 6): angular LSH against
SMYRF's XBOX+ / E2LSH at equal parameters."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch
from streamlit.testing.v1 import AppTest

import core
from core import hashing_study
from ui.figures import sparse_lowrank as figs


@pytest.fixture(scope="module")
def clustered() -> core.data.Inputs:
    return core.data.clustered(128, 16, 11, 0.1, 0, heads=2)


def test_top_keys_are_each_querys_largest_inner_products() -> None:
    q = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]]).repeat(1, 8, 1)  # 16 queries alternating two directions
    k = torch.randn(1, 16, 2, generator=torch.Generator().manual_seed(0))
    wanted = hashing_study.top_keys(q, k)
    assert wanted.shape == (1, 16, 16) and bool((wanted.sum(-1) == 2).all())  # min(8, ceil(16 / 8)) = 2
    logits = q @ k.transpose(-1, -2)
    assert torch.equal(wanted[0, 0].nonzero().flatten().sort().values, logits[0, 0].topk(2).indices.sort().values)


def test_chance_recall_of_random_balanced_chunks() -> None:
    assert hashing_study.chance_recall(128, {"buckets": 8, "rounds": 1}) == pytest.approx(16 / 128)
    assert hashing_study.chance_recall(128, {"buckets": 8, "rounds": 2}) == pytest.approx(1 - (1 - 1 / 8) ** 2)


def test_the_comparison_measures_each_hashing_with_the_engine(clustered: core.data.Inputs) -> None:
    rows = hashing_study.compare_hashings(clustered.q, clustered.k, clustered.v, beta=4.0, fraction=1 / 8, seeds=(0, 1))
    assert [row["method"] for row in rows] == ["lsh", "scatterbrain"]
    exact = core.approximate("exact", clustered.q, clustered.k, clustered.v, scale=4.0).output
    wanted = hashing_study.top_keys(clustered.q, clustered.k)
    for row in rows:
        for hashing in ("angular", "xbox_e2lsh"):
            found, errors = 0, []
            for seed in (0, 1):
                result = core.approximate(
                    row["method"], clustered.q, clustered.k, clustered.v, scale=4.0, seed=seed, **row["params"],
                    hashing=hashing,
                )  # fmt: skip
                found += int((result.parts["support"] & wanted).sum())
                errors.append(float(core.metrics.relative_output_error(result.output, exact).median()))
            assert row[hashing]["top_key_recall"] == pytest.approx(found / (2 * int(wanted.sum())))
            assert row[hashing]["output_error"] == pytest.approx(sum(errors) / 2)
        assert 0 < row["chance_recall"] < 1 and math.isfinite(row["angular"]["output_error"])
    # On tight clusters (K = Q, norms near 1) angular finds more top keys than chance and than XBOX+ (the benchmark's
    # finding on the clustered input).
    assert all(row["angular"]["top_key_recall"] > row["chance_recall"] for row in rows)
    assert all(row["angular"]["top_key_recall"] > row["xbox_e2lsh"]["top_key_recall"] for row in rows)


def test_the_figure_has_a_bar_per_method_and_hashing_and_the_chance_mark() -> None:
    rows = [
        {"method": m, "chance_recall": 0.1, "angular": {"output_error": 0.4, "top_key_recall": 0.9},
         "xbox_e2lsh": {"output_error": 0.6, "top_key_recall": 0.7}}
        for m in ("lsh", "scatterbrain")
    ]  # fmt: skip
    fig = figs.hashing_figure(rows, {"lsh": "LSH", "scatterbrain": "Scatterbrain"}, ["#111", "#222"])
    bars = [t for t in fig.data if t.type == "bar"]
    assert len(bars) == 4 and {tuple(t.x) for t in bars} == {("LSH", "Scatterbrain")}
    assert [list(t.y) for t in bars if t.xaxis == "x2"] == [[0.9, 0.9], [0.7, 0.7]]
    assert [t.name for t in fig.data if t.type == "scatter"] == ["random chunks (chance)"]


def test_the_page_section_computes_only_when_opened(open_page: Callable[..., AppTest]) -> None:
    at = open_page("pages/2_Sparse_plus_low_rank.py", n="128", heads="1")
    assert not at.exception, at.exception
    assert any("Which keys does the hash find?" in h.value for h in at.header)
    assert not any("The app's default stays angular" in c.value for c in at.caption)
    at.session_state["open_hashing"] = True
    at.run()
    assert not at.exception, at.exception
    assert any("The app's default stays angular" in c.value for c in at.caption)
