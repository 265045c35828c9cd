"""Presenter view (``?present=1``) on a 1280 x 720 projector: every page's main chart is in the first screen, drawn,
the exit link covers nothing, and no multiselect chip or table column is cut ("nystro…" and the metrics table's
last columns on Compare before)."""

from __future__ import annotations

import urllib.parse
from typing import Any

import pytest
from playwright.sync_api import Page

from core import scaling_tables

from .helpers import PLOTLY_CHART, REPO_ROOT, save_screenshot, wait_for_app

# Scaling draws a chart for a measurement or for committed results: the first committed table.
COMMITTED = next(iter(scaling_tables.load_committed(REPO_ROOT / "benchmarks" / "results")))
# Every page, with what it needs to show a chart.
PAGES = {
    "": "",
    "Compare": "tau=0.05",
    "Sparse_plus_low_rank": "",
    "Error_vs_entropy": "",
    "Regime_map": "",
    "VCC": "",
    "Rank_vs_heads": "",
    "Kernels": "",
    "Scaling": urllib.parse.urlencode({"committed": COMMITTED}),
    "Paper_claims": "",
}
TABLE = "[data-testid='stTable']"
# What each page shows first: a chart, except Home (nothing) and the claims page (its table).
MAIN = {path: PLOTLY_CHART for path in PAGES} | {"": None, "Paper_claims": TABLE}
SCREEN = {"width": 1280, "height": 720}
UNDER_THE_TITLE_PX = 200  # a chart starting above this sits right under the page's title (at about 160 px)

# The visually first chart or table (CSS may reorder), with whether plotly.js holds data for it and has drawn it.
FIRST_CHART = """(selector) => {
  const charts = [...document.querySelectorAll(selector)]
    .map((e) => ({e, r: e.getBoundingClientRect()})).filter((c) => c.r.height > 0 && c.r.width > 0);
  if (!charts.length) return null;
  charts.sort((a, b) => a.r.top - b.r.top);
  const {e, r} = charts[0];
  const plot = e.matches('.js-plotly-plot') ? e : e.querySelector('.js-plotly-plot');
  const sized = (v) => v != null && (v.length > 0 || (typeof v === 'object' && Object.keys(v).length > 0));
  const data = !!plot && Array.isArray(plot.data) && plot.data.some((t) => sized(t.z) || sized(t.y) || sized(t.x));
  // Marks: traces, or a heatmap drawn as a layout image.
  const drawn = !!plot && plot.querySelectorAll('.main-svg .trace, .main-svg image').length > 0;
  // The bottom of each x-axis title (page coordinates), and whether the chart draws maps (heatmaps keep their height).
  const xtitles = plot ? [...plot.querySelectorAll('.infolayer [class^="g-x"][class$="title"]')]
    .map((t) => t.getBoundingClientRect()).filter((b) => b.height > 0).map((b) => b.bottom + window.scrollY) : [];
  const maps = !!plot && plot.querySelectorAll('.hm, .heatmaplayer image, .layer-below image').length > 0;
  return {top: r.top + window.scrollY, height: r.height, data, drawn, rows: e.querySelectorAll('tbody tr').length,
    xtitles, maps};
}"""

# Boxes in page coordinates of the exit link and of every chart or table; and whether the link is fixed on screen.
BOXES = """(selector) => {
  const box = (e) => { const r = e.getBoundingClientRect();
    return {left: r.left, right: r.right, top: r.top + window.scrollY, bottom: r.bottom + window.scrollY}; };
  const link = document.querySelector('a.ae-exit-present');
  return {
    link: link && box(link),
    fixed: !!link && ['fixed', 'sticky'].includes(getComputedStyle(link).position),
    items: [...document.querySelectorAll(selector + ", [data-testid='stDataFrame'], [data-testid='stTable']")].map(box)
      .filter((b) => b.right > b.left && b.bottom > b.top),
  };
}"""

# Multiselect chips cut short: a chip's text wider than its box, or a chip scrolled past the field's edge or spilt
# out of its fixed-height box onto what follows.
CUT_CHIPS = """() => {
  const cut = [];
  for (const field of document.querySelectorAll("[data-testid='stMultiSelectTagsContainer']")) {
    const chips = [...field.querySelectorAll('[data-tag]')];
    const box = field.parentElement.getBoundingClientRect();
    if (field.scrollWidth > field.clientWidth + 1) cut.push('scrolled: ' + chips.map((c) => c.innerText).join(','));
    for (const chip of chips)
      if (chip.getBoundingClientRect().right > box.right + 1 || chip.getBoundingClientRect().bottom > box.bottom + 1)
        cut.push(chip.innerText);
      else for (const e of [chip, ...chip.querySelectorAll('*')])
        if (e.scrollWidth > e.clientWidth + 1) { cut.push(chip.innerText); break; }
  }
  return cut;
}"""

# Tables wider than their box (columns scrolled out of view): static tables, and grids on the first screen.
CUT_TABLES = """(height) => [
  ...[...document.querySelectorAll("[data-testid='stTable']")].filter((t) => t.scrollWidth > t.clientWidth + 1),
  ...[...document.querySelectorAll("[data-testid='stDataFrame']")]
    .filter((t) => t.getBoundingClientRect().top < height)
    .map((t) => t.querySelector('.dvn-scroller')).filter((s) => s && s.scrollWidth > s.clientWidth + 1),
].map((t) => t.innerText.slice(0, 80))"""


def _assert_x_titles_on_the_first_screen(chart: dict[str, Any]) -> None:
    """A chart of curves right under the page's title shows its x axis and the axis's title on the first screen
    (Error vs cost's ran to about 930 px, Error vs entropy's title was cut at the screen's edge). Maps keep their
    height, and a chart under tabs or tiles starts lower (Kernels: its axis title is still below the first screen)."""
    if chart["maps"] or chart["top"] > UNDER_THE_TITLE_PX:
        return
    off = [round(bottom) for bottom in chart["xtitles"] if bottom > SCREEN["height"]]
    assert chart["xtitles"] and not off, f"x-axis titles end at {off} px, below the first screen: {chart}"


def _overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    return a["left"] < b["right"] and b["left"] < a["right"] and a["top"] < b["bottom"] and b["top"] < a["bottom"]


@pytest.mark.parametrize("path", list(PAGES))
def test_presenter_view_fits_a_1280_by_720_screen(page: Page, app_server: str, path: str) -> None:
    page.set_viewport_size(SCREEN)
    query = "&".join(part for part in (PAGES[path], "present=1") if part)
    page.goto(f"{app_server}/{path}?{query}")
    wait_for_app(page)
    main = MAIN[path]
    if main is not None:
        page.wait_for_function(f"(selector) => ({FIRST_CHART})(selector) !== null", arg=main, timeout=90_000)
        page.wait_for_timeout(1500)  # chart components that mount and draw after the run
        chart = page.evaluate(FIRST_CHART, main)
        assert chart["top"] < SCREEN["height"], f"the first chart starts at {chart['top']:.0f} px"
        # Most of it on the first screen, not only its top edge (a long table: its first rows).
        visible = (SCREEN["height"] - chart["top"]) / min(chart["height"], SCREEN["height"])
        assert visible >= 0.5, f"only {visible:.0%} of the first chart is on the first screen"
        assert chart["rows"] > 0 if main == TABLE else chart["data"] and chart["drawn"], chart
        if main != TABLE:
            _assert_x_titles_on_the_first_screen(chart)
    else:
        page.wait_for_timeout(1000)
    boxes = page.evaluate(BOXES, PLOTLY_CHART)
    assert boxes["link"] is not None, "no Exit presenter view link"
    assert not boxes["fixed"], "a fixed exit link covers whatever scrolls under it"
    covered = [item for item in boxes["items"] if _overlap(boxes["link"], item)]
    assert not covered, f"the exit link {boxes['link']} covers {covered}"
    assert page.evaluate(CUT_CHIPS) == []
    assert page.evaluate(CUT_TABLES, SCREEN["height"]) == []
    save_screenshot(page, f"presenter_{path or 'home'}", full_page=False)


# Every legend entry's text, with its box in page coordinates, in the first chart drawn with a legend.
LEGEND_ENTRIES = """() => [...document.querySelectorAll('.js-plotly-plot .legend .traces')].map((e) => {
  const r = e.getBoundingClientRect();
  return {text: e.textContent.trim(), top: r.top + window.scrollY, bottom: r.bottom + window.scrollY};
})"""


def test_error_vs_cost_names_every_curve_on_the_first_screen(page: Page, app_server: str) -> None:
    """Error vs cost's nine long legend entries wrapped onto rows below its panels, off a 1280 x 720 projector's
    first screen: the class saw coloured curves with no names. In presenter view each entry is named short and the
    legend sits above the panels, every entry on the first screen."""
    page.set_viewport_size(SCREEN)
    methods = "".join(f"&methods={m}" for m in ("performer", "lsh", "scatterbrain", "nystrom", "linformer", "local"))
    page.goto(f"{app_server}/Error_vs_cost?n=256&heads=1&runs=2{methods}&present=1")
    wait_for_app(page)
    page.wait_for_function(f"(selector) => ({FIRST_CHART})(selector) !== null", arg=PLOTLY_CHART, timeout=90_000)
    page.wait_for_function(f"() => ({LEGEND_ENTRIES})().length >= 8", timeout=30_000)
    entries = page.evaluate(LEGEND_ENTRIES)
    names = [e["text"] for e in entries]
    assert {"Performer", "LSH sparse", "Scatterbrain", "Nystrom", "Linformer", "Local window"} <= set(names), names
    assert "Pareto front" in names and "Exact softmax (error 0)" in names, names
    off = [e for e in entries if e["bottom"] > SCREEN["height"]]
    assert not off, f"legend entries below the first screen: {off}"
    chart = page.evaluate(FIRST_CHART, PLOTLY_CHART)
    assert min(e["top"] for e in entries) > chart["top"], "the legend is not inside the chart's box"
    _assert_x_titles_on_the_first_screen(chart)
    assert len(chart["xtitles"]) == 2, chart  # time and memory
    save_screenshot(page, "presenter_Error_vs_cost", full_page=False)
