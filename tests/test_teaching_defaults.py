"""The default views teach what their pages say: the winner at every Home preset, at Compare's defaults and at the
lessons' Compare steps, read from the tiles the page itself shows (AppTest on exactly the link's URL, so the numbers
are the app's own computation, not a copy of it), and Error vs entropy's default sweep through the page's own view.

Story (Scatterbrain, Fig. 1 and Observation 2): low temperature -> sparse wins, high temperature -> low rank wins,
the middle -> sparse + low rank wins. A change of defaults that breaks a story fails here, with the numbers.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import core
from core import compare, registry
from ui import page_registry, step_claims
from ui.fields import DEFAULTS, REAL_DEFAULTS
from ui.presets import COMPARE_METHODS, EVE_METHODS, EVE_POINTS, EVE_TAUS, PRESETS

METHOD_OF_LABEL = {spec.label: name for name, spec in registry.methods().items()}
COMPARE = page_registry.url_paths()["Compare"]


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


def link_params(query: str) -> dict[str, str | list[str]]:
    """A link's query as AppTest's URL parameters (the same form tests/test_step_claims.py opens them with, so one
    AppTest serves both)."""
    values = urllib.parse.parse_qs(query, keep_blank_values=True)
    return {k: v if len(v) > 1 else v[0] for k, v in values.items()}


def page_errors(opened_page: Callable[..., Any], query: str) -> dict[str, float]:
    """Each method's attention error as Compare's tiles show it, opened on ``query``."""
    at = opened_page(COMPARE, **link_params(query))
    assert not at.exception, [e.value for e in at.exception]
    errors = {}
    for tile in at.metric:
        number = step_claims.tile_number(tile.value)
        if tile.label in METHOD_OF_LABEL and number is not None:
            errors[METHOD_OF_LABEL[tile.label]] = number
    assert errors, [(t.label, t.value) for t in at.metric]
    return errors


SYNTHETIC_PRESETS = [p for p in PRESETS if p.winner_family is not None]


def test_the_tiles_read_every_method_the_link_shows(opened_page: Callable[..., Any]) -> None:
    errors = page_errors(opened_page, "")
    assert sorted(errors) == sorted(COMPARE_METHODS), errors


@pytest.mark.parametrize("preset", SYNTHETIC_PRESETS, ids=[p.title for p in SYNTHETIC_PRESETS])
def test_each_home_preset_is_won_by_the_family_its_title_names(preset, opened_page) -> None:  # type: ignore[no-untyped-def]
    assert preset.page == "Compare"
    errors = page_errors(opened_page, preset.query)
    assert compare.winner_family(errors) == preset.winner_family, errors


def test_compare_default_view_is_won_by_sparse_plus_low_rank_at_the_default_middle_temperature(
    opened_page: Callable[..., Any],
) -> None:
    errors = page_errors(opened_page, "")
    assert compare.winner(errors) == "scatterbrain", errors
    # ... clearly: at least 10% below the best single family.
    others = min(e for m, e in errors.items() if m != "scatterbrain")
    assert errors["scatterbrain"] < 0.9 * others, errors


@pytest.mark.parametrize(
    ("tau", "families"), [(0.05, ("sparse",)), (0.07, ("sparse", "sparse+low-rank")), (1.0, ("low-rank",))]
)
def test_compare_with_every_default_method_follows_the_temperature_story(
    tau: float, families: tuple[str, ...], opened_page: Callable[..., Any]
) -> None:
    errors = page_errors(opened_page, f"tau={tau:g}")
    assert compare.winner_family(errors) in families, errors


def test_error_vs_entropy_default_sweep_shows_the_crossing_and_the_middle_gain() -> None:
    """The page's own sweep view (ui.sweep_runs.sweep_view) at its defaults, computed as the page's job computes it."""
    import torch

    from service.views import InputSpec
    from ui import sweep_runs
    from ui.settings import Settings
    from ui.sidebar import linked_params

    s = DEFAULTS
    spec = InputSpec("clustered", s["n"], s["d"], s["heads"], s["clusters"], s["spread"], s["seed"])
    page = Settings(
        spec=spec, tau=s["tau"], device="cpu", device_used=torch.device("cpu"), fraction=s["budget"], head=0
    )
    taus = sweep_runs.taus_between(EVE_TAUS[0], EVE_TAUS[1], EVE_POINTS)
    params = {m: linked_params(m, page.n, page.d, page.fraction) for m in EVE_METHODS}
    result = sweep_runs.sweep_view(page, taus, EVE_METHODS, params).compute()
    errors = result["attention"]
    family = {m: registry.get(m).family for m in EVE_METHODS}
    winners = [compare.winner({m: float(errors[m][t]) for m in EVE_METHODS}) for t in range(len(taus))]
    assert family[winners[0]] in ("sparse", "sparse+low-rank"), winners  # lowest temperature
    assert family[winners[-1]] == "low-rank", winners  # highest temperature
    assert "scatterbrain" in winners, winners  # the middle
    sparse = next(m for m in EVE_METHODS if family[m] == "sparse")
    low_rank = next(m for m in EVE_METHODS if family[m] == "low-rank")
    gap = np.asarray(errors[sparse]) - np.asarray(errors[low_rank])
    assert gap[0] < 0 < gap[-1], gap  # the two single families cross inside the sweep


def test_real_model_defaults_are_its_own_temperature_and_a_budget_with_room() -> None:
    assert REAL_DEFAULTS["tau"] == 1.0
    n, d = 51, 32  # the default text
    params = core.budget_params("performer", n, d, REAL_DEFAULTS["budget"])
    assert params["features"] >= 10, params


# ------------------------------------------------------------------ the lessons' words hold on their own settings
def lesson_step(lesson_id: str, index: int) -> tuple[str, str]:
    """A lesson step's page and the query of its link (as the lesson's Next button opens it)."""
    from ui import lessons

    lesson = lessons.lessons()[lesson_id]
    return lesson.steps[index].page, lesson.step_query(index)


@pytest.mark.parametrize(("index", "better", "worse"), [(1, "lsh", "performer"), (2, "performer", "lsh")])
def test_temperature_lesson_low_tau_sparse_wins_high_tau_low_rank_wins(
    index: int, better: str, worse: str, opened_page: Callable[..., Any]
) -> None:
    page, query = lesson_step("temperature", index)
    assert page == "Compare"
    errors = page_errors(opened_page, query)
    assert errors[better] < errors[worse], errors


def test_correction_lesson_side_by_side_step_is_won_by_scatterbrain(opened_page: Callable[..., Any]) -> None:
    page, query = lesson_step("correction", 3)
    assert page == "Compare"
    errors = page_errors(opened_page, query)
    assert compare.winner(errors) == "scatterbrain", errors


# Steps 2 and 3 show the correction; step 1 shows where the support lives, at τ = 0.2 where Ω holds the large entries
# (its claim in assets/lessons/correction.toml, checked by tests/test_step_claims.py).
@pytest.mark.parametrize("index", [1, 2])
def test_correction_lesson_steps_on_sparse_plus_low_rank_are_where_the_correction_matters(index: int) -> None:
    from core import budget_params, sparse_lowrank

    page, link = lesson_step("correction", index)
    assert page == "Sparse_plus_low_rank"
    query = urllib.parse.parse_qs(link)
    s = settings({**{k: [str(v)] for k, v in sparse_lowrank.PAGE_DEFAULTS.items()}, **query})
    x = core.data.clustered(s["n"], s["d"], s["clusters"], s["spread"], s["seed"], heads=s["heads"])
    params = budget_params("scatterbrain", s["n"], s["d"], s["budget"])
    got = sparse_lowrank.measure_correction(x.q[0], x.k[0], x.v[0], 1 / s["tau"], s["seed"], params)
    assert got.matters and got.naive_error >= 1.5 * got.sb_error, got
