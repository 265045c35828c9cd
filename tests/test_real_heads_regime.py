"""Real heads on the regime: the beta fit, winners per head, Spearman, the figure and the Regime map on ?input=real."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest
import torch
from streamlit.testing.v1 import AppTest

from core import data, metrics, real_heads
from core.errors import ParameterError
from core.sweeps import ESTIMATORS
from ui.figures import regime as figs

FIT_TOLERANCE = 0.01  # relative: the grid has 16 points per decade; measured within 0.4% at these betas


@pytest.mark.parametrize("beta", [0.3, 2.0, 9.0, 40.0])
def test_the_fit_recovers_the_beta_a_clustered_input_was_built_at(beta: float) -> None:
    n, d, clusters, spread, seed = 64, 16, 8, 0.3, 3
    betas, curve = real_heads.entropy_curve(n, d, clusters, spread, seed)
    x = data.clustered(n, d, clusters, spread, seed, dtype=torch.float64)
    entropy = metrics.mean_row_entropy(torch.softmax(beta * x.q @ x.k.transpose(-1, -2), dim=-1)).mean().item()
    fitted = real_heads.fit_beta([entropy], betas, curve)[0]
    assert abs(fitted / beta - 1) < FIT_TOLERANCE


def test_no_fit_outside_the_curves_entropy_range() -> None:
    betas, curve = real_heads.entropy_curve(32, 8, 4, 0.3, 0)
    fitted = real_heads.fit_beta([curve[0] + 0.5, curve[-1] / 2, float("nan")], betas, curve)
    assert np.isnan(fitted).all()
    assert np.all(np.diff(curve) <= 0)


def hand_table() -> pd.DataFrame:
    # Head (0, 0): LSH best; (0, 1): Performer best; (1, 0): Scatterbrain best; (1, 1): a tie (first role wins).
    errors = {
        (0, 0): {"lsh": 0.1, "performer": 0.5, "scatterbrain": 0.3},
        (0, 1): {"lsh": 0.9, "performer": 0.2, "scatterbrain": 0.4},
        (1, 0): {"lsh": 0.6, "performer": 0.7, "scatterbrain": 0.05},
        (1, 1): {"lsh": 0.3, "performer": 0.3, "scatterbrain": 0.3},
    }
    rows = [
        {
            "method": m,
            "layer": layer,
            "head": head,
            "entropy": 1.0 + layer + head / 2,
            "attention_error": e,
            "output_error": 1 - e,
        }
        for (layer, head), per in errors.items()
        for m, e in per.items()
    ]
    return pd.DataFrame(rows)


def test_winners_per_head_from_a_hand_made_table() -> None:
    heads = real_heads.head_winners(hand_table(), ESTIMATORS)
    assert list(heads["winner"]) == ["sparse", "low_rank", "sparse_low_rank", "sparse"]
    assert real_heads.win_counts(heads, list(ESTIMATORS)) == {"sparse": 2, "low_rank": 1, "sparse_low_rank": 1}
    out = real_heads.head_winners(hand_table(), ESTIMATORS, "output")  # 1 - e: the largest e wins
    assert list(out["winner"]) == ["low_rank", "sparse", "low_rank", "sparse"]
    with pytest.raises(ParameterError, match="roles"):
        real_heads.head_winners(hand_table(), {**ESTIMATORS, "sparse": "topk"})


def test_spearman_on_a_toy() -> None:
    x = [1.0, 2.0, 3.0, 4.0, 5.0]
    assert real_heads.spearman(x, [1, 4, 9, 16, 25]) == pytest.approx(1.0)
    assert real_heads.spearman(x, [5, 4, 3, 2, 1]) == pytest.approx(-1.0)
    assert real_heads.spearman(x, [2, 1, 4, 3, 5]) == pytest.approx(0.8)  # 1 - 6 * 4 / (5 * 24)
    assert math.isnan(real_heads.spearman(x, [1, 1, 1, 1, 1]))
    corr = real_heads.entropy_correlations(hand_table(), "attention")
    assert set(corr) == {"lsh", "performer", "scatterbrain"}


def test_the_heads_figure_colours_each_head_by_its_winner() -> None:
    heads = real_heads.head_winners(hand_table(), ESTIMATORS)
    heads["fitted_beta"] = [0.5, 3.0, 20.0, np.nan]
    fig = figs.heads_on_regime_figure(heads, ESTIMATORS, [(1.2, "β ≈ ln n / ln d")], (0.5, 50.0), "1/8")
    points = [t for t in fig.data if t.mode == "markers"]
    assert {t.name for t in points} == {"sparse wins (2)", "low rank wins (1)", "sparse + low rank wins (1)"}
    sparse = next(t for t in points if t.name.startswith("sparse wins"))
    assert sparse.marker.color == figs.ROLE_COLOURS["sparse"]
    assert list(sparse.marker.symbol) == ["circle", "x"]  # the unfitted head is a cross at the edge
    assert "no fitted β" in sparse.hovertext[1]
    assert sparse.x[0] == pytest.approx(math.log10(0.5))
    rings = figs.add_winner_rings(fig, heads, {r: "error_" + r for r in ESTIMATORS})
    assert sum(1 for t in rings.data if t.marker.symbol == "circle-open") == 3


def test_the_regime_map_places_every_real_head(open_page: Callable[..., AppTest]) -> None:
    at = open_page("pages/4_Regime_map.py", timeout=300, input="real", budget="0.125")
    assert not at.exception, [e.value for e in at.exception]
    won = {m.label: m.value for m in at.metric if m.label.startswith("heads won by")}
    assert len(won) == 3
    assert sum(int(v.split(" / ")[0]) for v in won.values()) == 72
    links = next(df.value for df in at.dataframe if "open" in df.value.columns)
    assert len(links) == 72
    first = links.iloc[0]["open"]
    assert first.startswith("./Compare?input=real&layer=0&head=0&tau=1&budget=0.125&methods=lsh")


def test_error_vs_entropy_rings_each_real_head_with_its_winner(open_page: Callable[..., AppTest]) -> None:
    at = open_page("pages/3_Error_vs_entropy.py", timeout=300, input="real", budget="0.125")
    assert not at.exception, [e.value for e in at.exception]
    assert any(c.value.startswith("Rings: the family whose method") for c in at.caption)
