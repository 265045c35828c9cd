"""Work done ahead (ui/prefetch.py) on and off, side by side: Compare's temperature slider stepped to values not
shown before, with a pause between steps (a teacher who moves the slider, then talks), on two servers of the same
tree started with ``ATTN_EXPLORER_PREFETCH=1`` and ``=0`` (each with an empty result cache of its own), steps
alternated between them.

    python -m benchmarks.prefetch_ab                 # 5 rounds of 4 steps, 1.5 s pause
    python -m benchmarks.prefetch_ab --pause 0.2     # steps back to back: little time to work ahead

Timed from the key press (ArrowRight on the focused slider): the new metric values on screen, the end of the run
(Streamlit's ``script_finished`` message) and every chart drawn. Each round opens Compare in a new browser context
and takes ``--steps`` steps to the right from a start temperature that moves by ``--steps + 1`` grid values per round,
so no step lands on a value either server has computed. Results: ``benchmarks/results/prefetch_ab.{json,md}``.
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

from benchmarks.load import app_server  # noqa: E402
from benchmarks.ui_timing import CHARTS_DRAWN, TIMEOUT_MS, VIEWPORT, machine_facts, metrics, off_on_table, save_results  # noqa: E402
from tests.browser.helpers import CHROMIUM, CHROMIUM_ARGS, on_script_finished  # noqa: E402
from ui.sidebar import TAU_OPTIONS  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
LABELS = ("on", "off")
WHAT = ("metrics shown", "run finished", "charts drawn")


def step(page: Any, endings: list[float]) -> dict[str, float]:
    """One ArrowRight on the temperature slider: seconds to new metrics, to the run's end, to every chart drawn."""
    before = metrics(page)
    page.get_by_role("slider", name="Temperature τ").focus()
    count = len(endings)
    start = time.perf_counter()
    page.keyboard.press("ArrowRight")
    deadline = start + TIMEOUT_MS / 1000
    shown = None
    while (shown is None or len(endings) == count) and time.perf_counter() < deadline:
        if shown is None and metrics(page) != before:
            shown = time.perf_counter() - start
        page.wait_for_timeout(5)
    finished = endings[count] - start
    page.wait_for_selector("[data-testid='stApp'][data-test-script-state='notRunning']", state="attached")
    page.wait_for_function(CHARTS_DRAWN, timeout=TIMEOUT_MS)
    return {"metrics shown": shown or finished, "run finished": finished, "charts drawn": time.perf_counter() - start}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--pause", type=float, default=1.5, help="seconds between steps (default 1.5)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    command = "python -m benchmarks.prefetch_ab " + " ".join(sys.argv[1:] if argv is None else argv)
    need = args.rounds * (args.steps + 1)
    if need > len(TAU_OPTIONS):
        parser.error(f"--rounds x (--steps + 1) = {need} exceeds the {len(TAU_OPTIONS)} temperatures of the grid")
    seconds: dict[str, dict[str, list[float]]] = {label: {what: [] for what in WHAT} for label in LABELS}
    load_start = os.getloadavg()
    with (
        sync_playwright() as playwright,
        app_server(ROOT, env={"ATTN_EXPLORER_PREFETCH": "1"}) as on,
        app_server(ROOT, env={"ATTN_EXPLORER_PREFETCH": "0"}) as off,
    ):
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=list(CHROMIUM_ARGS))
        urls = {"on": on.url, "off": off.url}
        for round_index in range(args.rounds):
            tau = TAU_OPTIONS[round_index * (args.steps + 1)]
            pages = {}
            for label, url in urls.items():
                context = browser.new_context(viewport=VIEWPORT)
                page = context.new_page()
                endings: list[float] = []
                on_script_finished(page, lambda status, e=endings: e.append(time.perf_counter()))
                page.goto(f"{url}/Compare?tau={tau:g}")
                page.wait_for_selector(
                    "[data-testid='stApp'][data-test-script-state='notRunning']", state="attached", timeout=TIMEOUT_MS
                )
                page.wait_for_function(CHARTS_DRAWN, timeout=TIMEOUT_MS)
                pages[label] = (page, endings, context)
            time.sleep(args.pause)
            for _ in range(args.steps):
                for label in LABELS:
                    page, endings, _ = pages[label]
                    got = step(page, endings)
                    for what in WHAT:
                        seconds[label][what].append(got[what])
                    print(f"round {round_index + 1} {label}: " + ", ".join(f"{w} {got[w]:.2f} s" for w in WHAT))
                    time.sleep(args.pause)
            for _, _, context in pages.values():
                context.close()
        browser.close()
    rows = []
    for what in WHAT:
        on_s, off_s = (statistics.median(seconds[label][what]) for label in LABELS)
        rows.append({"what": what, "off_median_s": off_s, "on_median_s": on_s, "ratio": on_s / off_s})
    samples = len(seconds["on"]["run finished"])
    lines = [
        f"`{command.strip()}`",
        "",
        f"Compare's temperature slider, one step to a value not shown before, {args.pause:g} s after the last step; "
        f"medians of {samples} steps per server, alternated.",
        "",
        *off_on_table(
            rows, "what", ("from the key press to", "nothing done ahead median s", "done ahead median s", "ahead / not")
        ),
    ]
    text = "\n".join(lines) + "\n"
    result = {
        "command": command.strip(),
        "settings": {"rounds": args.rounds, "steps": args.steps, "pause_s": args.pause},
        "machine": machine_facts(load_start),
        "rows": rows,
        "seconds": seconds,
    }
    save_results(args.out, "prefetch_ab", result, text)
    return result


if __name__ == "__main__":
    main()
