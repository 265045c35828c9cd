"""AppTest checks that Rank vs heads and Kernels draw a cheap chart first and start long work only on a button."""

from __future__ import annotations

import functools
from collections.abc import Callable

import pytest
from streamlit.testing.v1 import AppTest

TIMEOUT = 600


@pytest.fixture
def run_page(open_page: Callable[..., AppTest]) -> Callable[..., AppTest]:
    return functools.partial(open_page, timeout=TIMEOUT)


def chart_titles(at: AppTest) -> list[str]:
    import json

    titles = []
    for element in at.get("plotly_chart"):
        spec = json.loads(element.proto.spec)
        titles.append(spec.get("layout", {}).get("title", {}).get("text", ""))
    return titles


def test_rank_page_waits_for_the_button_and_shows_the_reference_levels_first(run_page) -> None:
    # The default grid (d = 16, 500 steps, 3 ranks x 3 head counts) is far above the automatic limit.
    at = run_page("pages/6_Rank_vs_heads.py", cpoints="4")
    assert not at.exception, [e.value for e in at.exception]
    assert not at.status  # nothing trained
    assert not at.button(key="train_grid").disabled
    assert any("press **Train the grid**" in i.value for i in at.info)
    assert any(t.startswith("Before training") for t in chart_titles(at))


def test_rank_grid_trains_on_its_button_with_an_open_progress_box(run_page) -> None:
    at = run_page("pages/6_Rank_vs_heads.py", dim="4", steps="20", ranks=["1"], hv=["1"], auto="false")
    assert not at.exception
    assert not at.status and not at.button(key="train_grid").disabled
    at.button(key="train_grid").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.status and at.status[0].label == "Trained 2 setting(s)"
    assert "Error against the number of heads, per rank" in chart_titles(at)
    at.run()  # a later run reads the shared cache, no click needed
    assert "Error against the number of heads, per rank" in chart_titles(at)
    assert at.button(key="train_grid").disabled  # nothing left to train


def test_kernels_page_draws_the_closed_forms_first_and_measures_on_a_button(run_page) -> None:
    # n = 512: fitting 3 variants for 400 steps is estimated at 7 s there (1.8 s at n = 64, which runs at once).
    at = run_page("pages/7_Kernels.py", n="512", draws="5000", att_redraws="10", lk_steps="400")
    assert not at.exception, [e.value for e in at.exception]
    titles = chart_titles(at)
    assert any(t.startswith("Kernel MSE against m") for t in titles)  # Lemma 2 and the ORF bound, no draws
    labels = [b.label for b in at.button]
    assert "Measure with 5000 draws" in labels and "Fit the kernels" in labels
    assert not [f for f in at.dataframe if "method" in f.value.columns]  # no fit before the click
