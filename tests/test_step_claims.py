"""Every lesson step and every Home preset says what its view shows (``claims``, ui/step_claims.py), and the page,
opened by AppTest on exactly the link's URL, shows numbers that hold it: the tiles the class reads, computed by the
page's own code. A step that can show no such number says why (``no_claim``).

Declaring one: in a lesson's TOML step, ``claims = ["lsh < performer"]``; in ui/presets.py,
``Preset(..., claims=("lsh < performer",))``. See ui/step_claims.py for the grammar.
"""

from __future__ import annotations

import urllib.parse

import pytest

from core import registry
from ui import lessons, page_registry, step_claims
from ui.presets import PRESETS

LABELS = {name: spec.label for name, spec in registry.methods().items()}

VIEWS = [
    pytest.param(
        page_registry.url_paths()[step.page], lesson.step_query(i), step.claims, step.no_claim, id=f"{lid}-{i + 1}"
    )
    for lid, lesson in lessons.lessons().items()
    for i, step in enumerate(lesson.steps)
] + [
    pytest.param(
        page_registry.url_paths()[p.page],
        p.query,
        tuple(step_claims.parse_claim(c) for c in p.claims),
        p.no_claim,
        id=f"preset-{p.title}",
    )
    for p in PRESETS
]


def _params(query: str) -> dict[str, str | list[str]]:
    values = urllib.parse.parse_qs(query, keep_blank_values=True)
    return {k: v if len(v) > 1 else v[0] for k, v in values.items()}


def test_the_check_fails_when_the_numbers_disagree() -> None:
    tiles = {
        LABELS["lsh"]: "0.460",
        LABELS["performer"]: "1.025",
        "Scatterbrain error": "0.210",
        "Naive-sum error": "0.213",
    }
    assert step_claims.check(step_claims.parse_claim("lsh < performer"), tiles, LABELS)[0]
    assert not step_claims.check(step_claims.parse_claim("performer < lsh"), tiles, LABELS)[0]
    assert not step_claims.check(step_claims.parse_claim("Naive-sum error > 1.5 × Scatterbrain error"), tiles, LABELS)[
        0
    ]
    assert not step_claims.check(step_claims.parse_claim("nystrom < lsh"), tiles, LABELS)[0]  # no such tile


@pytest.mark.parametrize(("page", "query", "claims", "no_claim"), VIEWS)
def test_each_step_and_preset_shows_what_it_claims(page: str, query: str, claims, no_claim: str, opened_page) -> None:  # type: ignore[no-untyped-def]
    assert claims or no_claim, (
        'say what this view shows: claims = ["lsh < performer"] (lesson TOML) or claims=(...) (ui/presets.py), '
        "or why no number can show it (no_claim)"
    )
    if not claims:
        return
    at = opened_page(page, **_params(query))
    assert not at.exception, [e.value for e in at.exception]
    tiles = {m.label: m.value for m in at.metric}
    verdicts = [step_claims.check(claim, tiles, LABELS) for claim in claims]
    assert all(ok for ok, _ in verdicts), [text for _, text in verdicts]
