"""The app starts and its home page renders in a real browser, on a server that has seen no request before."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from .helpers import StreamlitServer, save_screenshot, wait_for_app


def test_home_page_renders_on_a_fresh_server(page: Page, fresh_app_server: StreamlitServer) -> None:
    response = page.goto(fresh_app_server.url + "/")
    assert response is not None and response.ok, f"GET / answered {response and response.status}"
    wait_for_app(page)

    heading = page.locator("[data-testid='stMain'] h1").first
    expect(heading).to_be_visible()
    assert heading.inner_text().strip(), "the home page has an empty main heading"
    assert "Attention Explorer" in page.title(), f"unexpected browser tab title {page.title()!r}"

    path = save_screenshot(page, "home")
    assert path.stat().st_size > 10_000, "the screenshot is suspiciously small (blank page?)"
