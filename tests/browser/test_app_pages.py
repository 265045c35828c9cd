"""The explorer pages in headless Chromium: deep links on fresh servers, URL-bound controls, notices, settings files.

Sizes are kept small through the URL (n = 64), so the whole module takes a few minutes at most on two cores.
"""

from __future__ import annotations

import json
import re
import time
import urllib.parse
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect
from render_params import RENDER_PARAMS

from ui import page_registry

from .helpers import PLOTLY_CHART, save_screenshot, settings_file_input, share_link, streamlit_server, wait_for_app

MY_PAGES = {
    "Compare": "n=64&heads=2&methods=performer&methods=lsh&methods=scatterbrain",
    "Sparse_plus_low_rank": "n=64&heads=1&f4_draws=1",
    "Error_vs_entropy": "n=64&heads=1&points=4",
    "Regime_map": "n=64&nb=2&ns=2",
    "VCC": "n=64",
    "Rank_vs_heads": "steps=20&ranks=1&hv=1&nsweep=2",
    "Kernels": "n=64&draws=250&lk_steps=10",
    "Scaling": "heads=2",
    "Paper_claims": "papers=rank-vs-heads",
}
# Pages with their own sidebar (no shared input controls): the URL value to find in the share link.
OWN_SIDEBAR = {"Rank_vs_heads": "steps=20", "Scaling": "heads=2", "Paper_claims": "papers=rank-vs-heads"}


def params_of(url: str) -> dict[str, list[str]]:
    return urllib.parse.parse_qs(urllib.parse.urlparse(url).query)


def metric_values(page: Page) -> list[str]:
    return page.locator("[data-testid='stMetricValue']").all_inner_texts()


def share_box(page: Page) -> str:
    return share_link(page)


@pytest.mark.parametrize("path", list(MY_PAGES))
def test_deep_link_is_the_first_request_on_a_fresh_server(page: Page, path: str) -> None:
    with streamlit_server() as server:
        response = page.goto(f"{server.url}/{path}?{MY_PAGES[path]}")
        assert response is not None and response.ok
        wait_for_app(page)
        heading = page.locator("[data-testid='stMain'] h1").first
        expect(heading).to_be_visible()
        assert path.split("_")[0].lower() in heading.inner_text().lower(), heading.inner_text()
        assert not page.locator("[data-testid='stSidebarNav']").is_visible(), "Streamlit's own nav should be hidden"
        expect(page.locator("nav.ae-nav a").first).to_be_visible()
        if path in OWN_SIDEBAR:
            assert OWN_SIDEBAR[path] in share_box(page)
        else:
            # The page ran (not the home page as a fallback) and the URL settings were applied.
            assert page.get_by_role("slider", name="Sequence length n").input_value() == "64"
            # A chart mounts after the run ends; a fresh server on a loaded machine took more than expect's 5 s.
            expect(page.locator(PLOTLY_CHART).first).to_be_visible(timeout=30_000)
            assert "n=64" in share_box(page)
        save_screenshot(page, f"deep_link_{path}")


def test_every_page_opens_by_deep_link(page: Page, app_server: str) -> None:
    """The pages of MY_PAGES open by deep link as a fresh server's first request (above, with more checks); the rest
    here, on the shared server, each at its render settings (tests/render_params.py: n = 64 and its heaviest knob
    turned down)."""
    rest = [entry for entry in page_registry.PAGES if entry.url_path not in MY_PAGES]
    assert rest and {entry.url_path for entry in page_registry.PAGES} == {*MY_PAGES, *(e.url_path for e in rest)}
    for entry in rest:
        query = urllib.parse.urlencode({**RENDER_PARAMS[entry.file], "heads": "1", "seed": "3"})
        page.goto(f"{app_server}/{entry.url_path}?{query}")
        wait_for_app(page)
        expect(page.locator("[data-testid='stMain'] h1").first).to_be_visible()
        assert page.url.split("?")[0].endswith("/" + entry.url_path), page.url


def test_a_slider_move_updates_the_url_and_the_metrics(page: Page, app_server: str) -> None:
    page.goto(f"{app_server}/Compare?n=64&heads=1&methods=performer&methods=lsh")
    wait_for_app(page)
    values = page.locator("[data-testid='stMetricValue']")
    expect(values).to_have_count(2, timeout=90_000)
    before = metric_values(page)
    slider = page.get_by_role("slider", name="Temperature τ")
    slider.focus()
    page.keyboard.press("ArrowRight")
    page.wait_for_url(re.compile(r"[?&]tau=0\.3(&|$)"), timeout=30_000)  # 0.2 -> the next option, 0.3
    wait_for_app(page)
    deadline = time.monotonic() + 60
    while metric_values(page) == before and time.monotonic() < deadline:
        page.wait_for_timeout(250)
    after = metric_values(page)
    assert len(after) == 2 and after != before, "the metrics did not change after the temperature moved"
    assert "tau=0.3" in share_box(page)
    save_screenshot(page, "compare_after_slider_move")


def test_garbage_url_shows_a_notice_not_an_exception(page: Page, app_server: str) -> None:
    page.goto(f"{app_server}/Compare?n=abc&tau=-5&seed=%00&heads=1&d=99999&zz={'x' * 3000}&methods=performer")
    wait_for_app(page)  # also asserts that no exception box is shown
    alert = page.locator("[data-testid='stAlert']").filter(has_text="Some link settings were adjusted")
    expect(alert).to_be_visible()
    text = alert.inner_text()
    assert "not a number" in text and "greater than 0" in text and "maximum 256" in text
    assert page.get_by_role("slider", name="Head dimension d").input_value() == "256"
    save_screenshot(page, "garbage_url_notice")


def test_navigation_keeps_the_shared_settings(page: Page, app_server: str) -> None:
    page.goto(f"{app_server}/Compare?n=64&heads=1&tau=0.5&methods=performer")
    wait_for_app(page)
    page.locator("[data-testid='stSidebar']").get_by_role("link", name="Sparse + low rank").click()
    page.wait_for_url(re.compile(r"/Sparse_plus_low_rank"), timeout=30_000)
    wait_for_app(page)
    assert "/Sparse_plus_low_rank" in page.url
    got = params_of(page.url)
    assert got.get("n") == ["64"] and got.get("tau") == ["0.5"], page.url
    assert page.get_by_role("slider", name="Sequence length n").input_value() == "64"


def test_lesson_mode_hides_the_chosen_controls(page: Page, app_server: str) -> None:
    page.goto(f"{app_server}/Compare?n=64&heads=1&methods=performer&lesson=1&hide=seed,device,n")
    wait_for_app(page)
    sidebar = page.locator("[data-testid='stSidebar']")
    expect(sidebar.get_by_text("Lesson mode")).to_be_visible()
    assert sidebar.get_by_role("slider", name="Sequence length n").count() == 0
    assert sidebar.get_by_text("Seed", exact=True).count() == 0
    assert "n=64" in share_box(page) and "lesson=1" in share_box(page)
    save_screenshot(page, "lesson_mode")


def test_settings_file_round_trip(page: Page, app_server: str, tmp_path: Path) -> None:
    page.goto(f"{app_server}/Compare?n=64&heads=1&methods=performer")
    wait_for_app(page)
    settings = {"version": 1, "page": "Compare", "params": {"n": "96", "tau": "1", "seed": "4"}}
    file = tmp_path / "settings.json"
    file.write_text(json.dumps(settings))
    settings_file_input(page).set_input_files(str(file))
    wait_for_app(page)
    # The rerun the file starts may begin after wait_for_app saw the app idle: CI (beside another worker) once read
    # the slider 0.5 s later, with the address already at n = 96 and the slider still at 64. Wait for the value.
    expect(page.get_by_role("slider", name="Sequence length n")).to_have_value("96", timeout=15_000)
    got = params_of(page.url)
    assert got.get("n") == ["96"] and got.get("tau") == ["1"] and got.get("seed") == ["4"], page.url
    expect(page.get_by_text("Loaded 3 setting(s) from the file.")).to_be_visible()


def test_export_menu_downloads_png_html_and_data(page: Page, app_server: str, tmp_path: Path) -> None:
    import io

    import numpy as np

    page.goto(f"{app_server}/Compare?n=64&heads=1&methods=performer")
    wait_for_app(page)
    page.get_by_role("button", name="Export").first.click()  # the exact-attention heatmap
    downloads = {}
    for label in ("PNG (full resolution)", "HTML (interactive)", "Data (NPZ)", "Settings (JSON)"):
        with page.expect_download(timeout=60_000) as info:
            page.get_by_role("button", name=label).first.click()
        target = tmp_path / info.value.suggested_filename
        info.value.save_as(target)
        downloads[label] = target.read_bytes()
    png = downloads["PNG (full resolution)"]
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert (width, height) == (64, 64), "one pixel per attention entry"
    assert b"plotly" in downloads["HTML (interactive)"][:200_000].lower()
    arrays = np.load(io.BytesIO(downloads["Data (NPZ)"]))
    assert arrays["attention"].shape == (64, 64)
    np.testing.assert_allclose(arrays["attention"].sum(axis=1), 1.0, atol=1e-4)
    settings = json.loads(downloads["Settings (JSON)"])
    assert settings["params"]["n"] == "64" and "n=64" in settings["url"]


def test_method_figure_exports_one_chosen_map_at_full_resolution(page: Page, app_server: str, tmp_path: Path) -> None:
    """A method's figure (its attention map over its error) offers each map's own full-resolution exports."""
    import io

    import numpy as np

    page.goto(f"{app_server}/Compare?n=64&heads=1&methods=performer&methods=local")
    wait_for_app(page)
    page.get_by_role("button", name="Export").nth(1).click()  # after the exact heatmap's: Performer's maps
    menu = page.locator("[data-testid='stPopoverBody']")
    menu.get_by_role("combobox").click()
    page.get_by_role("option", name="Performer (FAVOR+): error").click()
    wait_for_app(page)
    downloads = {}
    for label in ("PNG (full resolution)", "Data (NPZ)"):
        with page.expect_download(timeout=60_000) as info:
            menu.get_by_role("button", name=label).first.click()  # the chosen map's, above the figure's own
        downloads[label] = info.value
    name = downloads["Data (NPZ)"].suggested_filename
    assert name.startswith("performer_maps_performer") and name.endswith("error.npz"), name
    target = tmp_path / "error.npz"
    downloads["Data (NPZ)"].save_as(target)
    error = np.load(io.BytesIO(target.read_bytes()))["error"]
    assert error.shape == (64, 64)
    # Performer's rows are normalised like exact softmax rows, so each row of the error sums to zero.
    np.testing.assert_allclose(error.sum(axis=1), 0.0, atol=1e-4)
    assert np.abs(error).max() > 1e-3, "an approximation, not exact attention"
    png_path = tmp_path / "error.png"
    downloads["PNG (full resolution)"].save_as(png_path)
    png = png_path.read_bytes()
    assert (int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")) == (64, 64)
