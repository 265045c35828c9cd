"""AppTest checks of the Rank vs heads and Kernels pages: they render with small settings from the URL, their
controls exist and are seeded by the URL, and moving a control changes what the page shows."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

import pytest
from streamlit.testing.v1 import AppTest

from core import rank_heads as rh

TIMEOUT = 600  # the first run imports torch and trains/fits on a slow, shared CPU
RANK_PAGE = "pages/6_Rank_vs_heads.py"
KERNEL_PAGE = "pages/7_Kernels.py"
SMALL_GRID = {"dim": "8", "steps": "20", "ranks": ["1", "8"], "hv": ["1", "2"], "nsweep": ["2", "4"]}
SMALL_KERNELS = {"n": "64", "draws": "250", "lk_steps": "10", "att_redraws": "1", "entry_redraws": "1"}


@pytest.fixture
def run_page(open_page: Callable[..., AppTest]) -> Callable[..., AppTest]:
    return functools.partial(open_page, timeout=TIMEOUT)


def texts(at: AppTest) -> str:
    return "\n".join(m.value for m in at.markdown)


def summary_line(at: AppTest) -> str:
    found = re.search(r"Full rank with one head: \*\*([0-9.]+)\*\*", texts(at))
    assert found, "no full-rank summary on the page"
    return found.group(1)


def test_rank_page_trains_a_small_grid_from_the_url(run_page) -> None:
    at = run_page(RANK_PAGE, **SMALL_GRID)
    assert not at.exception, [e.value for e in at.exception]
    assert at.selectbox(key="dim").value == 8
    assert at.select_slider(key="steps").value == 20
    assert at.multiselect(key="ranks").value == ["1", "8"]
    assert at.multiselect(key="hv").value == ["1", "2"]
    assert at.selectbox(key="target").value == "nearest"
    assert at.toggle(key="auto").value is True
    assert at.status and at.status[0].label.startswith("Trained")
    error = float(summary_line(at))
    assert 0 <= error < 1.5
    captions = "\n".join(c.value for c in at.caption)
    assert "Trained on **cpu" in captions  # says which device ran it
    # The table behind the charts lists every cell plus the full-rank single head.
    table = at.dataframe[0].value
    assert set(zip(table["rank"], table["heads"], strict=True)) == {(1, 1), (1, 2), (8, 1), (8, 2)}
    # The Fact 1 panel: hardmax is exact.
    assert "Hardmax (c = ∞): error **0**" in texts(at)
    assert "Shapes only, unknown constants" in texts(at)

    # Changing a control changes the output: more steps train a different layer.
    at.select_slider(key="steps").set_value(50).run()
    assert not at.exception
    assert summary_line(at) != f"{error:.4f}"

    # The N sweep (trained automatically when this cheap, else on its button): full rank against rank 1.
    if not at.button(key="train_n").disabled:
        at.button(key="train_n").click().run()
        assert not at.exception
    frames = [f.value for f in at.dataframe if f.value.index.name == "N"]
    assert frames, "no N-sweep table"
    assert list(frames[0].index) == [2, 4]
    assert set(frames[0].columns) == {"r = 8, H = 1", "r = 1, H = 8"}
    assert (frames[0]["r = 8, H = 1"] >= 0).all()


def test_rank_page_refuses_an_oversized_grid_naming_the_limit(monkeypatch: pytest.MonkeyPatch, run_page) -> None:
    monkeypatch.setattr(rh, "MAX_GRID_CELLS", 2)
    at = run_page(RANK_PAGE, **SMALL_GRID)
    assert not at.exception
    errors = "\n".join(e.value for e in at.error)
    assert "refused" in errors and "limit is 2" in errors


def test_rank_page_bad_url_value_becomes_a_notice(run_page) -> None:
    at = run_page(RANK_PAGE, **{**SMALL_GRID, "dim": "7"})
    assert not at.exception
    assert at.selectbox(key="dim").value == 16  # reset to the default
    assert any("Dimension d" in w.value for w in at.warning)


def test_kernels_page_renders_and_responds_to_controls(run_page) -> None:
    at = run_page(KERNEL_PAGE, **SMALL_KERNELS)
    assert not at.exception, [e.value for e in at.exception]
    assert at.slider(key="n").value == 64
    assert at.selectbox(key="draws").value == 250
    assert at.select_slider(key="lk_steps").value == 10
    assert at.multiselect(key="variants").value == ["ff", "oglu", "aoglu"]
    # The trainable-kernel tab says plainly what differs from the paper.
    assert any("end to end" in w.value and "fitted" in w.value for w in at.warning)
    frames = [f.value for f in at.dataframe]
    comparison = next(f for f in frames if "method" in f.columns)
    methods = list(comparison["method"])
    assert methods[0] == "ELU+1 linear" and methods[1].startswith("Performer")
    assert methods[2:] == ["learned ff", "learned oglu", "learned aoglu"]
    assert (comparison["tv"] > 0).all()
    paper = next(f for f in frames if "Model" in f.columns)
    assert "3×AOGLU" in set(paper["Model"])

    ratio = re.search(r"MSE_trig / MSE_positive = \*\*([^*]+)\*\*", texts(at))
    assert ratio
    at.slider(key="angle").set_value(30.0).run()
    assert not at.exception
    after = re.search(r"MSE_trig / MSE_positive = \*\*([^*]+)\*\*", texts(at))
    assert after and after.group(1) != ratio.group(1)
    assert float(after.group(1)) < 1 < float(ratio.group(1))  # small angle: trig wins; large angle: positive wins
