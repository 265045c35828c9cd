"""The sidebar's share box (ui/share_box.py) in Chromium: it shows the view's link, its button copies the link, and
the page does not load Streamlit's syntax-highlighter chunk, which is why the box is not an ``st.code`` block."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from .helpers import SHARE_BOX as BOX
from .helpers import SHARE_LINK, share_link, wait_for_app

LINK = "Compare?n=128&methods=performer"


def test_share_box_shows_the_link_and_copies_it(page: Page, app_server: str) -> None:
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=app_server)
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    page.goto(f"{app_server}/{LINK}")
    wait_for_app(page)

    link = share_link(page, containing="methods=performer")
    assert link.startswith(f"{app_server}/Compare?"), link
    assert "n=128" in link, link
    # Line-break opportunities after "/", "?" and "&": a long link wraps between its parts in the narrow sidebar.
    assert page.locator(f"{BOX} code wbr").count() == sum(link.count(c) for c in "/?&")
    page.locator(f"{BOX} button").click()
    expect(page.locator(f"{BOX} [role='status']")).to_have_text("Link copied.")
    assert page.evaluate("() => navigator.clipboard.readText()") == link

    highlighter = [url for url in requested if "SyntaxHighlighter" in url]
    assert not highlighter, f"the page loaded the syntax highlighter: {highlighter}"


def test_without_the_clipboard_api_the_link_is_selected(page: Page, app_server: str) -> None:
    """Over plain http (a hosted link without TLS) browsers give no ``navigator.clipboard``: the box selects its
    link and copies it the old way, or leaves it selected for Ctrl+C, and says which."""
    page.add_init_script("Object.defineProperty(navigator, 'clipboard', { value: undefined })")
    page.goto(f"{app_server}/{LINK}")
    wait_for_app(page)
    link = share_link(page, containing="methods=performer")

    page.locator(f"{BOX} button").click()
    expect(page.locator(f"{BOX} [role='status']")).not_to_be_empty()
    status = page.locator(f"{BOX} [role='status']").inner_text()
    assert status in {"Link copied.", "Selected: press Ctrl+C (⌘C) to copy."}, status
    assert page.evaluate("() => window.getSelection().toString()") == link
    assert page.locator(SHARE_LINK).last.inner_text() == link
