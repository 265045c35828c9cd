"""A control reruns only the part of its page it drives (an ``st.fragment``), not the whole page.

The tests read Streamlit's own websocket messages: every run ends with a ``script_finished`` message whose status
says whether it was a full run or a fragment run. After a control change there must be a fragment run and no full
run, the control's section must have new numbers or a new chart, and the share link in the sidebar (drawn by the
fragment, or by the next full run) must carry the new value. A sidebar control must still rerun the whole page.
Jobs started inside a fragment must show their progress and result, and their Cancel button must act at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page

from .helpers import PLOTLY_CHART, on_script_finished, share_link, streamlit_server, wait_for_app

FRAGMENT_ONLY = {"FINISHED_FRAGMENT_RUN_SUCCESSFULLY"}


def record_run_endings(page: Page) -> list[str]:
    """Names of the ``script_finished`` statuses the page receives, in order (filled as messages arrive)."""
    endings: list[str] = []
    on_script_finished(page, endings.append)
    return endings


def metric(page: Page, label: str) -> str:
    tile = page.locator("[data-testid='stMetric']").filter(has_text=label).first
    return tile.locator("[data-testid='stMetricValue']").inner_text()


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
    share_link(page, containing="performer_features=8")
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


# Points on the sweep's first curve (the seed bands behind the curves are filled traces, drawn first).
FIRST_CURVE_POINTS = "plot._fullData.find((trace) => trace.fill !== 'toself').x.length"


def first_plot(page: Page, expression: str) -> Any:
    """``expression`` evaluated on the page's first Plotly chart (``plot``: its element, with data and _fullLayout)."""
    page.wait_for_function("() => document.querySelector('.js-plotly-plot')?._fullLayout", timeout=30_000)
    return page.evaluate(f"() => {{ const plot = document.querySelector('.js-plotly-plot'); return {expression}; }}")


def move_slider(page: Page, name: str, url_part: str, endings: list[str]) -> None:
    """One step right of a slider; waits until the URL holds the new value and the rerun has finished."""
    endings.clear()
    page.get_by_role("slider", name=name).focus()
    page.keyboard.press("ArrowRight")
    page.wait_for_url(lambda url: url_part in url, timeout=30_000)
    wait_for_app(page)
    page.wait_for_timeout(500)


def test_kernels_tab_controls_rerun_only_their_tab(page: Page, app_server: str) -> None:
    """Each Kernels tab with controls is a fragment: the pair's angle reruns the first tab, not the page."""
    endings = record_run_endings(page)
    page.goto(f"{app_server}/Kernels?n=64")
    wait_for_app(page)
    assert "FINISHED_SUCCESSFULLY" in endings, endings
    ratio = page.get_by_text("At this pair MSE_trig / MSE_positive", exact=False).first
    ratio_before = ratio.inner_text()
    curve_before = first_plot(page, "JSON.stringify(plot.data.map(t => t.y))")

    move_slider(page, "Angle φ (degrees)", "angle=146", endings)
    assert endings and set(endings) == FRAGMENT_ONLY, endings
    assert ratio.inner_text() != ratio_before, "the angle did not change the MSE ratio"
    assert first_plot(page, "JSON.stringify(plot.data.map(t => t.y))") != curve_before, "the curves did not move"

    # Another tab's control is its own fragment too.
    page.get_by_role("tab", name="Attention error vs m").click()
    move_slider(page, "Redraws", "att_redraws=5", endings)
    assert endings and set(endings) == FRAGMENT_ONLY, endings

    # The sidebar is outside every fragment: a full run, and its share box holds both tabs' values.
    move_sidebar_temperature(page, endings)
    link = share_link(page)
    assert "angle=146" in link and "att_redraws=5" in link, link


@pytest.fixture(scope="module")
def empty_cache_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A server of its own with an empty result cache, so the on-demand jobs below compute instead of being found.

    Its job limit admits the 40-temperature sweep at n = 1024 below: core.limits estimates it (pessimistically) at
    about 190 s; it runs for about 4 s, long enough to be cancelled while it runs."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("ATTN_EXPLORER_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        env.setenv("ATTN_EXPLORER_JOB_SECONDS", "600")
        with streamlit_server() as server:
            yield server.url


def test_kernels_button_job_shows_its_progress_and_result_in_the_fragment(page: Page, empty_cache_server: str) -> None:
    """The Monte Carlo button reruns its tab only; the job still shows its progress bar, then the measured points."""
    endings = record_run_endings(page)
    # 2000 draws at d = 16: estimated 5 s (about 4.6 s measured), so it waits for its button.
    page.goto(f"{empty_cache_server}/Kernels?n=64&d=16&draws=2000")
    wait_for_app(page)
    traces_before = first_plot(page, "plot.data.length")
    endings.clear()
    page.get_by_role("button", name="Measure with 2000 draws").click()
    page.locator("[data-testid='stProgress']").first.wait_for(timeout=30_000)
    page.locator("[data-testid='stProgress']").first.wait_for(state="detached", timeout=90_000)
    wait_for_app(page)
    assert first_plot(page, "plot.data.length") > traces_before, "the measured points did not join the curves"
    assert endings and set(endings) == FRAGMENT_ONLY, endings


def test_kernels_cancel_in_a_fragment_stops_the_job_at_once(page: Page, empty_cache_server: str) -> None:
    """A click inside a fragment waits for the fragment's run in Streamlit; Cancel must still stop the job now."""
    endings = record_run_endings(page)
    page.goto(f"{empty_cache_server}/Kernels?n=64&d=16&draws=5000")  # about 12 s of work
    wait_for_app(page)
    traces_before = first_plot(page, "plot.data.length")
    endings.clear()
    page.get_by_role("button", name="Measure with 5000 draws").click()
    cancel = page.get_by_role("button", name="Cancel")
    cancel.wait_for(timeout=30_000)
    page.wait_for_timeout(1000)
    cancel.click()
    cancel.wait_for(state="detached", timeout=8_000)  # not after the job's 12 s
    page.get_by_text("press Measure with 5000 draws to start", exact=False).wait_for(timeout=8_000)
    wait_for_app(page)
    assert first_plot(page, "plot.data.length") == traces_before, "the cancelled job's points were drawn"
    assert "FINISHED_SUCCESSFULLY" not in endings and endings[-1] == "FINISHED_FRAGMENT_RUN_SUCCESSFULLY", endings


def test_error_vs_entropy_sweep_controls_rerun_only_the_sweep(page: Page, app_server: str) -> None:
    """The log axis and the point count rerun the sweep section only; the chart follows both."""
    endings = record_run_endings(page)
    page.goto(f"{app_server}/Error_vs_entropy?n=64&points=6")
    wait_for_app(page)
    assert "FINISHED_SUCCESSFULLY" in endings, endings
    assert first_plot(page, "plot._fullLayout.yaxis.type") == "linear"
    assert first_plot(page, FIRST_CURVE_POINTS) == 6

    endings.clear()
    page.get_by_text("Log error axis", exact=True).click()
    page.wait_for_url(lambda url: "logy=true" in url, timeout=30_000)
    wait_for_app(page)
    page.wait_for_timeout(500)
    assert endings and set(endings) == FRAGMENT_ONLY, endings
    assert first_plot(page, "plot._fullLayout.yaxis.type") == "log"

    move_slider(page, "Temperatures in the sweep", "points=7", endings)
    assert endings and set(endings) == FRAGMENT_ONLY, endings
    assert first_plot(page, FIRST_CURVE_POINTS) == 7

    move_sidebar_temperature(page, endings)
    link = share_link(page)
    assert "logy=true" in link and "points=7" in link, link


def test_error_vs_entropy_cancel_in_a_fragment_rerun_ends_the_section_only(page: Page, empty_cache_server: str) -> None:
    """A sweep started by a fragment rerun and cancelled: the section says so and offers a rerun; no exception, no
    full run, and the sidebar's share box (drawn by the last full run) stays."""
    endings = record_run_endings(page)
    page.goto(f"{empty_cache_server}/Error_vs_entropy?n=1024")  # 12 temperatures: about 1 s
    wait_for_app(page)
    endings.clear()
    page.get_by_role("slider", name="Temperatures in the sweep").focus()
    page.keyboard.press("End")  # 40 temperatures at n = 1024: a queued job of a few seconds, with its Cancel button
    cancel = page.get_by_role("button", name="Cancel")
    cancel.wait_for(timeout=60_000)
    page.wait_for_timeout(1000)
    cancel.click()
    page.get_by_text("was cancelled", exact=False).first.wait_for(timeout=10_000)
    wait_for_app(page)  # fails on an exception in the page
    assert page.get_by_role("button", name="Run it again").is_visible()
    assert "FINISHED_SUCCESSFULLY" not in endings and endings[-1] == "FINISHED_FRAGMENT_RUN_SUCCESSFULLY", endings
    assert "points=40" in page.url
    assert share_link(page)  # the footer outside the fragment is still drawn


def test_error_vs_entropy_cancel_in_a_full_run_keeps_the_sidebar_footer(page: Page, empty_cache_server: str) -> None:
    """Cancel during a full run reruns the page, as without fragments; the sweep section then drew the page's footer
    from inside itself, so its next fragment rerun must draw it again or the sidebar loses its share box."""
    endings = record_run_endings(page)
    # A queued job of a few seconds in the first, full run (n = 512 takes about 1 s: over before Cancel is pressed)
    page.goto(f"{empty_cache_server}/Error_vs_entropy?n=1024&points=40")
    cancel = page.get_by_role("button", name="Cancel")
    cancel.wait_for(timeout=90_000)
    page.wait_for_timeout(1000)
    endings.clear()
    cancel.click()
    page.get_by_text("was cancelled", exact=False).first.wait_for(timeout=10_000)
    wait_for_app(page)
    assert "FINISHED_SUCCESSFULLY" in endings, endings

    endings.clear()
    page.get_by_text("Log error axis", exact=True).click()
    page.wait_for_url(lambda url: "logy=true" in url, timeout=30_000)
    wait_for_app(page)
    page.wait_for_timeout(500)
    assert endings and set(endings) == FRAGMENT_ONLY, endings
    assert page.get_by_text("was cancelled", exact=False).first.is_visible()
    assert "logy=true" in share_link(page)
    settings_uploader = page.locator("[data-testid='stSidebar']").locator("[data-testid='stFileUploader']")
    assert settings_uploader.filter(has_text="Load settings (JSON)").count() == 1


def test_the_table_behind_the_sweep_is_sent_when_its_expander_opens(page: Page, app_server: str) -> None:
    """``ui.on_demand``: closed, the page holds no data grid; opening the expander reruns the sweep's fragment
    alone (the sweep comes from the cache) and the table appears under the same chart."""
    endings = record_run_endings(page)
    page.goto(f"{app_server}/Error_vs_entropy?n=128&points=4")
    wait_for_app(page)
    page.locator(f"{PLOTLY_CHART} .main-svg").first.wait_for(timeout=90_000)
    assert page.locator("[data-testid='stDataFrame']").count() == 0
    endings.clear()
    page.get_by_text("Numbers behind the chart").first.click()
    page.locator("[data-testid='stDataFrame']").first.wait_for(timeout=30_000)
    wait_for_app(page)
    assert endings and set(endings) == FRAGMENT_ONLY, endings
    assert page.locator(f"{PLOTLY_CHART} .main-svg").count() >= 1
