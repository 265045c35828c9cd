"""benchmarks.first_visit stamps the first chart drawn WITH DATA: an empty Plotly frame or an empty grid does not
count, while an older stamp (any chart element) fired on them. Checked on a hand-made page in Chromium."""

from __future__ import annotations

from typing import TYPE_CHECKING

from benchmarks.first_visit import FIRST_DATA

if TYPE_CHECKING:
    from playwright.sync_api import Page

EMPTY_FRAME = """
<div data-testid="aePlotlyChart"><div class="js-plotly-plot" id="plot"><svg class="main-svg"></svg></div></div>
<script>document.getElementById('plot')._fullData = [{type: 'heatmap', z: []}];</script>
"""


def stamps(page: Page) -> tuple[float | None, float | None]:
    page.wait_for_timeout(200)
    data, shell = page.evaluate("() => [window.__firstData, window.__firstShell]")
    return data, shell


def test_an_empty_frame_is_not_a_first_chart_and_a_filled_one_is(page: Page) -> None:
    page.add_init_script(FIRST_DATA)
    page.goto("about:blank")
    page.set_content(EMPTY_FRAME)
    data, shell = stamps(page)
    assert shell is not None  # the old stamp counts the empty frame
    assert data is None
    page.evaluate("() => { document.getElementById('plot')._fullData = [{type: 'heatmap', z: [[1, 2], [3, 4]]}]; }")
    data, _ = stamps(page)
    assert data is not None and data >= shell


def test_a_grid_counts_only_with_a_row_under_its_header(page: Page) -> None:
    page.add_init_script(FIRST_DATA)
    page.goto("about:blank")
    page.set_content('<div data-testid="stDataFrame" id="grid"><div role="row">header</div></div>')
    assert stamps(page)[0] is None
    page.evaluate("() => { document.getElementById('grid').insertAdjacentHTML('beforeend', '<div role=row>1</div>'); }")
    assert stamps(page)[0] is not None
