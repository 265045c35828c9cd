"""At the Sparse + low rank page's defaults Scatterbrain's correction visibly matters: the naive sum double counts
(about 2x the exact values on the support) and its error is well above Scatterbrain's. At the old defaults
(tau = 0.2, budget 1/8) it does not, and the page says so."""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from core import budget_params, data, sparse_lowrank
from ui.fields import DEFAULTS

NAIVE_FACTOR = 2.0  # the naive sum's error is at least this multiple of Scatterbrain's at the defaults


@pytest.fixture
def open_sparse_lowrank(open_page: Callable[..., AppTest]) -> Callable[..., AppTest]:
    return functools.partial(open_page, "pages/2_Sparse_plus_low_rank.py", f4_draws="1")


def summary_at(settings: dict, seed: int) -> sparse_lowrank.CorrectionSummary:
    n, d = settings["n"], settings["d"]
    x = data.clustered(n, d, settings["clusters"], settings["spread"], seed, heads=settings["heads"])
    params = budget_params("scatterbrain", n, d, settings["budget"])
    return sparse_lowrank.measure_correction(x.q[0], x.k[0], x.v[0], 1 / settings["tau"], seed, params)


def test_the_defaults_are_settings_a_user_can_choose() -> None:
    from ui.fields import BUDGET_OPTIONS, TAU_OPTIONS

    assert sparse_lowrank.PAGE_DEFAULTS["tau"] in TAU_OPTIONS
    assert sparse_lowrank.PAGE_DEFAULTS["budget"] in BUDGET_OPTIONS


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_correction_matters_at_the_defaults_for_several_seeds(seed: int) -> None:
    got = summary_at({**DEFAULTS, **sparse_lowrank.PAGE_DEFAULTS}, seed)
    assert got.naive_error >= NAIVE_FACTOR * got.sb_error, got
    assert 1.8 <= got.ratio_mean <= 2.2 and 1.8 <= got.ratio_median <= 2.2, got
    assert got.matters and not got.reasons()


def test_at_the_old_defaults_it_does_not_matter_and_says_why() -> None:
    got = summary_at({**DEFAULTS, "tau": 0.2, "budget": 1 / 8}, 0)
    assert not got.matters and got.reasons()
    assert got.ratio_median < 1.5  # 8 features: the estimate on the support is usually far below exp(q.k)


def test_identical_sums_do_not_matter() -> None:
    rng = np.random.default_rng(0)
    exact = rng.dirichlet(np.ones(8), size=8)
    support = np.eye(8, dtype=bool)
    got = sparse_lowrank.correction_summary(exact, exact, exact, support, np.zeros((8, 8)), np.zeros((8, 8)))
    assert got.sb_error == 0 and got.naive_error == 0 and got.ratio_mean == 1.0
    assert abs(got.omega_mass - float(np.trace(exact)) / 8) < 1e-12


def test_the_page_shows_it_at_its_defaults(open_sparse_lowrank) -> None:
    at = open_sparse_lowrank()
    assert not at.exception, [e.value for e in at.exception]
    got = {m.label: m.value for m in at.metric}
    sb, naive = float(got["Scatterbrain error"]), float(got["Naive-sum error"])
    ratio = float(got["Naive sum on Ω before normalising"].split("×")[0])
    assert naive >= NAIVE_FACTOR * sb, got
    assert 1.8 <= ratio <= 2.2, got
    assert any("The correction matters here" in s.value for s in at.success)
    assert not any("does not matter" in w.value for w in at.warning)


def test_the_page_says_plainly_when_the_correction_does_not_matter(open_sparse_lowrank) -> None:
    at = open_sparse_lowrank(tau="0.2", budget="0.125")
    assert not at.exception, [e.value for e in at.exception]
    said = "\n".join(w.value for w in at.warning)
    assert "At these settings the correction does not matter" in said, said
    assert not any("The correction matters here" in s.value for s in at.success)


def test_the_summary_matches_a_direct_computation() -> None:
    x = data.clustered(64, 16, 4, 0.3, 0)
    params = budget_params("scatterbrain", 64, 16, 1 / 2)
    got = sparse_lowrank.measure_correction(x.q[0], x.k[0], x.v[0], 0.5, 0, params)
    from core import approximate

    sb = approximate("scatterbrain", x.q[0], x.k[0], x.v[0], scale=0.5, seed=0, **params)
    exact = approximate("exact", x.q[0], x.k[0], x.v[0], scale=0.5).attention().double()
    want = float(torch.linalg.norm(sb.parts["naive_sum"].double() - exact) / torch.linalg.norm(exact))
    assert abs(got.naive_error - want) < 1e-6


def test_the_spectrum_labels_at_most_a_few_decades() -> None:
    from ui.figures import sparse_lowrank as figs

    sv = np.logspace(0, -12, 50)
    fig = figs.spectrum_figure(sv, None, 10, ["#000", "#111"])
    assert fig.layout.yaxis.type == "log" and fig.layout.yaxis.dtick >= 2
    few = figs.spectrum_figure(np.logspace(0, -3, 50), np.logspace(0, -2, 50), 10, ["#000", "#111"])
    assert few.layout.yaxis.dtick == 1 and len(few.data) == 2


def test_the_hash_chart_says_hash_code_and_the_buckets_are_the_chunks(open_sparse_lowrank) -> None:
    """The chart was titled "Buckets in round 1" with hash codes up to 63 on its axis, beside a "2 × 5" rounds ×
    buckets tile: the method's buckets are the equal chunks cut from the positions sorted by hash code."""
    import json

    at = open_sparse_lowrank(n="128", heads="1", budget="1/2")
    assert not at.exception, [e.value for e in at.exception]
    specs = [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]
    chart = next(s for s in specs if "Hash codes in round 1" in str(s["layout"].get("title", {}).get("text")))
    assert chart["layout"]["yaxis"]["title"]["text"] == "hash code (sort key)"
    assert not [s for s in specs if "Buckets in round" in str(s["layout"].get("title", {}).get("text"))]
    tile = next(m for m in at.metric if m.label == "Hash rounds × buckets")
    assert "equal chunks, the method's buckets" in tile.proto.help
    rounds, buckets = (int(x) for x in tile.value.split(" × "))
    assert rounds >= 1 and buckets >= 1
    captions = " ".join(c.value for c in at.caption)
    assert f"cutting them into {buckets} equal chunks (the buckets knob)" in captions
