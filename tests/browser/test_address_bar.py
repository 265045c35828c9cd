"""The address bar always matches the view: clamped and snapped link values are written back at once, later
changes keep them, and reloading the address bar gives the same settings and the same numbers.

Each link has values the app must change (n above the maximum, a temperature between two slider stops, more heads
than fit or than the slider offers). The test reads the address bar (not the share box), changes an unrelated
control, reads it again, reloads exactly that address, and compares the sidebar values and the metric numbers.
"""

from __future__ import annotations

import urllib.parse

import pytest
from playwright.sync_api import Page

from .helpers import wait_for_app

# (link, the settings the view must show and the address bar must carry afterwards)
CLAMPED_LINKS = [
    pytest.param(
        "n=5000&tau=0.13&heads=16&methods=lsh",
        # 5000 > 4096 -> 4096; 0.13 snaps to 0.15; 16 heads of 4096 x 4096 do not fit -> 2 (the default there,
        # so Streamlit leaves it out of the address bar and the reload gets 2 again).
        {"n": "4096", "tau": "0.15"},
        {"n": "4096", "tau": "0.15", "heads": "2"},
        id="n-5000",
    ),
    pytest.param(
        "n=256&tau=0.0001&heads=40&methods=performer&methods=lsh",
        {"n": "256", "tau": "0.01", "heads": "16"},
        {"n": "256", "tau": "0.01", "heads": "16"},
        id="heads-40",
    ),
]


def address(page: Page) -> dict[str, list[str]]:
    return urllib.parse.parse_qs(urllib.parse.urlparse(page.url).query)


def shown(page: Page) -> dict[str, str]:
    """The sidebar's values: each slider's current value by its label."""
    values = {}
    sidebar = page.locator("[data-testid='stSidebar']")
    for slider in sidebar.locator("[data-testid='stSlider']").all():
        label = slider.locator("[data-testid='stWidgetLabel']").inner_text().strip()
        values[label] = slider.locator("input[type='range']").first.get_attribute("aria-valuetext") or ""
    return values


def numbers(page: Page) -> list[str]:
    return page.locator("[data-testid='stMetricValue']").all_inner_texts()


def expect_in_address(page: Page, expected: dict[str, str]) -> None:
    params = address(page)
    for key, value in expected.items():
        assert params.get(key) == [value], f"address bar {page.url} should carry {key}={value}"


@pytest.mark.parametrize(("link", "in_address", "in_view"), CLAMPED_LINKS)
def test_clamped_link_is_written_to_the_address_bar_and_survives_changes_and_reload(
    page: Page, app_server: str, link: str, in_address: dict[str, str], in_view: dict[str, str]
) -> None:
    page.goto(f"{app_server}/Compare?{link}")
    wait_for_app(page)
    page.locator("[data-testid='stMetricValue']").first.wait_for(timeout=90_000)
    page.wait_for_timeout(500)  # the corrected query string is applied by the browser after the run
    expect_in_address(page, in_address)
    first_view, first_numbers = shown(page), numbers(page)
    assert first_numbers, "the page shows no metric"
    assert first_view.get("Sequence length n") == in_view["n"], first_view
    assert first_view.get("Temperature τ") == in_view["tau"], first_view
    if in_view["heads"] != "2":
        assert first_view.get("Heads") == in_view["heads"], first_view

    # A later, unrelated change keeps every corrected value in the address bar.
    page.get_by_text("Log colour scale").click()
    wait_for_app(page)
    page.wait_for_timeout(500)
    expect_in_address(page, {**in_address, "logc": "false"})
    assert numbers(page) == first_numbers  # colour scale is display only

    # Reloading exactly what the address bar says reproduces the view and its numbers.
    reloaded = page.url
    page.goto("about:blank")
    page.goto(reloaded)
    wait_for_app(page)
    page.locator("[data-testid='stMetricValue']").first.wait_for(timeout=90_000)
    page.wait_for_timeout(500)
    expect_in_address(page, {**in_address, "logc": "false"})
    assert shown(page) == first_view
    assert numbers(page) == first_numbers
    notices = page.locator("[data-testid='stAlert']").all_inner_texts()
    assert not any("adjusted" in text for text in notices), f"the reloaded address still needed fixing: {notices}"
