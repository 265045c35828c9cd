"""The default views teach what their pages say: the winner at every Home preset and at Compare's and Error vs
entropy's defaults, computed with the engine on exactly the settings those links give (shared defaults + link).

Story (Scatterbrain, Fig. 1 and Observation 2): low temperature -> sparse wins, high temperature -> low rank wins,
the middle -> sparse + low rank wins. A change of defaults that breaks a story fails here, with the numbers.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import core
from core import compare, registry, sweeps
from ui.presets import COMPARE_METHODS, EVE_METHODS, EVE_POINTS, EVE_TAUS, PRESETS
from ui.sidebar import DEFAULTS, REAL_DEFAULTS


def settings(query: dict[str, list[str]]) -> dict[str, Any]:
    """The shared defaults with a link's values on top (as the sidebar reads them)."""
    out = dict(DEFAULTS)
    for key in ("n", "d", "heads", "clusters", "seed"):
        if key in query:
            out[key] = int(query[key][-1])
    for key in ("tau", "spread", "budget"):
        if key in query:
            out[key] = float(query[key][-1])
    return out


def errors_at(s: dict[str, Any], methods: list[str]) -> dict[str, float]:
    x = core.data.clustered(s["n"], s["d"], s["clusters"], s["spread"], s["seed"], heads=s["heads"])
    return compare.attention_errors(x.q, x.k, x.v, methods, scale=1.0 / s["tau"], fraction=s["budget"], seed=s["seed"])


SYNTHETIC_PRESETS = [p for p in PRESETS if p.winner_family is not None]


@pytest.mark.parametrize("preset", SYNTHETIC_PRESETS, ids=[p.title for p in SYNTHETIC_PRESETS])
def test_each_home_preset_is_won_by_the_family_its_title_names(preset) -> None:  # type: ignore[no-untyped-def]
    query = preset.params()
    errors = errors_at(settings(query), query.get("methods", COMPARE_METHODS))
    assert compare.winner_family(errors) == preset.winner_family, errors


def test_compare_default_view_is_won_by_sparse_plus_low_rank_at_the_default_middle_temperature() -> None:
    errors = errors_at(settings({}), COMPARE_METHODS)
    assert compare.winner(errors) == "scatterbrain", errors
    # ... clearly: at least 10% below the best single family.
    others = min(e for m, e in errors.items() if m != "scatterbrain")
    assert errors["scatterbrain"] < 0.9 * others, errors


@pytest.mark.parametrize(
    ("tau", "families"), [(0.05, ("sparse",)), (0.07, ("sparse", "sparse+low-rank")), (1.0, ("low-rank",))]
)
def test_compare_with_every_default_method_follows_the_temperature_story(tau: float, families: tuple[str, ...]) -> None:
    errors = errors_at(settings({"tau": [str(tau)]}), COMPARE_METHODS)
    assert compare.winner_family(errors) in families, errors


def test_error_vs_entropy_default_sweep_shows_the_crossing_and_the_middle_gain() -> None:
    s = settings({})
    x = core.data.clustered(s["n"], s["d"], s["clusters"], s["spread"], s["seed"], heads=s["heads"])
    taus = list(np.geomspace(EVE_TAUS[0], EVE_TAUS[1], EVE_POINTS))
    result = sweeps.error_vs_entropy(x.q, x.k, x.v, EVE_METHODS, taus=taus, fraction=s["budget"], seed=s["seed"])
    family = {m: registry.get(m).family for m in EVE_METHODS}
    sparse = next(m for m in EVE_METHODS if family[m] == "sparse")
    low_rank = next(m for m in EVE_METHODS if family[m] == "low-rank")
    winners = [compare.winner({m: float(result.attention_error[m][t]) for m in EVE_METHODS}) for t in range(len(taus))]
    assert family[winners[0]] in ("sparse", "sparse+low-rank"), winners  # lowest temperature
    assert family[winners[-1]] == "low-rank", winners  # highest temperature
    assert "scatterbrain" in winners, winners  # the middle
    assert result.crossover(sparse, low_rank) is not None


def test_real_model_defaults_are_its_own_temperature_and_a_budget_with_room() -> None:
    assert REAL_DEFAULTS["tau"] == 1.0
    n, d = 51, 32  # the default text
    params = core.budget_params("performer", n, d, REAL_DEFAULTS["budget"])
    assert params["features"] >= 10, params


# ------------------------------------------------------------------ the lessons' words hold on their own settings
def lesson_step(lesson_id: str, index: int) -> tuple[str, dict[str, list[str]]]:
    from ui import lessons

    step = lessons.lessons()[lesson_id].steps[index]
    query: dict[str, list[str]] = {}
    for key, value in step.params:
        query.setdefault(key, []).append(value)
    return step.page, query


@pytest.mark.parametrize(("index", "better", "worse"), [(1, "lsh", "performer"), (2, "performer", "lsh")])
def test_temperature_lesson_low_tau_sparse_wins_high_tau_low_rank_wins(index: int, better: str, worse: str) -> None:
    page, query = lesson_step("temperature", index)
    assert page == "Compare"
    errors = errors_at(settings(query), query["methods"])
    assert errors[better] < errors[worse], errors


def test_correction_lesson_side_by_side_step_is_won_by_scatterbrain() -> None:
    page, query = lesson_step("correction", 3)
    assert page == "Compare"
    errors = errors_at(settings(query), query["methods"])
    assert compare.winner(errors) == "scatterbrain", errors


# Steps 2 and 3 show the correction; step 1 shows where the support lives, at τ = 0.2 where Ω holds the large entries
# (its claim in assets/lessons/correction.toml, checked by tests/test_step_claims.py).
@pytest.mark.parametrize("index", [1, 2])
def test_correction_lesson_steps_on_sparse_plus_low_rank_are_where_the_correction_matters(index: int) -> None:
    from core import budget_params, sparse_lowrank

    page, query = lesson_step("correction", index)
    assert page == "Sparse_plus_low_rank"
    s = settings({**{k: [str(v)] for k, v in sparse_lowrank.PAGE_DEFAULTS.items()}, **query})
    x = core.data.clustered(s["n"], s["d"], s["clusters"], s["spread"], s["seed"], heads=s["heads"])
    params = budget_params("scatterbrain", s["n"], s["d"], s["budget"])
    got = sparse_lowrank.measure_correction(x.q[0], x.k[0], x.v[0], 1 / s["tau"], s["seed"], params)
    assert got.matters and got.naive_error >= 1.5 * got.sb_error, got
