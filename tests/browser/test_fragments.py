"""A method knob reruns only the part of Compare it affects (an ``st.fragment``), not the whole page.

The test reads Streamlit's own websocket messages: every run ends with a ``script_finished`` message whose status
says whether it was a full run or a fragment run. After a knob change there must be a fragment run and no full run,
the knob's method must have new numbers, and the share link in the sidebar (drawn by the fragment) must carry the
new knob value. A sidebar control must still rerun the whole page.
"""

from __future__ import annotations

from typing import Any

from playwright.sync_api import Page
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

from .helpers import wait_for_app


def record_run_endings(page: Page) -> list[str]:
    """Names of the ``script_finished`` statuses the page receives, in order (filled as messages arrive)."""
    endings: list[str] = []

    def on_frame(payload: Any) -> None:
        if not isinstance(payload, bytes | bytearray):
            return
        message = ForwardMsg()
        try:
            message.ParseFromString(bytes(payload))
        except Exception:  # noqa: BLE001 - not a ForwardMsg (e.g. a ping)
            return
        if message.WhichOneof("type") == "script_finished":
            endings.append(ForwardMsg.ScriptFinishedStatus.Name(message.script_finished))

    page.on("websocket", lambda ws: ws.on("framereceived", on_frame))
    return endings


def metric(page: Page, label: str) -> str:
    tile = page.locator("[data-testid='stMetric']").filter(has_text=label).first
    return tile.locator("[data-testid='stMetricValue']").inner_text()


def share_link(page: Page) -> str:
    return page.locator("[data-testid='stSidebar'] [data-testid='stCode']").first.inner_text()


def move_sidebar_temperature(page: Page, endings: list[str]) -> None:
    """One step of the sidebar's temperature slider, which is outside every fragment: a full run must follow."""
    endings.clear()
    page.get_by_role("slider", name="Temperature τ").focus()
    page.keyboard.press("ArrowRight")
    wait_for_app(page)
    page.wait_for_timeout(500)
    assert "FINISHED_SUCCESSFULLY" in endings, endings


def test_method_knob_reruns_only_the_results_fragment(page: Page, app_server: str) -> None:
    endings = record_run_endings(page)
    page.goto(f"{app_server}/Compare?n=256&methods=performer&methods=lsh")
    wait_for_app(page)
    page.locator("[data-testid='stMetricValue']").first.wait_for(timeout=90_000)
    assert "FINISHED_SUCCESSFULLY" in endings, endings
    lsh_before, performer_before = metric(page, "LSH"), metric(page, "Performer")

    page.get_by_text("Method knobs").first.click()
    page.get_by_role("tab", name="Performer (FAVOR+)").click()
    page.get_by_text("Linked to budget").first.click()
    wait_for_app(page)
    endings.clear()
    box = page.get_by_label("features", exact=True).first
    box.fill("8")
    box.press("Enter")
    wait_for_app(page)
    page.wait_for_function(
        "() => [...document.querySelectorAll(\"[data-testid='stSidebar'] [data-testid='stCode']\")]"
        ".some(e => e.innerText.includes('performer_features=8'))",
        timeout=30_000,
    )
    assert endings and set(endings) == {"FINISHED_FRAGMENT_RUN_SUCCESSFULLY"}, endings
    assert metric(page, "Performer") != performer_before, "the knob did not change Performer's error"
    assert metric(page, "LSH") == lsh_before
    assert "performer_features=8" in page.url

    # A sidebar control is outside the fragment: the whole page runs again.
    move_sidebar_temperature(page, endings)
    assert "performer_features=8" in share_link(page), "a full run dropped the fragment's knob from the link"


def test_sparse_plus_low_rank_fig4_sliders_rerun_only_fig4(page: Page, app_server: str) -> None:
    """Fig. 4 has its own sliders and its own fragment: moving one reruns that section, not the split above it."""
    endings = record_run_endings(page)
    page.goto(f"{app_server}/Sparse_plus_low_rank?n=64")
    wait_for_app(page)
    assert "FINISHED_SUCCESSFULLY" in endings, endings
    split_metric = page.locator("[data-testid='stMetric']").filter(has_text="Scatterbrain error").first
    split_before = split_metric.locator("[data-testid='stMetricValue']").inner_text()
    endings.clear()
    slider = page.get_by_role("slider", name="d (unit vectors)")
    assert "f4_d=" not in page.url  # the default is not written
    slider.focus()
    page.keyboard.press("ArrowRight")
    page.wait_for_url(lambda url: "f4_d=" in url, timeout=30_000)
    wait_for_app(page)
    page.wait_for_timeout(500)
    assert endings and set(endings) == {"FINISHED_FRAGMENT_RUN_SUCCESSFULLY"}, endings
    assert split_metric.locator("[data-testid='stMetricValue']").inner_text() == split_before

    # A Scatterbrain knob's section is a fragment of its own too: the map resolution reruns it, not the page.
    endings.clear()
    pixels = page.locator("[data-testid='stRadio']").filter(has_text="Heatmap pixels")
    pixels.get_by_text("256", exact=True).click()
    page.wait_for_url(lambda url: "res=256" in url, timeout=30_000)
    wait_for_app(page)
    page.wait_for_timeout(500)
    assert endings and set(endings) == {"FINISHED_FRAGMENT_RUN_SUCCESSFULLY"}, endings


def test_vcc_section_controls_rerun_only_their_section(page: Page, app_server: str) -> None:
    """VCC's log colour reruns only its heatmaps and the error's rows only the error-vs-budget section."""
    endings = record_run_endings(page)
    page.goto(f"{app_server}/VCC?n=64")
    wait_for_app(page)
    assert "FINISHED_SUCCESSFULLY" in endings, endings
    for label, url_part in (("Log colour scale", "logc=false"), ("all rows", "rows=all")):
        endings.clear()
        page.get_by_text(label, exact=True).first.click()
        page.wait_for_url(lambda url, part=url_part: part in url, timeout=30_000)
        wait_for_app(page)
        page.wait_for_timeout(500)
        assert endings and set(endings) == {"FINISHED_FRAGMENT_RUN_SUCCESSFULLY"}, (url_part, endings)
    # A sidebar control is outside both fragments: the whole page runs again, and the share box keeps both values.
    move_sidebar_temperature(page, endings)
    link = share_link(page)
    assert "logc=false" in link and "rows=all" in link, link


def test_rank_vs_heads_tab_controls_rerun_only_their_tab(page: Page, app_server: str) -> None:
    """Rank vs heads: the Theorem shapes tab's ε slider reruns that tab (its chart changes), not the page."""
    endings = record_run_endings(page)
    page.goto(f"{app_server}/Rank_vs_heads")
    wait_for_app(page)
    assert "FINISHED_SUCCESSFULLY" in endings, endings
    page.get_by_role("tab", name="Theorem shapes").click()
    shapes = (
        "() => JSON.stringify([...document.querySelectorAll('.js-plotly-plot')]"
        ".filter(p => p.offsetParent !== null).map(p => p.data.map(t => t.y)))"
    )
    before = page.evaluate(shapes)
    endings.clear()
    page.get_by_role("slider", name="Target error ε").focus()
    page.keyboard.press("ArrowRight")
    page.wait_for_url(lambda url: "eps=" in url, timeout=30_000)
    wait_for_app(page)
    page.wait_for_timeout(500)
    assert endings and set(endings) == {"FINISHED_FRAGMENT_RUN_SUCCESSFULLY"}, endings
    assert page.evaluate(shapes) != before, "the ε slider did not change the theorem shapes"
