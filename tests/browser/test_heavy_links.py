"""Every page's heavy work stops within 2 s of its tab closing (issue 28), and the issue's two heavy links settle
within the job limit: refused or reduced up front, or finished.

One server for the module (an empty result cache, one compute slot). Each case opens a link (and presses its
button, for work that waits for one), waits until the server is computing, closes the tab and reads the server's
CPU time through psutil: from 2 s after the close on it must only do housekeeping.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import psutil
import pytest
from playwright.sync_api import Browser

from .helpers import VIEWPORT, streamlit_server
from .test_cancel_browser import BUSY_RATE, IDLE_RATE, STOP_BOUND_S, cpu_rate, wait_idle

JOB_SECONDS = 60.0  # the default limit: the issue's links must settle within it
KERNELS_ISSUE = (
    "/Kernels?n=1024&d=256&heads=16&draws=5000&entry_m=1024&entry_redraws=8&att_redraws=10&lk_m=256&lk_steps=400"
)
SPARSE_ISSUE = "/Sparse_plus_low_rank?n=1024&rpca=true&f4_draws=64&scatterbrain_rounds=16"

COMPARE_METHODS = ("lsh", "performer", "scatterbrain", "nystrom")
# (case, link, button to press or None, whether the server must be busy before the close). Each link keeps the
# server computing for several seconds on the 2-core reference machine, under the default limits.
CASES = [
    ("kernels_issue", KERNELS_ISSUE, None, False),
    ("sparse_lowrank_issue", SPARSE_ISSUE, None, False),
    ("kernels", "/Kernels?draws=5000", "Measure with 5000 draws", True),
    ("sparse_lowrank", "/Sparse_plus_low_rank?n=256&rpca=true", None, True),
    ("error_vs_entropy", "/Error_vs_entropy?n=2048&points=16", None, True),
    ("regime_map", "/Regime_map?n=1024&nb=16&ns=12&betas=0.1,200&sigmas=0.05,2&seeds=1", None, True),
    (
        "compare",
        "/Compare?n=2048&heads=8&methods=lsh&methods=performer&methods=scatterbrain&methods=nystrom",
        None,
        True,
    ),
    ("vcc", "/VCC?n=4096&heads=8", None, True),
    ("rank_vs_heads", "/Rank_vs_heads", "Train the grid", True),
    ("paper_claims", "/Paper_claims", "Measure the claims", True),
    ("scaling", "/Scaling", "Measure", True),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, psutil.Process]]:
    with pytest.MonkeyPatch.context() as patch:
        # An empty result cache, so every link computes instead of being served from an earlier run.
        patch.setenv("ATTN_EXPLORER_CACHE_DIR", str(tmp_path_factory.mktemp("heavy") / "cache"))
        patch.setenv("ATTN_EXPLORER_JOB_SECONDS", f"{JOB_SECONDS:g}")
        patch.setenv("ATTN_EXPLORER_SLOTS", "1")
        # Work the server starts on its own when idle (Compare's work ahead, the start-up warm-up of every default
        # link) is not what this test measures: it would resume right after each close.
        patch.setenv("ATTN_EXPLORER_PREFETCH", "0")
        patch.setenv("ATTN_EXPLORER_WARMUP", "0")
        with streamlit_server() as running:
            yield running.url, psutil.Process(running.process.pid)


def script_running(page: object) -> bool:
    state = page.locator("[data-testid='stApp']").get_attribute("data-test-script-state")  # type: ignore[attr-defined]
    return state == "running"


@pytest.mark.parametrize(("link", "button", "must_be_busy"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_closing_the_tab_stops_the_work_within_two_seconds(
    browser: Browser, server: tuple[str, psutil.Process], link: str, button: str | None, must_be_busy: bool
) -> None:
    url, process = server
    wait_idle(process)
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    page.goto(url + link)
    if button is not None:
        page.get_by_role("button", name=button).first.click(timeout=120_000)
    deadline = time.monotonic() + (90 if must_be_busy else 20)
    rate = 0.0
    while rate < BUSY_RATE:
        if time.monotonic() > deadline:
            assert not must_be_busy, f"the server never got busy on {link} (last rate {rate:.2f})"
            break
        rate = cpu_rate(process, 0.5)
    if must_be_busy:
        assert script_running(page), f"{link} finished before the tab closed: make the link heavier"

    context.close()
    closed = time.monotonic()
    rates = []
    while time.monotonic() - closed < STOP_BOUND_S + 3:
        rates.append((round(time.monotonic() - closed, 2), round(cpu_rate(process, 0.5), 2)))
    print(f"{link}: server CPU rate (s after close, CPU s per s): {rates}")
    late = [r for t, r in rates if t - 0.5 >= STOP_BOUND_S]
    assert late, rates
    assert max(late) < IDLE_RATE, f"CPU still busy after the tab of {link} closed: {rates}"


@pytest.mark.parametrize("link", [KERNELS_ISSUE, SPARSE_ISSUE], ids=["kernels", "sparse_lowrank"])
def test_the_issue_links_settle_within_the_job_limit(
    browser: Browser, server: tuple[str, psutil.Process], link: str
) -> None:
    url, process = server
    wait_idle(process)
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    try:
        started = time.monotonic()
        page.goto(url + link)
        page.wait_for_selector("[data-testid='stApp'][data-test-script-state='running']", state="attached")
        page.wait_for_selector(
            "[data-testid='stApp'][data-test-script-state='notRunning']",
            state="attached",
            timeout=(JOB_SECONDS + 15) * 1000,
        )
        seconds = time.monotonic() - started
        text = page.locator("[data-testid='stMain']").inner_text()
        assert "the time limit of one job" not in text, f"{link} ran into the job limit"
        assert seconds < JOB_SECONDS, f"{link} took {seconds:.0f} s"
        # What it refused names the knob and the largest value that fits.
        refusals = [line for line in text.splitlines() if "would need" in line]
        assert all("largest" in line or "lower" in line for line in refusals), refusals
        print(f"{link}: settled in {seconds:.1f} s; refusals: {refusals}")
    finally:
        context.close()
