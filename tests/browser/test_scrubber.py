"""The temperature scrubber moves the picture in the browser: the heatmaps change and no script rerun happens."""

from __future__ import annotations

from playwright.sync_api import Page

from .helpers import save_screenshot, wait_for_app

URL = "/Compare?n=256&methods=lsh&methods=performer&scrub=1&tau=0.2"

# The scrubber is the Plotly chart that has animation frames.
READ_STATE = """() => {
  const plot = [...document.querySelectorAll('.js-plotly-plot')].find(
      p => p._transitionData && p._transitionData._frames && p._transitionData._frames.length);
  if (!plot) return null;
  // The first method's heatmap, as plotly.js holds it (nested arrays or a base64 typed array): a hash of it.
  const text = JSON.stringify(plot.data[1].z);
  let hash = 0;
  for (let i = 0; i < text.length; i++) hash = (hash * 31 + text.charCodeAt(i)) | 0;
  const marker = plot.data[plot.data.length - 1].x;
  return {sum: hash, title: plot.layout.title.text, marker: JSON.stringify(marker)};
}"""

WATCH_RERUNS = """() => {
  window.__reruns = 0;
  const app = document.querySelector("[data-testid='stApp']");
  new MutationObserver(() => {
    if (app.getAttribute('data-test-script-state') === 'running') window.__reruns += 1;
  }).observe(app, {attributes: true, attributeFilter: ['data-test-script-state']});
}"""


def test_scrubbing_changes_the_picture_without_a_rerun(page: Page, app_server: str) -> None:
    page.goto(app_server + URL)
    wait_for_app(page)
    page.wait_for_function(f"({READ_STATE})() !== null", timeout=60_000)
    before = page.evaluate(READ_STATE)
    assert "τ = 0.2" in before["title"], before["title"]
    page.evaluate(WATCH_RERUNS)

    # Drag the slider's grip to the far left, as a hand would.
    scrubber = page.locator(".js-plotly-plot").filter(has=page.locator(".slider-container"))
    scrubber.locator(".slider-rail-rect").first.scroll_into_view_if_needed()
    rail = scrubber.locator(".slider-rail-rect").first.bounding_box()
    grip = scrubber.locator(".slider-grip-rect").first.bounding_box()
    assert rail is not None and grip is not None
    y = rail["y"] + rail["height"] / 2
    page.mouse.move(grip["x"] + grip["width"] / 2, y)
    page.mouse.down()
    page.mouse.move(rail["x"] + 2, y, steps=10)
    page.mouse.up()
    page.wait_for_function(f"({READ_STATE})().title !== {before['title']!r}", timeout=10_000)
    after_slider = page.evaluate(READ_STATE)
    assert after_slider["sum"] != before["sum"], "the heatmap did not change"
    assert after_slider["marker"] != before["marker"], "the entropy marker did not move"

    # Play animates through the frames on its own.
    scrubber.locator(".updatemenu-button").first.click()
    page.wait_for_timeout(1500)
    after_play = page.evaluate(READ_STATE)
    assert after_play["title"] != after_slider["title"], "Play did not advance the frames"

    assert page.evaluate("window.__reruns") == 0, "scrubbing must not rerun the script on the server"
    save_screenshot(page, "scrubber", full_page=False)
