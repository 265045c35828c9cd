"""The served app (deploy/serve.py) starts loading its Plotly bundle before Streamlit has even connected.

Without the head start the browser would ask for it only after the websocket is open and the first chart's message
has arrived; the same goes for Streamlit's chunk for components, which the charts need to mount. With it, both
requests come from the page document, so they precede the websocket; the bundle is fetched once (the charts share
the head tag's promise), Streamlit's own Plotly chunk is never fetched, the chart draws and no script error is
raised. (Streamlit's own probes of `<page>/_stcore/health` answer 404 with or without it, and its icon font link is
offline here; those "Failed to load resource" lines are not script errors.)
"""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Page

from deploy.preload import BUNDLE_PATH

from .helpers import PLOTLY_CHART, wait_for_app


def test_a_page_asks_for_the_plotly_bundle_before_streamlit_connects(page: Page, app_server: str) -> None:
    events: list[str] = []
    errors: list[str] = []

    def on_request(request: Any) -> None:
        if request.url.endswith(f"/{BUNDLE_PATH}"):
            events.append("plotly")
        elif "/BidiComponent." in request.url:
            events.append("component chunk")
        elif "/PlotlyChart." in request.url:
            events.append("streamlit's plotly chunk")

    page.on("request", on_request)
    page.on("websocket", lambda ws: events.append("websocket"))
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on(
        "console",
        lambda message: (
            errors.append(message.text)
            if message.type == "error" and not message.text.startswith("Failed to load resource")
            else None
        ),
    )
    page.goto(f"{app_server}/Compare?n=128&methods=nystrom")
    wait_for_app(page)
    page.locator(f"{PLOTLY_CHART} .main-svg").first.wait_for(timeout=60_000)
    assert "plotly" in events and "websocket" in events, events
    assert events.index("plotly") < events.index("websocket"), events
    assert events.index("component chunk") < events.index("websocket"), events
    assert events.count("plotly") == 1 and "streamlit's plotly chunk" not in events, events
    assert not errors, errors
