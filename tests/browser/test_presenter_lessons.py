"""Every lesson walked in presenter view on a 1280 x 720 projector, by its own Next links: each step's title, text,
Next and main picture (the first chart) are on the first screen, and ``present=1`` survives every link followed and
is on every in-app link the step shows. Home's links carry it too.

Each step's first screen is saved as ``artifacts/screenshots/lesson_<id>_<step>.png``; the committed copies in
``assets/screenshots/lessons/`` come from ``scripts/screenshot.py --lessons``.
"""

from __future__ import annotations

import urllib.parse

import pytest
from playwright.sync_api import Page

from ui import lessons

from .helpers import PLOTLY_CHART, save_screenshot, wait_for_app

SCREEN = {"width": 1280, "height": 720}

# Where the lesson box's parts and the first chart sit (page coordinates), and every in-app link on the page.
LAYOUT = """(chart) => {
  const box = (e) => { if (!e) return null; const r = e.getBoundingClientRect();
    return {top: r.top + window.scrollY, bottom: r.bottom + window.scrollY, height: r.height}; };
  const lesson = document.querySelector('.st-key-ae_lesson');
  const paragraphs = lesson ? [...lesson.querySelectorAll('p')] : [];
  const next = lesson && [...lesson.querySelectorAll('.ae-lesson-nav a, .ae-lesson-nav span')]
    .find((e) => e.innerText.includes('Next'));
  const charts = [...document.querySelectorAll(chart)].map(box).filter((b) => b.height > 0)
    .sort((a, b) => a.top - b.top);
  const links = [...document.querySelectorAll('a[target="_self"]')]
    .filter((a) => !a.classList.contains('ae-exit-present')).map((a) => a.getAttribute('href'))
    .filter((h) => h && !/^[a-z]+:/i.test(h) && !h.startsWith('#'));
  return {lesson: box(lesson), text: paragraphs.map(box), next: box(next), chart: charts[0] || null, links};
}"""


def _query(url: str) -> dict[str, str]:
    return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query))


def _first_screen(page: Page, where: str) -> dict:
    page.wait_for_function(
        "(chart) => [...document.querySelectorAll(chart)].some((e) => e.getBoundingClientRect().height > 0)",
        arg=PLOTLY_CHART,
        timeout=90_000,
    )
    page.wait_for_timeout(1000)  # charts that mount and size after the run
    layout = page.evaluate(LAYOUT, PLOTLY_CHART)
    height = SCREEN["height"]
    assert layout["lesson"] is not None, f"{where}: no lesson box"
    assert layout["text"] and max(b["bottom"] for b in layout["text"]) <= height, f"{where}: text below the screen"
    assert layout["next"] is not None and layout["next"]["bottom"] <= height, f"{where}: Next is {layout['next']}"
    chart = layout["chart"]
    assert chart is not None and chart["top"] < height, f"{where}: the first chart starts at {chart}"
    visible = (height - chart["top"]) / min(chart["height"], height)
    assert visible >= 0.5, f"{where}: only {visible:.0%} of the main picture is on the first screen"
    missing = [href for href in layout["links"] if _query(href).get("present") != "1"]
    assert not missing, f"{where}: links without present=1: {missing}"
    return layout


@pytest.mark.parametrize("lesson_id", list(lessons.lessons()))
def test_every_lesson_step_fits_the_presenter_screen(page: Page, app_server: str, lesson_id: str) -> None:
    lesson = lessons.lessons()[lesson_id]
    page.set_viewport_size(SCREEN)
    # From Home in presenter view, by the lesson's own link there.
    page.goto(f"{app_server}/?present=1")
    wait_for_app(page)
    page.locator(f"a[href^='{lesson.step_url(0)}']").first.click()
    page.wait_for_url(lambda url: _query(url).get("guide") == lesson.id, timeout=60_000)
    wait_for_app(page)
    for index, step in enumerate(lesson.steps):
        where = f"{lesson.id} step {index + 1} ({page.url})"
        query = _query(page.url)
        assert query.get("present") == "1" and query.get("step") == str(index + 1), where
        assert page.locator(".st-key-ae_lesson").get_by_text(step.title, exact=True).is_visible(), where
        _first_screen(page, where)
        save_screenshot(page, f"lesson_{lesson.id}_{index + 1}", full_page=False)
        if index + 1 < len(lesson.steps):
            page.locator(".st-key-ae_lesson").get_by_role("link", name="Next →").click()
            page.wait_for_url(lambda url, n=index + 2: _query(url).get("step") == str(n), timeout=60_000)
            wait_for_app(page)
    # Previous keeps it too.
    if len(lesson.steps) > 1:
        page.locator(".st-key-ae_lesson").get_by_role("link", name="← Previous").click()
        page.wait_for_url(lambda url: _query(url).get("step") == str(len(lesson.steps) - 1), timeout=60_000)
        assert _query(page.url).get("present") == "1", page.url


def test_home_links_keep_the_presenter_view(page: Page, app_server: str) -> None:
    page.set_viewport_size(SCREEN)
    page.goto(f"{app_server}/?present=1")
    wait_for_app(page)
    home_links = """() => [...document.querySelectorAll('a[target="_self"]')]
        .filter((a) => !a.classList.contains('ae-exit-present')).map((a) => a.getAttribute('href'))"""
    # Home's links are drawn by its last elements; on a loaded machine they can arrive after the run state settles.
    page.wait_for_function(f"() => ({home_links})().length > 10", timeout=30_000)
    links = page.evaluate(home_links)
    assert len(links) > 10, links  # presets, lessons and pages
    assert [href for href in links if _query(href).get("present") != "1"] == []
    # A preset followed from Home opens in presenter view.
    page.get_by_role("link", name="Low temperature: sparse wins").click()
    page.wait_for_url(lambda url: "tau=0.05" in url, timeout=60_000)
    wait_for_app(page)
    assert _query(page.url).get("present") == "1", page.url
