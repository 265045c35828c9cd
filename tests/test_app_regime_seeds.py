"""The Regime map page averages over seeds from the URL, says how many, and refuses costly seed counts up front."""

from __future__ import annotations

import functools
from collections.abc import Callable

import pytest
from streamlit.testing.v1 import AppTest


@pytest.fixture
def open_regime_map(open_page: Callable[..., AppTest]) -> Callable[..., AppTest]:
    return functools.partial(open_page, "pages/4_Regime_map.py")


def test_the_seed_count_comes_from_the_url_and_is_shown(open_regime_map) -> None:
    at = open_regime_map(n="64", nb="2", ns="2", seeds="2")
    assert not at.exception, [e.value for e in at.exception]
    assert at.slider(key="seeds").value == 2
    assert any("Averaged over 2 seed(s)" in c.value for c in at.caption)
    metric = next(m for m in at.metric if m.label == "winner within noise")
    assert metric.value.endswith(" / 4")  # cells within noise, out of the 2 x 2 grid


def test_the_default_is_three_seeds(open_regime_map) -> None:
    at = open_regime_map(n="64", nb="2", ns="2")
    assert not at.exception
    assert at.slider(key="seeds").value == 3
    assert any("Averaged over 3 seed(s)" in c.value for c in at.caption)


def test_a_seed_count_too_costly_for_this_size_is_refused_before_starting(
    monkeypatch: pytest.MonkeyPatch, open_regime_map
) -> None:
    monkeypatch.setenv("ATTN_EXPLORER_JOB_SECONDS", "20")
    fits = open_regime_map(n="256", nb="8", ns="5", seeds="1")  # about 5 s estimated
    assert not any("Refused before starting" in e.value for e in fits.error)
    refused = open_regime_map(n="256", nb="8", ns="5", seeds="10")  # ten times that
    said = "\n".join(e.value for e in refused.error)
    assert "Refused before starting" in said, said


def test_the_numbers_behind_the_maps_are_sent_only_when_asked_for(open_regime_map) -> None:
    """The table's expander is on demand (ui.on_demand): closed, no grid is sent to the browser; opened, the table
    holds one row per cell with the averaged errors."""
    at = open_regime_map(n="64", nb="2", ns="2", seeds="2")
    assert not at.exception
    assert not at.dataframe
    at.session_state["open_numbers_regime"] = True
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    table = at.dataframe[0].value
    assert len(table) == 4


def test_the_maps_say_what_the_chosen_family_shows_and_what_red_means(open_regime_map) -> None:
    """At equal budget the estimators' sparse + low rank often loses (red); the oracles show the paper's Fig. 1."""
    estimators = open_regime_map(n="64", nb="2", ns="2", seeds="1")
    assert not estimators.exception
    assert any("Red gain cells" in i.value and "oracles" in i.value for i in estimators.info)
    oracles = open_regime_map(n="64", nb="2", ns="2", seeds="1", family="oracles")
    assert not oracles.exception
    assert any("paper's Fig. 1" in i.value and "Blue gain cells" in i.value for i in oracles.info)


def test_the_routed_family_adds_moba_as_a_fourth_role(open_regime_map) -> None:
    """family=routed: LSH, MoBA (routed sparse), Performer and Scatterbrain compete; the winner map's colour bar and the
    cell counts name the routed role."""
    at = open_regime_map(n="64", nb="2", ns="2", seeds="1", family="routed")
    assert not at.exception, [e.value for e in at.exception]
    assert any("MoBA" in i.value and "routed-sparse" in i.value for i in at.info)
    labels = [m.label for m in at.metric]
    assert "cells won by routed sparse" in labels, labels


def test_the_real_heads_take_the_routed_family_too(open_page) -> None:
    at = open_page("pages/4_Regime_map.py", input="real", family="routed")
    assert not at.exception, [e.value for e in at.exception]
    won = {m.label: m.value for m in at.metric}
    assert "heads won by routed sparse" in won, won
