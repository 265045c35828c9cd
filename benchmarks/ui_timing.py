"""Browser-side render and update times of the explorer pages (headless Chromium via Playwright, fresh server).

    python -m benchmarks.ui_timing            # defaults (n = 512, CPU); prints a table, writes JSON
    python -m benchmarks.ui_timing --quick    # n = 128, fewer repeats (a smoke run)

What is timed (wall clock in the test process, from the browser action to a finished render):
- open (cold): the first visit of a page on a fresh server, so it includes computing every result;
- open (warm): the same deep link in a new tab (a new Streamlit session) of the same browser, with the
  server's caches filled and plotly.js in the browser cache;
- slider (cold / warm): one ArrowRight on the temperature slider (a value never computed / already cached),
  until the script has finished and every Plotly chart is drawn again;
- knob: unlink Performer from the budget and change its feature count (only that method recomputes).

"Rendered" means: the script run is over ([data-test-script-state='notRunning']) and every
[data-testid='stPlotlyChart'] holds a drawn plot (.main-svg). Results: benchmarks/results/ui_timing.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.browser.helpers import CHROMIUM, CHROMIUM_ARGS, streamlit_server  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "ui_timing.json"
VIEWPORT = {"width": 1400, "height": 1000}
TIMEOUT_MS = 180_000

CHARTS_DRAWN = """() => {
  const charts = Array.from(document.querySelectorAll("[data-testid='stPlotlyChart']"));
  return charts.length > 0 && charts.every(c => c.querySelector('.main-svg'));
}"""


def wait_rendered(page: Any, *, expect_charts: bool = True) -> None:
    page.wait_for_selector(
        "[data-testid='stApp'][data-test-connection-state='CONNECTED']", state="attached", timeout=TIMEOUT_MS
    )
    page.wait_for_selector(
        "[data-testid='stApp'][data-test-script-state='notRunning']", state="attached", timeout=TIMEOUT_MS
    )
    if expect_charts:
        page.wait_for_function(CHARTS_DRAWN, timeout=TIMEOUT_MS)
    if page.locator("[data-testid='stException']").count():
        raise RuntimeError(f"exception on {page.url}: {page.locator('[data-testid=stException]').first.inner_text()}")


def wait_rerun(page: Any, before: list[str]) -> None:
    """After an interaction: wait for the run to start and finish, and for the metrics to change."""
    deadline = time.monotonic() + TIMEOUT_MS / 1000
    # The run starts after the widget's debounce; catch either the running state or a changed metric.
    while time.monotonic() < deadline:
        state = page.locator("[data-testid='stApp']").get_attribute("data-test-script-state")
        if state == "running" or metrics(page) != before:
            break
        page.wait_for_timeout(20)
    wait_rendered(page)
    while metrics(page) == before and time.monotonic() < deadline:
        page.wait_for_timeout(20)


def metrics(page: Any) -> list[str]:
    return page.locator("[data-testid='stMetricValue']").all_inner_texts()


def open_page(browser: Any, url: str, charts: bool = True, context: Any = None) -> tuple[float, Any, Any]:
    """Open url in a new tab (a new Streamlit session); a new browser context unless one is given."""
    context = context or browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    start = time.perf_counter()
    page.goto(url)
    page.wait_for_timeout(50)
    wait_rendered(page, expect_charts=charts)
    return time.perf_counter() - start, page, context


def press_slider(page: Any, name: str, key: str) -> float:
    before = metrics(page)
    slider = page.get_by_role("slider", name=name)
    slider.focus()
    start = time.perf_counter()
    page.keyboard.press(key)
    wait_rerun(page, before)
    return time.perf_counter() - start


def run(quick: bool) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    n = 128 if quick else 512
    repeats = 1 if quick else 3
    pages = {
        "Home": "",
        "Compare": "Compare",
        "Sparse + low rank": "Sparse_plus_low_rank",
        "Error vs entropy": "Error_vs_entropy",
        "Regime map": "Regime_map",
    }
    query = f"?n={n}" if quick else ""
    rows: list[dict[str, Any]] = []
    with streamlit_server() as server, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=list(CHROMIUM_ARGS))
        for label, path in pages.items():
            url = f"{server.url}/{path}{query}"
            charts = bool(path)  # the home page has no charts
            cold, page, context = open_page(browser, url, charts)
            page.close()
            warm = []
            for _ in range(repeats):
                # Same browser context (plotly.js already in the browser cache, as for a returning user),
                # new tab, so a new Streamlit session that finds the server's caches filled.
                seconds, page, _ = open_page(browser, url, charts, context=context)
                warm.append(seconds)
                page.close()
            context.close()
            rows.append({"page": label, "what": "open (cold: first visit, computes)", "seconds": [cold]})
            rows.append({"page": label, "what": "open (warm: cached results)", "seconds": warm})
            print(f"{label}: cold {cold:.2f} s, warm {statistics.median(warm):.2f} s", flush=True)

        # Slider moves on Compare at the defaults.
        _, page, context = open_page(browser, f"{server.url}/Compare{query}")
        # Right from tau = 0.2 reaches temperatures never computed (cold); left walks back over cached ones.
        cold_moves = [press_slider(page, "Temperature τ", "ArrowRight") for _ in range(repeats)]
        warm_moves = [press_slider(page, "Temperature τ", "ArrowLeft") for _ in range(repeats)]
        rows.append({"page": "Compare", "what": "temperature slider (cold: new value)", "seconds": cold_moves})
        rows.append({"page": "Compare", "what": "temperature slider (warm: cached value)", "seconds": warm_moves})
        print(f"slider: cold {statistics.median(cold_moves):.2f} s, warm {statistics.median(warm_moves):.2f} s")

        # A method knob: only Performer recomputes.
        knob = []
        page.get_by_text("Method knobs").first.click()
        page.get_by_role("tab", name="Performer (FAVOR+)").click()
        before = metrics(page)
        page.get_by_text("Linked to budget").first.click()  # the Performer tab comes first
        wait_rerun(page, before)
        for value in ("20", "24", "28")[:repeats]:
            box = page.get_by_label("features", exact=True).first
            before = metrics(page)
            start = time.perf_counter()
            box.fill(value)
            box.press("Enter")
            wait_rerun(page, before)
            knob.append(time.perf_counter() - start)
        rows.append({"page": "Compare", "what": "Performer features knob (recomputes one method)", "seconds": knob})
        print(f"knob: {statistics.median(knob):.2f} s")
        context.close()
        browser.close()
    return {
        "settings": {
            "n": n,
            "defaults": "n = 512, d = 64, 4 heads, clustered, tau = 0.2, budget 1/8" if not quick else f"n = {n}",
            "repeats": repeats,
        },
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "load_average_at_end": os.getloadavg(),
            "python": platform.python_version(),
        },
        "rows": [{**row, "median_s": statistics.median(row["seconds"])} for row in rows],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="n = 128 and one repeat")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    load_start = os.getloadavg()
    result = run(args.quick)
    result["machine"]["load_average_at_start"] = load_start
    print()
    print(f"{'page':<20} {'what':<52} {'median s':>9}  all")
    for row in result["rows"]:
        every = ", ".join(f"{s:.2f}" for s in row["seconds"])
        print(f"{row['page']:<20} {row['what']:<52} {row['median_s']:>9.2f}  [{every}]")
    print(f"load average (1, 5, 15 min) at start {load_start}, at end {result['machine']['load_average_at_end']}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(f"wrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")


if __name__ == "__main__":
    main()
