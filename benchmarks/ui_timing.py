"""Browser-side page and interaction times (headless Chromium via Playwright, a fresh server per code tree).

    python -m benchmarks.ui_timing --baseline aa2bdd5   # that commit and the working tree, side by side, one run
    python -m benchmarks.ui_timing --quick              # n = 128, one repeat, working tree only (a smoke run)

For each tree a fresh server (empty result cache) runs the README's app command. What is timed (wall clock in the
driver, from the browser action to the finished render; medians over the repeats, whose count the table shows):
- first chart (cold): the first visit of a page on a fresh server, in a new browser context (empty browser cache),
  until its first chart (Plotly, Vega-Lite, an image, or a table on pages without charts) is drawn, as stamped in
  the page by a MutationObserver; repeated on ``--cold-rounds`` fresh servers (default 3), since one first visit
  varies by several tenths of a second;
- open (cold): the same visit until the script run is over (Streamlit's ``script_finished`` message) and every
  Plotly chart is drawn, including chart components that mount after the run has ended;
- open (warm): the same link in a new tab (a new Streamlit session), with the server's caches filled;
- Compare's temperature slider, five ArrowRight (values not shown before; the server may have computed them ahead,
  ui/prefetch.py), then five ArrowLeft (cached values); and five ArrowRight on a server with nothing computed ahead
  (``ATTN_EXPLORER_PREFETCH=0``);
- Compare's Performer feature-count knob, five values (only that method recomputes);
- the temperature scrubber (``?scrub=1``), where the tree has one: a click on the next step of its slider until the
  heatmap's frame has changed in the browser (client-side: no server round trip).

Results: ``benchmarks/results/ui_timing.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.load import app_server, baseline_tree  # noqa: E402
from tests.browser.helpers import CHROMIUM, CHROMIUM_ARGS, on_script_finished  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
VIEWPORT = {"width": 1400, "height": 1000}
TIMEOUT_MS = 240_000
# The targets on this 2-core CPU (seconds).
TARGETS = {
    "first chart (cold)": 2.5,
    "temperature slider (cold: new value)": 0.7,
    "temperature slider (new value, nothing done ahead)": 0.7,
    "Performer features knob": 0.5,
    "scrubber step (client-side)": 0.2,
}

# Plotly figures: the served app's component (ui/plotly_chart.py), or Streamlit's chart (`streamlit run app.py`).
PLOTLY_CHARTS = "[data-testid='stPlotlyChart'], [data-testid='aePlotlyChart']"
FIRST_CHART = """() => !!document.querySelector(
  "[data-testid='stPlotlyChart'] .main-svg, [data-testid='aePlotlyChart'] .main-svg, " +
  "[data-testid='stVegaLiteChart'] svg, " +
  "[data-testid='stVegaLiteChart'] canvas, [data-testid='stImage'] img, [data-testid='stDataFrame']")"""

CHARTS_DRAWN = f"""() => {{
  const charts = Array.from(document.querySelectorAll("{PLOTLY_CHARTS}"));
  return charts.every(c => c.querySelector('.main-svg'));
}}"""

SCRUBBER_TITLE = """() => {
  const plot = [...document.querySelectorAll('.js-plotly-plot')].find(
      p => p._transitionData && p._transitionData._frames && p._transitionData._frames.length);
  return plot ? plot.layout.title.text : null;
}"""


def page_paths(root: Path) -> dict[str, str]:
    """Label -> URL path of every page of the tree at ``root`` (Streamlit's default: the file name less its number)."""
    paths = {"Home": ""}
    for script in sorted((root / "pages").glob("*.py"), key=lambda p: int(p.name.split("_")[0])):
        name = re.sub(r"^\d+_", "", script.stem)
        paths[name.replace("_", " ")] = name
    return paths


def wait_rendered(page: Any, *, charts: bool = True) -> None:
    page.wait_for_selector(
        "[data-testid='stApp'][data-test-connection-state='CONNECTED']", state="attached", timeout=TIMEOUT_MS
    )
    page.wait_for_selector(
        "[data-testid='stApp'][data-test-script-state='notRunning']", state="attached", timeout=TIMEOUT_MS
    )
    if charts:
        page.wait_for_function(CHARTS_DRAWN, timeout=TIMEOUT_MS)
    if page.locator("[data-testid='stException']").count():
        raise RuntimeError(f"exception on {page.url}: {page.locator('[data-testid=stException]').first.inner_text()}")


def metrics(page: Any) -> list[str]:
    return page.locator("[data-testid='stMetricValue']").all_inner_texts()


def wait_rerun(page: Any, before: list[str]) -> None:
    """After an interaction: wait for the run to start and finish, and for the metrics to change."""
    deadline = time.monotonic() + TIMEOUT_MS / 1000
    while time.monotonic() < deadline:  # the run starts after the widget's debounce
        state = page.locator("[data-testid='stApp']").get_attribute("data-test-script-state")
        if state == "running" or metrics(page) != before:
            break
        page.wait_for_timeout(10)
    wait_rendered(page)
    while metrics(page) == before and time.monotonic() < deadline:
        page.wait_for_timeout(10)


# Stamped in the page (ms since navigation): when the first chart was drawn, and when every chart slot last became
# drawn. A MutationObserver sees a chart the moment it appears, even one whose component mounts after the run ended.
STAMPS = f"""
window.__stamps = {{first: null, all: null, changed: 0}};
const firstChart = {FIRST_CHART};
const chartsDrawn = {CHARTS_DRAWN};
new MutationObserver(() => {{
  const now = performance.now();
  if (window.__stamps.first === null && firstChart()) window.__stamps.first = now;
  if (document.querySelector("{PLOTLY_CHARTS}") && chartsDrawn()) window.__stamps.all = now;
}}).observe(document, {{subtree: true, childList: true}});
// The last change inside a Plotly chart or a metric value: a chart updated in place (Plotly.react) keeps its node, so
// an interaction's end is when the picture and the numbers stop changing, for either kind of chart.
new MutationObserver((records) => {{
  for (const record of records) {{
    const node = record.target.nodeType === 1 ? record.target : record.target.parentElement;
    if (node && node.closest(".js-plotly-plot, [data-testid='stMetricValue']")) {{
      window.__stamps.changed = performance.now();
      return;
    }}
  }}
}}).observe(document, {{subtree: true, childList: true, attributes: true, characterData: true}});
"""
CHART_SLOTS = f"{PLOTLY_CHARTS}, [data-testid='stVegaLiteChart'], [data-testid='stDataFrame']"
SETTLE_S = 1.5  # after the run: a chart component that mounts later than this is not waited for


def record_run_endings(page: Any) -> list[float]:
    """perf_counter times at which the page received Streamlit's ``script_finished`` message (filled as they come)."""
    endings: list[float] = []
    on_script_finished(page, lambda status: endings.append(time.perf_counter()))
    return endings


def open_page(browser: Any, url: str, *, charts: bool, context: Any = None) -> tuple[float | None, float, Any, Any]:
    """(seconds to the first drawn chart or None, seconds to a finished render, page, context).

    The run's end is Streamlit's own ``script_finished`` message; the chart times are stamped in the page. Chart
    components load lazily and may mount after the run has ended, so the page is watched until no new chart has
    appeared for ``SETTLE_S``. A finished render: the run is over and every chart is drawn."""
    if context is None:
        context = browser.new_context(viewport=VIEWPORT)
        context.add_init_script(STAMPS)
    page = context.new_page()
    endings = record_run_endings(page)
    start = time.perf_counter()
    page.goto(url)
    deadline = start + TIMEOUT_MS / 1000
    while not endings:
        if time.perf_counter() > deadline:
            raise TimeoutError(f"no finished run on {url} within {TIMEOUT_MS / 1000:.0f} s")
        page.wait_for_timeout(10)
    run_end = endings[0] - start
    wait_rendered(page, charts=charts)
    seen = -1
    while page.locator(CHART_SLOTS).count() != seen:  # wait out charts that mount after the run
        seen = page.locator(CHART_SLOTS).count()
        page.wait_for_timeout(SETTLE_S * 1000)
        wait_rendered(page, charts=charts)
    stamps = page.evaluate("() => window.__stamps")
    offset = page.evaluate("() => performance.timeOrigin") / 1000 - (time.time() - (time.perf_counter() - start))
    first = stamps["first"] / 1000 + offset if charts and stamps["first"] is not None else None
    drawn = stamps["all"] / 1000 + offset if charts and stamps["all"] is not None else 0.0
    return first, max(run_end, drawn, first or 0.0), page, context


QUIET_S = 0.6  # an interaction has ended once its charts and metrics have not changed for this long


def timed_interaction(page: Any, act: Any) -> float:
    """Seconds from ``act()`` to the last change of a chart or metric it caused (page clock): after the run has
    finished and the metrics have changed, the charts are watched until they stay unchanged for ``QUIET_S``."""
    before = metrics(page)
    start = page.evaluate("() => performance.now()")
    act()
    wait_rerun(page, before)
    while page.evaluate("() => performance.now() - window.__stamps.changed") < QUIET_S * 1000:
        page.wait_for_timeout(50)
    return float(page.evaluate("() => window.__stamps.changed") - start) / 1000


def press_slider(page: Any, name: str, key: str) -> float:
    page.get_by_role("slider", name=name).focus()
    return timed_interaction(page, lambda: page.keyboard.press(key))


def scrubber_steps(browser: Any, url: str, repeats: int) -> list[float] | None:
    """Seconds from a click on the scrubber's next step to the changed frame, or None where there is no scrubber."""
    _, _, page, context = open_page(browser, url, charts=True)
    try:
        if page.evaluate(SCRUBBER_TITLE) is None:
            return None
        scrubber = page.locator(".js-plotly-plot").filter(has=page.locator(".slider-container"))
        scrubber.locator(".slider-rail-rect").first.scroll_into_view_if_needed()
        rail = scrubber.locator(".slider-rail-rect").first.bounding_box()
        steps = scrubber.locator(".slider-label-group, .slider-step-group").count()
        assert rail is not None
        count = max(page.evaluate(
            "() => [...document.querySelectorAll('.js-plotly-plot')].find(p => p._transitionData"
            " && p._transitionData._frames && p._transitionData._frames.length)._transitionData._frames.length"
        ), steps, 2)  # fmt: skip
        y = rail["y"] + rail["height"] / 2
        seconds = []
        for i in range(repeats):
            step = i % (count - 1)  # walk left to right over the grid
            x = rail["x"] + rail["width"] * (step + 0.5) / count
            title = page.evaluate(SCRUBBER_TITLE)
            start = time.perf_counter()
            page.mouse.click(x, y)
            page.wait_for_function(f"({SCRUBBER_TITLE})() !== {json.dumps(title)}", timeout=10_000, polling="raf")
            seconds.append(time.perf_counter() - start)
        return seconds
    finally:
        context.close()


def interactions(browser: Any, server_url: str, query: str, repeats: int, add: Any) -> None:
    """Compare's temperature slider (new values, then cached ones), its Performer knob and the scrubber."""
    _, _, page, context = open_page(browser, f"{server_url}/Compare{query}", charts=True)
    # Right from the default tau reaches temperatures never computed; left walks back over cached ones.
    cold_moves = [press_slider(page, "Temperature τ", "ArrowRight") for _ in range(repeats)]
    warm_moves = [press_slider(page, "Temperature τ", "ArrowLeft") for _ in range(repeats)]
    add("Compare", "temperature slider (cold: new value)", cold_moves)
    add("Compare", "temperature slider (warm: cached value)", warm_moves)
    knob = []
    page.get_by_text("Method knobs").first.click()
    page.get_by_role("tab", name="Performer (FAVOR+)").click()
    before = metrics(page)
    page.get_by_text("Linked to budget").first.click()  # the Performer tab comes first
    wait_rerun(page, before)
    for value in ("20", "24", "28", "32", "36", "40", "44")[:repeats]:
        box = page.get_by_label("features", exact=True).first

        def enter(box: Any = box, value: str = value) -> None:
            box.fill(value)
            box.press("Enter")

        knob.append(timed_interaction(page, enter))
    add("Compare", "Performer features knob", knob)
    context.close()

    sep = "&" if query else "?"
    steps = scrubber_steps(browser, f"{server_url}/Compare{query}{sep}scrub=1", max(repeats, 5))
    if steps is not None:
        add("Compare", "scrubber step (client-side)", steps)


def machine_facts(load_start: tuple[float, float, float]) -> dict[str, Any]:
    """The machine a browser benchmark ran on, with the load average at its start and now."""
    return {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "load_average_at_start": load_start,
        "load_average_at_end": os.getloadavg(),
    }


def off_on_table(rows: list[dict[str, Any]], name_key: str, headers: tuple[str, str, str, str]) -> list[str]:
    """The markdown table of an A/B benchmark: one row per ``row[name_key]`` with its off and on medians and their
    ratio (``off_median_s``, ``on_median_s``, ``ratio``); ``headers``: the four column titles."""
    return [
        "| " + " | ".join(headers) + " |",
        "|---|---|---|---|",
        *(f"| {r[name_key]} | {r['off_median_s']:.2f} | {r['on_median_s']:.2f} | {r['ratio']:.2f}× |" for r in rows),
    ]


def save_results(out: Path, name: str, result: dict[str, Any], text: str) -> None:
    """Print the markdown table and write ``<name>.json`` and ``<name>.md`` under ``out``."""
    print()
    print(text)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(result, indent=2))
    (out / f"{name}.md").write_text(text)
    print(f"wrote {out / name}.json and .md")


def run_tree(root: Path, label: str, quick: bool, cold_rounds: int = 1) -> list[dict[str, Any]]:
    """Every page's cold and warm open, then the interactions. The cold opens are repeated on ``cold_rounds``
    fresh servers (each with an empty result cache), so their medians are over that many first visits."""
    from playwright.sync_api import sync_playwright

    n = 128 if quick else 512
    warm_repeats = 1 if quick else 3
    moves = 1 if quick else 5
    query = f"?n={n}" if quick else ""
    found: dict[tuple[str, str], list[float]] = {}

    def add(page_label: str, what: str, seconds: list[float]) -> None:
        found.setdefault((page_label, what), []).extend(seconds)

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=list(CHROMIUM_ARGS))
        for round_index in range(cold_rounds):
            with app_server(root) as server:
                for page_label, path in page_paths(root).items():
                    url = f"{server.url}/{path}{query}"
                    charts = bool(path)  # the home page has no charts
                    first, cold, page, context = open_page(browser, url, charts=charts)
                    page.close()
                    warm = []
                    for _ in range(warm_repeats if round_index == 0 else 0):  # a new tab: a new session, filled caches
                        _, seconds, page, _ = open_page(browser, url, charts=charts, context=context)
                        warm.append(seconds)
                        page.close()
                    context.close()
                    if first is not None:
                        add(page_label, "first chart (cold)", [first])
                    add(page_label, "open (cold)", [cold])
                    if warm:
                        add(page_label, "open (warm)", warm)
                    print(
                        f"[{label}, round {round_index + 1}] {page_label}: first chart {first}, cold {cold:.2f} s"
                        + (f", warm {statistics.median(warm):.2f} s" if warm else ""),
                        flush=True,
                    )
                if round_index == 0:
                    interactions(browser, server.url, query, moves, add)
        # The same new temperatures with nothing computed ahead (ui/prefetch.py off; older trees have none).
        with app_server(root, env={"ATTN_EXPLORER_PREFETCH": "0"}) as server:
            _, _, page, context = open_page(browser, f"{server.url}/Compare{query}", charts=True)
            fresh = [press_slider(page, "Temperature τ", "ArrowRight") for _ in range(moves)]
            add("Compare", "temperature slider (new value, nothing done ahead)", fresh)
            context.close()
        browser.close()
    return [
        {"tree": label, "page": page, "what": what, "seconds": seconds, "median_s": statistics.median(seconds)}
        for (page, what), seconds in found.items()
    ]


def table(rows: list[dict[str, Any]], labels: list[str]) -> list[dict[str, Any]]:
    """One line per (page, what): the median of each tree, the ratio last/first, and the target."""
    keyed: dict[tuple[str, str], dict[str, Any]] = {}
    for row in rows:
        line = keyed.setdefault((row["page"], row["what"]), {"page": row["page"], "what": row["what"]})
        line[row["tree"]] = row["median_s"]
        line[f"{row['tree']} samples"] = len(row["seconds"])
    for line in keyed.values():
        first, last = line.get(labels[0]), line.get(labels[-1])
        line["ratio"] = last / first if len(labels) > 1 and first and last is not None else None
        line["target_s"] = TARGETS.get(line["what"])
    return list(keyed.values())


def markdown(lines: list[dict[str, Any]], labels: list[str], command: str) -> str:
    def fmt(value: Any) -> str:
        return "—" if value is None else f"{value:.2f}"

    head = ["page", "what", "samples", *[f"{label} median s" for label in labels]]
    if len(labels) > 1:
        head.append("now / before")
    head.append("target s")
    out = [f"`{command}`", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for line in lines:
        counts = sorted({line.get(f"{label} samples") for label in labels} - {None})
        samples = " / ".join(str(c) for c in counts)
        cells = [line["page"], line["what"], samples, *[fmt(line.get(label)) for label in labels]]
        if len(labels) > 1:
            cells.append("—" if line["ratio"] is None else f"{line['ratio']:.2f}×")
        target = line["target_s"]
        now = line.get(labels[-1])
        cells.append("—" if target is None else f"≤ {target:g} " + ("✓" if now is not None and now <= target else "✗"))
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="n = 128 and one repeat")
    parser.add_argument(
        "--cold-rounds", type=int, help="fresh servers whose first visits are timed (default 3; 1 with --quick)"
    )
    parser.add_argument("--baseline", help="a git ref timed first, in the same run, e.g. aa2bdd5")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--name", default="ui_timing", help="file name of the results (without suffix)")
    args = parser.parse_args(argv)
    if args.cold_rounds is None:
        args.cold_rounds = 1 if args.quick else 3
    command = "python -m benchmarks.ui_timing " + " ".join(sys.argv[1:] if argv is None else argv)
    load_start = os.getloadavg()
    rows: list[dict[str, Any]] = []
    labels = []
    if args.baseline:
        label = f"before ({args.baseline})"
        with baseline_tree(args.baseline) as tree:
            rows += run_tree(tree, label, args.quick, args.cold_rounds)
        labels.append(label)
    rows += run_tree(ROOT, "now", args.quick, args.cold_rounds)
    labels.append("now")
    lines = table(rows, labels)
    result = {
        "command": command.strip(),
        "settings": {
            "n": 128 if args.quick else 512,
            "warm_repeats": 1 if args.quick else 3,
            "moves": 1 if args.quick else 5,
            "cold_rounds": args.cold_rounds,
            "viewport": VIEWPORT,
        },
        "machine": machine_facts(load_start),
        "trees": labels,
        "rows": rows,
        "table": lines,
    }
    save_results(args.out, args.name, result, markdown(lines, labels, result["command"]))
    print(f"load average (1, 5, 15 min) at start {load_start}, at end {result['machine']['load_average_at_end']}")
    return result


if __name__ == "__main__":
    main()
