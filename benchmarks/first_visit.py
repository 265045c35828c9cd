"""A student's first visit, as a person sees it: the README's server, started and warmed up, then each page's default
link opened in fresh browser contexts, timed from navigation start to the first chart drawn with data.

    python -m benchmarks.first_visit --baseline b5cb20b            # that commit and the working tree, one run
    python -m benchmarks.first_visit --contexts 3 --pages Compare,VCC
    python -m benchmarks.first_visit --quick --out /tmp/x           # smoke run: Compare once, no warm-up
    python -m benchmarks.first_visit --cold --baseline main --name first_visit_cold   # nothing cached

Both trees' servers run the README's app command (``deploy/serve.py``), each with an empty result cache of its own,
and are both up while the visits alternate between them (the same minutes of the machine's life). A tree with a
warm-up (``deploy/warmup.py``) is measured once its log says the warm-up finished; a tree without one once its
server is healthy and has been quiet for a few seconds. Every visit is a new browser context (empty browser cache,
no cookies, a new Streamlit session), and nothing else is opened first: no Home visit to warm the server's imports.

What counts as the first chart: a Plotly chart whose figure holds data (a heatmap with cells, a curve with points)
and has been drawn, or, on pages that open on a table, a data grid with at least one row. An empty frame, a chart
with no traces, a placeholder or a progress bar does not count. The time is stamped in the page on the browser's
own clock (``performance.now()``, zero at navigation start). The same visits are also stamped at the first chart
element of any kind, with or without data (the stamp of the older first-chart A/B tables, now in git history).

This is also the A/B tool for a change's first chart: ``--baseline REF`` measures REF's tree in the same run.
``--cold`` measures the first chart with nothing cached: no warm-up, and every visit opens the default link with a
seed of its own (``?seed=1000``, ``1001``, ...; both trees get the same ones), so each visit computes its result.

Results: ``benchmarks/results/first_visit.{json,md}``: per page, the median of the visits and its range per tree,
the ratio, and the target (2.5 s on the 2-core reference machine).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.harness import (
    RESULTS_DIR,
    ROOT,
    VIEWPORT,
    Server,
    app_server,
    baseline_tree,
    chromium_options,
    machine_facts,
    page_paths,
    wait_quiet,
    write_results,
)

TARGET_S = 2.5
VISIT_TIMEOUT_S = 30.0  # a page with no chart by then is recorded as having none (a tree that opens on nothing)
WARMUP_TIMEOUT_S = 900.0
WARMUP_DONE = "warm-up finished"
COLD_FIRST_SEED = 1000  # --cold: seeds no warm-up or earlier visit has computed

# Stamped in the page, in ms since navigation start: the first moment a chart with data was drawn.
FIRST_DATA = """
window.__firstData = null;
const hasData = (trace) => ['z', 'y', 'x', 'values'].some(
    (k) => trace[k] !== undefined && trace[k] !== null && trace[k].length > 0);
const drawn = () => {
  for (const plot of document.querySelectorAll('.js-plotly-plot')) {
    if (plot.querySelector('.main-svg') && Array.isArray(plot._fullData)
        && plot._fullData.some((t) => t.visible !== false && hasData(t))) return true;
  }
  for (const grid of document.querySelectorAll("[data-testid='stDataFrame']")) {
    if (grid.querySelectorAll("[role='row']").length > 1) return true;  // a header row and at least one more
  }
  if (document.querySelector("[data-testid='stTable'] tbody tr")) return true;  // a static table with a row
  return false;
};
// The older first-chart stamp: any chart's svg or any data grid, with or without data in it.
const shell = () => !!document.querySelector(
    "[data-testid='stPlotlyChart'] .main-svg, [data-testid='aePlotlyChart'] .main-svg, [data-testid='stDataFrame']");
window.__firstShell = null;
const check = () => {
  const now = performance.now();
  if (window.__firstShell === null && shell()) window.__firstShell = now;
  if (window.__firstData === null && drawn()) window.__firstData = now;
};
new MutationObserver(check).observe(document, {subtree: true, childList: true, attributes: true});
setInterval(check, 20);  // Plotly fills _fullData after the nodes it adds; a mutation may come first
"""


def visit(browser: Any, url: str) -> tuple[float, float]:
    """Seconds from navigation start to the first chart drawn with data, in a new browser context, and to the
    first chart element of any kind (the older stamp, kept to compare the two); inf where none came within
    ``VISIT_TIMEOUT_S``."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    context = browser.new_context(viewport=VIEWPORT)
    try:
        context.add_init_script(FIRST_DATA)
        page = context.new_page()
        page.goto(url)
        try:
            page.wait_for_function("() => window.__firstData !== null", timeout=VISIT_TIMEOUT_S * 1000, polling=50)
        except PlaywrightTimeout:
            pass
        data, shell = page.evaluate("() => [window.__firstData, window.__firstShell]")
        return tuple(math.inf if t is None else float(t) / 1000 for t in (data, shell))  # type: ignore[return-value]
    finally:
        context.close()


def wait_warm(server: Server, has_warmup: bool) -> float:
    """Seconds until the server is ready to be measured: its warm-up finished, or it has been quiet."""
    start = time.monotonic()
    if has_warmup:
        while WARMUP_DONE not in server.log_tail(1_000_000):
            if time.monotonic() - start > WARMUP_TIMEOUT_S:
                raise TimeoutError(f"no '{WARMUP_DONE}' in the server log within {WARMUP_TIMEOUT_S:.0f} s")
            if server.process.poll() is not None:
                raise RuntimeError("the server stopped during its warm-up:\n" + server.log_tail())
            time.sleep(1.0)
    wait_quiet(server, 60.0, window_s=3.0)
    return time.monotonic() - start


@contextlib.contextmanager
def started(root: Path, *, warmup: bool = True) -> Iterator[tuple[Server, float]]:
    """The README's server from ``root``, once it is ready; ``warmup=False`` turns the start-up warm-up off."""
    has_warmup = warmup and (root / "deploy" / "warmup.py").exists()
    with app_server(root, env={"ATTN_EXPLORER_WARMUP": "1" if warmup else "0"}) as server:
        yield server, wait_warm(server, has_warmup)


def summary(samples: dict[str, dict[str, list[float]]]) -> list[dict[str, Any]]:
    rows = []
    trees = list(samples)
    for page in samples[trees[-1]]:
        row: dict[str, Any] = {"page": page}
        for tree in trees:
            values = samples[tree][page]
            row[tree] = {"median_s": statistics.median(values), "range_s": [min(values), max(values)]}
        if len(trees) == 2:
            before, now = row[trees[0]]["median_s"], row[trees[1]]["median_s"]
            row["ratio"] = now / before if math.isfinite(before) and math.isfinite(now) else math.nan
        rows.append(row)
    return rows


def _s(seconds: float) -> str:
    return f"{seconds:.2f}" if math.isfinite(seconds) else f"no chart in {VISIT_TIMEOUT_S:.0f} s"


def markdown(rows: list[dict[str, Any]], trees: list[str], labels: dict[str, str], contexts: int, command: str,
             ready: dict[str, float], *, warmed: bool = True) -> str:  # fmt: skip
    head = " | ".join(f"{labels[t]} median s | {labels[t]} range s" for t in trees)
    lines = [
        f"`{command}`",
        "",
        f"First visit to each page's default link: the README's server (`deploy/serve.py`), started "
        f"{'and warmed up ' if warmed else 'without its warm-up '}"
        f"({', '.join(f'{labels[t]}: ready {ready[t]:.0f} s after start' for t in trees)}), then {contexts} fresh "
        "browser contexts per page, alternating between the trees' servers; navigation start to the first chart "
        "drawn with data (a table with rows on Paper claims). Medians, with the fastest and slowest visit.",
        "",
        f"| page | {head} |" + (" now / before |" if len(trees) == 2 else "") + " target |",
        "|---|" + "---|---|" * len(trees) + ("---|" if len(trees) == 2 else "") + "---|",
    ]
    for row in rows:
        cells = " | ".join(
            f"{_s(row[t]['median_s'])} | {_s(row[t]['range_s'][0])}–{_s(row[t]['range_s'][1])}" for t in trees
        )
        ratio = (
            f" {row['ratio']:.2f}× |" if "ratio" in row and math.isfinite(row["ratio"]) else " – |" * ("ratio" in row)
        )
        met = "✓" if row[trees[-1]]["median_s"] <= TARGET_S else "✗"
        lines.append(f"| {row['page']} | {cells} |{ratio} ≤ {TARGET_S:g} {met} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", help="a git ref measured beside the working tree (today's main, say)")
    parser.add_argument("--contexts", type=int, default=5, help="fresh browser contexts per page and tree")
    parser.add_argument("--pages", help="comma-separated URL paths (default: every page but Home)")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    parser.add_argument("--name", default="first_visit")
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: 1 context, Compare only (or --pages), no server warm-up"
    )
    parser.add_argument("--cold", action="store_true", help="nothing cached: no warm-up, a new seed for every visit")
    args = parser.parse_args(argv)
    if args.quick:
        args.contexts, args.pages = 1, args.pages or "Compare"
    if args.contexts < 1:
        parser.error("--contexts must be at least 1")
    command = "python -m benchmarks.first_visit " + " ".join(sys.argv[1:] if argv is None else argv)
    pages = page_paths()
    if args.pages:
        wanted = [p.strip() for p in args.pages.split(",") if p.strip()]
        unknown = [p for p in wanted if p not in pages.values()]
        if unknown:
            parser.error(f"--pages: {unknown} are not pages; choose from {list(pages.values())}")
        pages = {label: path for label, path in pages.items() if path in wanted}
    load_start = os.getloadavg()
    trees = ["before", "now"] if args.baseline else ["now"]
    labels = {"before": f"before ({args.baseline})", "now": "now"}
    samples: dict[str, dict[str, list[float]]] = {t: {p: [] for p in pages} for t in trees}
    shells: dict[str, dict[str, list[float]]] = {t: {p: [] for p in pages} for t in trees}
    ready: dict[str, float] = {}
    with contextlib.ExitStack() as stack, sync_playwright() as playwright:
        roots = {"now": ROOT}
        if args.baseline:
            roots["before"] = stack.enter_context(baseline_tree(args.baseline))
        servers: dict[str, Server] = {}
        for tree in trees:  # one after the other: each warm-up has the machine to itself
            warmup = not (args.quick or args.cold)
            servers[tree], ready[tree] = stack.enter_context(started(roots[tree], warmup=warmup))
            print(f"{tree}: ready {ready[tree]:.1f} s after start", flush=True)
        browser = playwright.chromium.launch(**chromium_options())
        fresh_seeds = iter(range(COLD_FIRST_SEED, COLD_FIRST_SEED + 10**6))
        for label, path in pages.items():
            for index in range(args.contexts):
                order = trees if index % 2 == 0 else trees[::-1]
                query = f"?seed={next(fresh_seeds)}" if args.cold else ""
                for tree in order:
                    data, shell = visit(browser, f"{servers[tree].url}/{path}{query}")
                    samples[tree][label].append(data)
                    shells[tree][label].append(shell)
            print(label + ": " + ", ".join(f"{t} {statistics.median(samples[t][label]):.2f} s" for t in trees),
                  flush=True)  # fmt: skip
        browser.close()
    rows = summary(samples)
    result: dict[str, Any] = {
        "command": command,
        "baseline": args.baseline,
        "contexts": args.contexts,
        "cold": args.cold,
        "target_s": TARGET_S,
        "ready_s": ready,
        "rows": rows,
        "samples": samples,
        "first_chart_element_s": shells,  # the same visits, stamped at any chart element (the older stamp)
        "machine": machine_facts(load_start),
    }
    text = markdown(rows, trees, labels, args.contexts, command.strip(), ready, warmed=not (args.quick or args.cold))
    if args.cold:
        text = text.replace("default link:", "default link with a new seed per visit (nothing cached):", 1)
    write_results(args.out, args.name, result, text)
    return result


if __name__ == "__main__":
    main()
