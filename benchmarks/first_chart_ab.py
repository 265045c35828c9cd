"""Cold first charts of two code trees side by side: a git ref and the working tree, fresh servers alternated.

    python -m benchmarks.first_chart_ab --baseline 5273522                  # 8 rounds, every page with a chart
    python -m benchmarks.first_chart_ab --baseline HEAD~1 --rounds 4 --pages Compare,Error_vs_entropy

What is timed is ``benchmarks.ui_timing``'s "first chart (cold)": a page's first visit on a fresh server (empty result
cache), in a new browser context, until its first chart is drawn. ui_timing takes 3 such visits per tree, one tree
after the other, and one first visit varies by several tenths of a second, more than a small change saves. Here each
round starts a fresh server of each tree in turn (the order swapped every round), visits Home and then every page in
the app's order, as ui_timing does, so the two trees' samples come from the same minutes of the machine's life.
Results: ``benchmarks/results/first_chart_ab.{json,md}``: medians, spreads and the ratio now / before per page.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.load import app_server, baseline_tree  # noqa: E402
from benchmarks.ui_timing import TARGETS, machine_facts, open_page, page_paths, save_results  # noqa: E402
from deploy.preload import NO_CHART_AT_OPEN  # noqa: E402
from tests.browser.helpers import CHROMIUM, CHROMIUM_ARGS  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
TARGET_S = TARGETS["first chart (cold)"]


def chart_pages(root: Path) -> dict[str, str]:
    """Label -> URL path of the pages that open on a chart, in the app's order."""
    return {label: path for label, path in page_paths(root).items() if path not in NO_CHART_AT_OPEN}


def one_round(browser: Any, root: Path, pages: dict[str, str]) -> dict[str, float]:
    """A fresh server of ``root``: Home, then each page's first visit in a new browser context."""
    firsts: dict[str, float] = {}
    with app_server(root) as server:
        _, _, _, context = open_page(browser, f"{server.url}/", charts=False)
        context.close()
        for label, path in pages.items():
            first, _, _, context = open_page(browser, f"{server.url}/{path}", charts=True)
            context.close()
            if first is None:
                raise RuntimeError(f"{label}: no chart was drawn")
            firsts[label] = first
    return firsts


def summary(before: dict[str, list[float]], now: dict[str, list[float]]) -> list[dict[str, Any]]:
    rows = []
    for label in now:
        b, n = statistics.median(before[label]), statistics.median(now[label])
        rows.append(
            {
                "page": label,
                "before_median_s": b,
                "now_median_s": n,
                "ratio": n / b,
                "before_range_s": [min(before[label]), max(before[label])],
                "now_range_s": [min(now[label]), max(now[label])],
                "samples": len(now[label]),
            }
        )
    return rows


def markdown(rows: list[dict[str, Any]], baseline: str, rounds: int, command: str) -> str:
    lines = [
        f"`{command}`",
        "",
        f"Cold first chart (fresh server, new browser context, Home visited first), {rounds} rounds, the two trees' "
        "servers alternated; medians, with the fastest and slowest visit.",
        "",
        f"| page | before ({baseline}) median s | now median s | now / before | before range s | now range s "
        f"| target s |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        met = "✓" if r["now_median_s"] <= TARGET_S else "✗"
        lines.append(
            f"| {r['page']} | {r['before_median_s']:.2f} | {r['now_median_s']:.2f} | {r['ratio']:.2f}× "
            f"| {r['before_range_s'][0]:.2f}–{r['before_range_s'][1]:.2f} "
            f"| {r['now_range_s'][0]:.2f}–{r['now_range_s'][1]:.2f} | ≤ {TARGET_S:g} {met} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", required=True, help="the git ref to compare the working tree with")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--pages", help="comma-separated URL paths (default: every page that opens on a chart)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--name", default="first_chart_ab")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    command = "python -m benchmarks.first_chart_ab " + " ".join(sys.argv[1:] if argv is None else argv)
    pages = chart_pages(ROOT)
    if args.pages:
        wanted = [p.strip() for p in args.pages.split(",") if p.strip()]
        unknown = [p for p in wanted if p not in pages.values()]
        if unknown:
            parser.error(f"--pages: {unknown} are not pages that open on a chart; choose from {list(pages.values())}")
        pages = {label: path for label, path in pages.items() if path in wanted}
    load_start = os.getloadavg()
    samples: dict[str, dict[str, list[float]]] = {"before": {p: [] for p in pages}, "now": {p: [] for p in pages}}
    with baseline_tree(args.baseline) as tree, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=list(CHROMIUM_ARGS))
        roots = {"before": tree, "now": ROOT}
        for round_index in range(args.rounds):
            order = ("before", "now") if round_index % 2 == 0 else ("now", "before")
            for label in order:
                firsts = one_round(browser, roots[label], pages)
                for page_label, seconds in firsts.items():
                    samples[label][page_label].append(seconds)
                print(
                    f"round {round_index + 1} {label}: " + ", ".join(f"{p} {s:.2f}" for p, s in firsts.items()),
                    flush=True,
                )
        browser.close()
    rows = summary(samples["before"], samples["now"])
    result = {
        "command": command,
        "baseline": args.baseline,
        "rounds": args.rounds,
        "target_s": TARGET_S,
        "rows": rows,
        "samples": samples,
        "machine": machine_facts(load_start),
    }
    save_results(args.out, args.name, result, markdown(rows, args.baseline, args.rounds, command.strip()))
    return result


if __name__ == "__main__":
    main()
