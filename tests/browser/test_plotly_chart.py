"""The served app's charts (ui/plotly_chart.py): a new temperature updates every chart in place, with new numbers,
and never loads Streamlit's own plotly.js; a chart follows its container's width."""

from __future__ import annotations

from playwright.sync_api import Page

from .helpers import PLOTLY_CHART, wait_for_app

URL = "/Compare?n=128&methods=nystrom&methods=performer&tau=0.2"

# Every chart's element, tagged when first seen, with a hash of its first trace's numbers as plotly.js holds them.
READ_CHARTS = """() => [...document.querySelectorAll(".js-plotly-plot")].map((plot) => {
  if (plot.aeTag === undefined) plot.aeTag = window.__aeTags = (window.__aeTags || 0) + 1;  // a new element, a new tag
  const text = JSON.stringify(plot.data[0].z || plot.data[0].y);
  let hash = 0;
  for (let i = 0; i < text.length; i++) hash = (hash * 31 + text.charCodeAt(i)) | 0;
  return {tag: plot.aeTag, hash, width: plot.querySelector(".main-svg").getBoundingClientRect().width};
})"""


def test_a_new_temperature_updates_every_chart_in_place(page: Page, app_server: str) -> None:
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.goto(app_server + URL)
    wait_for_app(page)
    page.locator(f"{PLOTLY_CHART} .main-svg").first.wait_for(timeout=60_000)
    page.wait_for_function(f"({READ_CHARTS})().length >= 3", timeout=60_000)
    assert page.locator(PLOTLY_CHART).count() == page.locator(".js-plotly-plot").count()  # all of them components
    before = page.evaluate(READ_CHARTS)

    page.get_by_role("slider", name="Temperature τ").focus()
    page.keyboard.press("ArrowRight")
    page.wait_for_url(lambda url: "tau=0.3" in url, timeout=30_000)
    wait_for_app(page)
    page.wait_for_function(
        f"(before) => ({READ_CHARTS})().every((chart, i) => chart.hash !== before[i].hash)", arg=before, timeout=30_000
    )
    after = page.evaluate(READ_CHARTS)
    # Same elements (no remount, no redraw from scratch), every one with new numbers.
    assert [chart["tag"] for chart in after] == [chart["tag"] for chart in before]
    assert not any("/PlotlyChart." in url for url in requests), "Streamlit's own plotly.js was loaded"


def test_a_chart_follows_its_containers_width(page: Page, app_server: str) -> None:
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.goto(app_server + URL)
    wait_for_app(page)
    page.wait_for_function(f"({READ_CHARTS})().length >= 3", timeout=60_000)
    wide = page.evaluate(READ_CHARTS)[0]["width"]
    page.set_viewport_size({"width": 1000, "height": 1000})
    page.wait_for_function(f"(wide) => ({READ_CHARTS})()[0].width < wide - 100", arg=wide, timeout=10_000)
