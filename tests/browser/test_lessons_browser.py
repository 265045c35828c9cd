"""A guided lesson walked end to end in Chromium with its Next / Previous links, and the presenter view."""

from __future__ import annotations

import urllib.parse

from playwright.sync_api import Page, expect

from ui import lessons

from .helpers import save_screenshot, share_link, wait_for_app


def _step_in_url(url: str) -> str | None:
    return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query)).get("step")


def test_walk_the_temperature_lesson_end_to_end(page: Page, app_server: str) -> None:
    lesson = lessons.lessons()["temperature"]
    page.goto(app_server + "/" + lesson.step_url(0).removeprefix("./"))
    wait_for_app(page)
    main = page.locator("[data-testid='stMain']")
    for index, step in enumerate(lesson.steps):
        expect(main.get_by_text(step.title, exact=True)).to_be_visible()
        expect(main.get_by_text(f"step {index + 1} of {len(lesson.steps)}", exact=False)).to_be_visible()
        assert _step_in_url(page.url) == str(index + 1), page.url
        assert page.url.split("?")[0].endswith("/" + step.page), page.url
        # The step's own settings are live in the page: the share box carries them and the lesson position.
        share = share_link(page, containing=f"step={index + 1}")
        assert f"guide={lesson.id}" in share and f"step={index + 1}" in share, share
        if index + 1 < len(lesson.steps):
            main.get_by_role("link", name="Next →").click()
            page.wait_for_url(lambda url, n=index + 2: _step_in_url(url) == str(n), timeout=60_000)
            wait_for_app(page)
    # Last step: Next is not a link any more; Previous goes back one step.
    expect(main.get_by_role("link", name="Next →")).to_have_count(0)
    main.get_by_role("link", name="← Previous").click()
    page.wait_for_url(lambda url: _step_in_url(url) == str(len(lesson.steps) - 1), timeout=60_000)
    wait_for_app(page)
    expect(main.get_by_text(lesson.steps[-2].title, exact=True)).to_be_visible()


def test_presenter_view_hides_the_sidebar_and_enlarges_text(page: Page, app_server: str) -> None:
    page.set_viewport_size({"width": 1280, "height": 720})
    page.goto(app_server + "/Compare?tau=0.05&clusters=32&methods=lsh&methods=scatterbrain&present=1")
    wait_for_app(page)
    expect(page.locator("[data-testid='stSidebar']")).to_be_hidden()
    root_px = page.evaluate("parseFloat(getComputedStyle(document.documentElement).fontSize)")
    assert root_px >= 20, root_px
    # Plotly draws the figure's text with the presenter font size.
    page.wait_for_selector(".js-plotly-plot .xtick text", state="attached", timeout=60_000)
    tick_px = page.evaluate(
        "Math.max(...[...document.querySelectorAll('.js-plotly-plot .xtick text')]"
        ".map(t => parseFloat(t.style.fontSize || getComputedStyle(t).fontSize)))"
    )
    assert tick_px >= 16, tick_px
    save_screenshot(page, "presenter_compare", full_page=False)
    # The exit link drops only the presenter flag.
    page.get_by_role("link", name="Exit presenter view").click()
    page.wait_for_url(lambda url: "present=" not in url, timeout=60_000)
    wait_for_app(page)
    expect(page.locator("[data-testid='stSidebar']")).to_be_visible()
    assert "tau=0.05" in page.url
