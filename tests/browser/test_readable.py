"""Every page reads in full on a laptop (1400 × 1000), a projector (1280 × 720) and in presenter view: no text cut by
its box (labels, values, buttons, tabs, expander headers, table columns, chart titles and tick labels), and every log
axis labelled at two ticks at least.

One shared server; the pages are visited in turn with small URL settings (n = 64), and buttons that start cheap
work (training, measuring) are pressed so the charts behind them are checked too. Each page opens once on the
projector, is checked, and is then widened to the laptop and checked again: the layout is CSS, and each chart is
laid out again at its new width, as a first load at that size draws it; presenter view is a visit of its own.
"""

from __future__ import annotations

import urllib.parse
from typing import Any

import pytest
from playwright.sync_api import Page
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from core import scaling_tables

from .helpers import REPO_ROOT, wait_for_app

# A committed benchmark table for the Scaling page to chart without measuring.
COMMITTED = next(iter(scaling_tables.load_committed(REPO_ROOT / "benchmarks" / "results")))
# Small settings for each page (URL path -> query).
PAGES = {
    "": "",
    "Compare": "n=64&heads=2&methods=performer&methods=lsh&methods=scatterbrain&methods=nystrom",
    "Sparse_plus_low_rank": "n=64&heads=1&f4_draws=1",
    "Error_vs_entropy": "n=64&heads=1&points=4",
    "Regime_map": "n=64&nb=2&ns=2&seeds=1",
    "VCC": "n=64",
    "Rank_vs_heads": "steps=20&ranks=1&hv=1&nsweep=2",
    "Kernels": "n=64&draws=250&lk_steps=10",
    "Scaling": "heads=2&committed=" + urllib.parse.quote(COMMITTED),
    "Paper_claims": "papers=rank-vs-heads",
    "Error_vs_cost": "n=256&heads=1&runs=2",
}
PROJECTOR, LAPTOP = {"width": 1280, "height": 720}, {"width": 1400, "height": 1000}
# A visit: the sizes it checks in turn, and whether it is presenter view.
VISITS = {"projector-then-laptop": ((PROJECTOR, LAPTOP), False), "presenter": ((PROJECTOR,), True)}
# Buttons that start work the page waits for; pressed when shown (the work is small at the settings above).
START_BUTTONS = ("Train the grid", "Measure the claims")

# Elements whose own text is wider than their box while their overflow is hidden: Streamlit's ellipsis on labels,
# metric values, buttons, tabs, popovers, expander headers and table cells.
CUT_TEXT = """() => {
  const found = [];
  const visible = (e) => (e.offsetParent !== null || getComputedStyle(e).position === 'fixed') &&
    (e.closest('summary') || !e.closest('details:not([open])'));  // a closed expander shows its header only
  for (const e of document.querySelectorAll("[data-testid='stMain'] *, [data-testid='stSidebar'] *")) {
    if (e.closest('pre, code, .js-plotly-plot, [data-testid="stDataFrame"], .katex, [data-testid="stCode"]')) continue;
    const own = [...e.childNodes].some(n => n.nodeType === Node.TEXT_NODE && n.textContent.trim());
    if (!own || !visible(e)) continue;
    const style = getComputedStyle(e);
    const hidden = style.overflow !== 'visible' || style.overflowX !== 'visible' || style.textOverflow === 'ellipsis';
    if (hidden && e.scrollWidth > e.clientWidth + 1) found.push('cut: ' + e.innerText.trim().slice(0, 60));
  }
  return found;
}"""

# A box whose text (its own or its children's) is wider than the box while its overflow is hidden: metric labels and
# values, widget labels, buttons, expander headers and tabs, checked as whole boxes (the text may sit in a child that
# overflows visibly into its clipping parent, which CUT_TEXT's own-text rule does not see). The regime map's "19 of 40
# cells" and Compare's "LSH sparse (Reformer/SMYRF)" ended in "…" at 1280 × 720 before.
CUT_BOX = """() => {
  const found = [];
  const roots = document.querySelectorAll("[data-testid='stMetricValue'], [data-testid='stMetricLabel'], " +
    "[data-testid='stWidgetLabel'], [data-testid='stMain'] label, [data-testid='stMain'] button, " +
    "[data-testid='stExpander'] summary, [role='tab']");
  for (const root of roots) {
    for (const e of [root, ...root.querySelectorAll('*')]) {
      const text = (e.innerText || '').trim();
      if (text && e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).overflow !== 'visible') {
        found.push('cut box: ' + text.slice(0, 60));
        break;
      }
    }
  }
  return [...new Set(found)];
}"""

# Chart text (titles, axis titles, tick labels, annotations, legend, colour bars) outside the chart's own box is cut
# off by the page; a log axis with fewer than two labelled ticks reads as no scale at all.
CHART_TEXT = """() => {
  const found = [];
  for (const plot of document.querySelectorAll('.js-plotly-plot')) {
    if (plot.offsetParent === null || plot.closest('details:not([open])') || !plot._fullLayout) continue;
    const box = plot.getBoundingClientRect();
    const name = (plot._fullLayout.title && plot._fullLayout.title.text) ||
      [...plot.querySelectorAll('.annotation-text')].map(t => t.textContent).join(' / ').slice(0, 50) || 'a chart';
    for (const t of plot.querySelectorAll('svg.main-svg text')) {
      const text = t.textContent.trim();
      if (!text || t.closest('.hoverlayer, .legend')) continue;
      const r = t.getBoundingClientRect();
      if (r.width === 0 && r.height === 0) continue;
      if (r.left < box.left - 1 || r.right > box.right + 1 || r.top < box.top - 1 || r.bottom > box.bottom + 1) {
        const at = (b) => [b.left, b.top, b.right, b.bottom].map(Math.round).join(',');
        const drawn = `${Math.round(plot._fullLayout.width)}x${Math.round(plot._fullLayout.height)}`;
        found.push(`${name}: "${text.slice(0, 40)}" is cut by the chart's edge (text at ${at(r)}, box at ${at(box)}, ` +
          `drawn ${drawn} in a ${plot.clientWidth}x${plot.clientHeight} box)`);
      }
    }
    for (const [key, axis] of Object.entries(plot._fullLayout)) {
      if (!/^[xy]axis\\d*$/.test(key) || !axis || axis.type !== 'log' || axis.visible === false) continue;
      if (!axis.showticklabels) continue;
      const letter = key[0];
      const labels = [...plot.querySelectorAll(`.${letter}axislayer-above .${axis._id}tick text`)]
        .filter(t => t.textContent.trim());
      if (labels.length < 2) {
        found.push(`${name}: log axis ${axis._id} (${(axis.title && axis.title.text) || ''}) has ` +
          `${labels.length} labelled tick(s)`);
      }
    }
  }
  return found;
}"""

# Streamlit's data grid draws on a canvas: a column is cut when its widest text (header or a drawn cell, measured in
# the grid's font, plus padding) does not fit, summed over the columns, in the grid's width.
GRID_TEXT = """() => {
  const found = [];
  const canvas = document.createElement('canvas').getContext('2d');
  for (const grid of document.querySelectorAll("[data-testid='stDataFrame']")) {
    if (grid.offsetParent === null || grid.closest('details:not([open])')) continue;
    const family = getComputedStyle(grid).fontFamily;
    const widths = {};
    for (const cell of grid.querySelectorAll('table[role=grid] th, table[role=grid] td')) {
      const column = cell.getAttribute('aria-colindex');
      canvas.font = (cell.tagName === 'TH' ? '600 ' : '') + '14px ' + family;
      // The accessible copy holds raw numbers; the grid draws floats with 4 decimals at most.
      const raw = cell.textContent.trim();
      const text = /^-?\\d+\\.\\d+(e[-+]?\\d+)?$/i.test(raw) ? String(parseFloat(Number(raw).toFixed(4))) : raw;
      widths[column] = Math.max(widths[column] || 0, canvas.measureText(text).width + 17);
    }
    const need = Object.values(widths).reduce((a, b) => a + b, 0);
    const have = grid.getBoundingClientRect().width;
    if (need > have + 1) {
      const headers = [...grid.querySelectorAll('table[role=grid] th')].map(t => t.textContent).join(', ');
      found.push(`table (${headers.slice(0, 60)}) needs ${Math.round(need)} px, has ${Math.round(have)}`);
    }
  }
  // A static table scrolls sideways instead: the columns past its edge are out of view.
  for (const table of document.querySelectorAll("[data-testid='stTable']")) {
    if (table.offsetParent === null || table.closest('details:not([open])')) continue;
    for (const e of [table, ...table.querySelectorAll('div')]) {
      if (e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).overflowX !== 'visible') {
        const headers = [...table.querySelectorAll('th')].map(t => t.textContent).join(', ');
        found.push(`static table (${headers.slice(0, 60)}) scrolls sideways`);
        break;
      }
    }
  }
  return found;
}"""


# Each shown chart laid out at its box's width (autosize), as a first load at this size draws it: by the component's
# own observers (ui/plotly_chart.py), with no help from the test. Chromium reports no size to a chart's own
# ResizeObserver for one Kernels chart ("Red: positive features more accurate"); the observer of the main column
# catches it.
SHOWN_CHARTS = "[...document.querySelectorAll('.js-plotly-plot')].filter(p => p.offsetParent !== null && p._fullLayout)"
CHARTS_FIT = f"() => {SHOWN_CHARTS}.every(p => Math.abs(p._fullLayout.width - p.clientWidth) <= 1)"


UNFIT_CHARTS = f"""() => {SHOWN_CHARTS}.filter(p => Math.abs(p._fullLayout.width - p.clientWidth) > 1)
  .map(p => `${{(p._fullLayout.title && p._fullLayout.title.text) || 'a chart'}}: ` +
    `drawn ${{p._fullLayout.width}} px wide in a ${{p.clientWidth}} px box`)"""


def _wait_until_charts_fit(page: Page) -> None:
    try:
        page.wait_for_function(CHARTS_FIT, timeout=30_000)
    except PlaywrightTimeout:
        unfit = page.evaluate(UNFIT_CHARTS)
        raise AssertionError(
            f"charts not laid out at their box's width in a {page.viewport_size} window: {unfit}"
        ) from None


def _open(page: Page, url: str) -> None:
    page.goto(url)
    wait_for_app(page)
    for label in START_BUTTONS:
        button = page.get_by_role("button", name=label)
        if button.count() and button.first.is_enabled():
            button.first.click()
            wait_for_app(page)
    # Charts mount after the run: wait until each has drawn its axes.
    page.wait_for_function(
        "() => [...document.querySelectorAll(\"[data-testid='aePlotlyChart'], [data-testid='stPlotlyChart']\")]"
        ".every(c => c.querySelector('.main-svg'))",
        timeout=60_000,
    )
    # Data grids fill their accessible copy (the text GRID_TEXT measures) after they draw.
    page.wait_for_function(
        "() => [...document.querySelectorAll(\"[data-testid='stDataFrame']\")]"
        ".every(g => g.offsetParent === null || g.closest('details:not([open])') || g.querySelector('table th'))",
        timeout=30_000,
    )
    page.wait_for_timeout(700)
    # As after a resize: a chart drawn before its column took its width is laid out again by its own observers.
    _wait_until_charts_fit(page)


def _resize(page: Page, size: dict[str, int]) -> None:
    page.set_viewport_size(size)
    page.wait_for_timeout(300)
    _wait_until_charts_fit(page)
    page.wait_for_timeout(400)


def _problems(page: Page) -> list[Any]:
    scripts = (CUT_TEXT, CUT_BOX, CHART_TEXT, GRID_TEXT)
    found = [problem for script in scripts for problem in page.evaluate(script)]
    tabs = page.locator("[data-testid='stMain'] [role='tab']:visible")
    for index in range(1, tabs.count()):  # the first tab is the one already shown
        tab = tabs.nth(index)
        name = tab.inner_text().strip()
        tab.click()
        page.wait_for_timeout(600)
        _wait_until_charts_fit(page)
        found += [f"tab {name}: {problem}" for script in scripts for problem in page.evaluate(script)]
    if tabs.count() > 1:  # back to the first tab, as the page opened
        tabs.first.click()
        page.wait_for_timeout(300)
    return found


@pytest.mark.parametrize("visit", list(VISITS))
@pytest.mark.parametrize("path", list(PAGES))
def test_every_text_reads_in_full_and_every_log_axis_is_labelled(
    page: Page, app_server: str, path: str, visit: str
) -> None:
    sizes, present = VISITS[visit]
    page.set_viewport_size(sizes[0])
    query = PAGES[path] + ("&present=1" if present else "")
    _open(page, f"{app_server}/{path}?{query.lstrip('&')}")
    problems: list[Any] = []
    for index, size in enumerate(sizes):
        if index:
            _resize(page, size)
        problems += [f"{size['width']}x{size['height']}: {problem}" for problem in _problems(page)]
    assert not problems, "\n".join(problems)
