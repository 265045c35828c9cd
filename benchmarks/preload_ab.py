"""The app's own chart path on and off, side by side: first drawn chart of a page opened in a new browser context
(empty browser cache), served by ``streamlit run app.py`` (off: ``st.plotly_chart`` with Streamlit's whole plotly.js,
fetched when the first chart arrives) and ``streamlit run deploy/serve.py`` (on: the component of
``ui/plotly_chart.py`` with Plotly's cartesian bundle, requested from the page head by ``deploy/preload.py``), same
tree, both servers up at once, visits alternated.

    python -m benchmarks.preload_ab                       # Compare, Sparse + low rank, Error vs entropy; 5 repeats
    python -m benchmarks.preload_ab --pages VCC Kernels --repeats 3

Each page is opened once on each server first, so both have filled result caches: what is left is the browser's
work (Streamlit's boot, the Plotly chunk, drawing). Results: ``benchmarks/results/preload_ab.{json,md}``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.ui_timing import FIRST_CHART, STAMPS, TIMEOUT_MS, VIEWPORT, machine_facts, off_on_table, save_results  # noqa: E402
from deploy.processes import app_server  # noqa: E402
from tests.browser.helpers import CHROMIUM, CHROMIUM_ARGS  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
SERVERS = {"off (app.py)": "app.py", "on (deploy/serve.py)": "deploy/serve.py"}


def first_chart(browser: Any, url: str) -> float:
    """Seconds from navigation to the first drawn chart, stamped in the page."""
    context = browser.new_context(viewport=VIEWPORT)
    context.add_init_script(STAMPS)
    try:
        page = context.new_page()
        page.goto(url)
        page.wait_for_function(FIRST_CHART, timeout=TIMEOUT_MS, polling="raf")
        page.wait_for_function("() => window.__stamps.first !== null", timeout=TIMEOUT_MS)
        return float(page.evaluate("() => window.__stamps.first")) / 1000
    finally:
        context.close()


def main(argv: list[str] | None = None) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", nargs="+", default=["Compare", "Sparse_plus_low_rank", "Error_vs_entropy"])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    command = "python -m benchmarks.preload_ab " + " ".join(sys.argv[1:] if argv is None else argv)
    seconds: dict[str, dict[str, list[float]]] = {page: {label: [] for label in SERVERS} for page in args.pages}
    load_start = os.getloadavg()
    with sync_playwright() as playwright, app_server(ROOT, script="app.py") as off:
        with app_server(ROOT, script="deploy/serve.py") as on:
            urls = {"off (app.py)": off.url, "on (deploy/serve.py)": on.url}
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=list(CHROMIUM_ARGS))
            for page in args.pages:  # fill both servers' result caches
                for url in urls.values():
                    first_chart(browser, f"{url}/{page}")
                    time.sleep(2)
            for _ in range(args.repeats):
                for page in args.pages:
                    for label, url in urls.items():
                        seconds[page][label].append(first_chart(browser, f"{url}/{page}"))
                        print(f"{page} {label}: {seconds[page][label][-1]:.2f} s", flush=True)
            browser.close()
    rows = []
    for page, by_server in seconds.items():
        off_s, on_s = (statistics.median(by_server[label]) for label in SERVERS)
        rows.append({"page": page, "off_median_s": off_s, "on_median_s": on_s, "ratio": on_s / off_s, **by_server})
    lines = [
        f"`{command.strip()}`",
        "",
        f"First drawn chart, new browser context, filled server caches; medians of {args.repeats} alternated visits.",
        "",
        *off_on_table(rows, "page", ("page", "off (app.py) median s", "on (deploy/serve.py) median s", "on / off")),
    ]
    text = "\n".join(lines) + "\n"
    result = {
        "command": command.strip(),
        "repeats": args.repeats,
        "machine": machine_facts(load_start),
        "rows": rows,
    }
    save_results(args.out, "preload_ab", result, text)
    return result


if __name__ == "__main__":
    main()
