"""AppTest checks of the Paper claims page: it renders, shows the claims table with verdicts, its controls are bound
to the URL, and long measurements wait for their button. Only the cheap rank-vs-heads claims run here (the full table
is tested in test_claims.py)."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from streamlit.testing.v1 import AppTest

from core import claims
from service import result_cache
from ui import claims_table

PAGE = "pages/9_Paper_claims.py"


@pytest.fixture
def run_page(open_page: Callable[..., AppTest]) -> Callable[..., AppTest]:
    def run(*, measure: bool = False, **params: str | list[str]) -> AppTest:
        """The page opened on ``params``; with ``measure``, then its Measure button pressed."""
        at = open_page(PAGE, **params)
        if measure and not at.exception:
            at.button(key="measure").click().run()
        return at

    return run


def verdict_table(at: AppTest):  # type: ignore[no-untyped-def]
    return next(t.value for t in at.table if "verdict" in getattr(t.value, "columns", []))


def test_long_measurements_wait_for_the_button(monkeypatch, run_page) -> None:  # type: ignore[no-untyped-def]
    """At the defaults (every paper, about 12 s on 2 cores) the table opens at once with nothing measured."""

    def not_now(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("measured before the button was pressed")

    monkeypatch.setattr(claims, "measure_plain", not_now)
    at = run_page(seed="71")  # a seed no other test measures: nothing in the shared cache
    assert not at.exception, [e.value for e in at.exception]
    table = verdict_table(at)
    assert len(table) == len(claims.of_papers(list(claims.PAPERS)))
    fast = [c for c in claims.of_papers(list(claims.PAPERS)) if not c.slow]
    assert (table["verdict"] == claims.NOT_YET["verdict"]).sum() == len(fast)
    assert not at.button(key="measure").disabled
    assert any("press **Measure the claims**" in i.value for i in at.info)
    assert any("already in the server's shared cache" in c.value for c in at.caption)


def test_the_default_link_opens_on_the_committed_numbers_before_the_button(monkeypatch, run_page) -> None:  # type: ignore[no-untyped-def]
    """Seed 0 on the default text, nothing measured on this server: every fast claim's row shows the committed
    table's number and verdict, marked as committed, instead of "not measured yet"."""

    def not_now(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("measured before the button was pressed")

    monkeypatch.setattr(claims, "measure_plain", not_now)
    monkeypatch.setattr(result_cache, "get", lambda name, key: None)  # an empty shared cache
    at = run_page()
    assert not at.exception, [e.value for e in at.exception]
    table = verdict_table(at)
    committed = {r["id"]: r for r in json.loads(claims.COMMITTED_TABLE.read_text())["results"]}
    fast = {c.id for c in claims.of_papers(list(claims.PAPERS)) if not c.slow}
    assert fast <= set(committed), "the committed table covers every fast claim"
    for claim_text, cell, verdict in zip(
        table["claim"], table["measured now (clustered)"], table["verdict"], strict=True
    ):
        claim_id = claim_text.split(":")[0]
        if claim_id in fast:
            assert cell.endswith(", committed)"), (claim_id, cell)
            assert verdict == committed[claim_id]["verdict"], claim_id
    assert any("committed" in i.value for i in at.info)
    # Another seed has no committed numbers: those rows wait for the button.
    other = verdict_table(run_page(seed="72"))
    assert not any(cell.endswith(", committed)") for cell in other["measured now (clustered)"])


def test_page_renders_the_claims_table(run_page) -> None:
    at = run_page(papers="rank-vs-heads", slow="true", measure=True)
    assert not at.exception, [e.value for e in at.exception]
    assert at.title[0].value == "Paper claims"
    assert at.toggle(key="slow").value is True
    assert at.multiselect(key="papers").value == ["rank-vs-heads"]
    frames = [df.value for df in [*at.table, *at.dataframe]]
    table = next(f for f in frames if "verdict" in getattr(f, "columns", []))
    expected = [c for c in claims.CLAIMS if c.paper == claims.PAPERS["rank-vs-heads"]]
    assert len(table) == len(expected)
    assert set(table["verdict"]) <= set(claims.VERDICTS)
    for claim, verdict, view in zip(expected, table["verdict"], table["view"], strict=True):
        assert verdict == claim.expected["clustered"], claim.id
        page = claims_table.view_link(claim).split("?")[0]
        assert view.startswith(f"[open]({page}")  # a Markdown link in the static table
    assert all(v == "–" for v in table["measured now (real MiniLM heads)"])  # no real-head claims in this paper
    skipped = next(f for f in frames if "why not" in getattr(f, "columns", []))
    assert len(skipped) == len(claims.SKIPPED)
    assert {m.label for m in at.metric} == set(claims.VERDICTS)


def test_slow_claims_wait_for_the_toggle_and_links_carry_the_seed(run_page) -> None:
    at = run_page(papers="rank-vs-heads", seed="3")
    assert not at.exception, [e.value for e in at.exception]
    assert at.toggle(key="slow").value is False
    table = verdict_table(at)
    slow = {c.id for c in claims.CLAIMS if c.slow and c.paper == claims.PAPERS["rank-vs-heads"]}
    assert slow, "the test needs a slow claim in this paper"
    for claim_text, verdict in zip(table["claim"], table["verdict"], strict=True):
        is_slow = claim_text.split(":")[0] in slow
        assert (verdict == "not run") == is_slow, claim_text
    assert any("slow" in i.value for i in at.info)
    assert all("seed=3" in view for view in table["view"])


def test_claims_are_measured_once_then_served_from_the_shared_cache(monkeypatch, run_page) -> None:  # type: ignore[no-untyped-def]
    original = claims.measure_plain
    first = run_page(papers="rank-vs-heads", seed="5")
    assert not first.exception, [e.value for e in first.exception]

    def not_again(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("measured again instead of served from the shared cache")

    monkeypatch.setattr(claims, "measure_plain", not_again)
    second = run_page(papers="rank-vs-heads", seed="5")  # a new session: no memory cache of the first one's
    assert not second.exception, [e.value for e in second.exception]
    tables = [verdict_table(at) for at in (first, second)]
    assert tables[0].equals(tables[1])
    # Per claim too: adding the slow claims measures only those; the fast ones come from the cache.
    slow = {c.id for c in claims.CLAIMS if c.slow and c.paper == claims.PAPERS["rank-vs-heads"]}
    measured: list[str] = []

    def only_new(claim_id: str, which: str, seed: int = 0, text: str | None = None) -> dict:
        assert claim_id in slow, f"{claim_id} measured again"
        measured.append(claim_id)
        return original(claim_id, which, seed, text)

    monkeypatch.setattr(claims, "measure_plain", only_new)
    third = run_page(papers="rank-vs-heads", seed="5", slow="true")
    assert not third.exception, [e.value for e in third.exception]
    assert measured == [], "the slow claims (estimated above the page's limit) ran before their button"
    waiting = (set(tables[0]["verdict"]) - {"not run"}) | {claims.NOT_YET["verdict"]}
    assert set(verdict_table(third)["verdict"]) == waiting
    third.button(key="measure").click().run()
    assert not third.exception, [e.value for e in third.exception]
    assert sorted(measured) == sorted(slow)
    third.run()
    assert not third.exception, [e.value for e in third.exception]
    assert third.button(key="measure").disabled  # everything measured: nothing left to start
