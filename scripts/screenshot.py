"""Start the app on a free port, open each given URL path in headless Chromium and save a PNG per path.

    .venv/bin/python scripts/screenshot.py / /Compare --out artifacts/screenshots

Each path is opened after the previous one on the same server; file names come from the path ("/" -> home.png).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from tests.browser.helpers import CHROMIUM, CHROMIUM_ARGS, streamlit_server, wait_for_app  # noqa: E402


def file_name(path: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9]+", "_", path).strip("_")
    return (stem or "home") + ".png"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="*", default=["/"], help="URL paths to capture (default: /)")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "artifacts" / "screenshots", help="output folder")
    parser.add_argument("--width", type=int, default=1400)
    parser.add_argument("--height", type=int, default=1000)
    parser.add_argument("--full-page", action="store_true", help="capture the whole scrollable page")
    parser.add_argument(
        "--scroll-to",
        default=None,
        help="CSS selector of an element to scroll into view before the capture (e.g. '.js-plotly-plot')",
    )
    parser.add_argument("--name", action="append", default=[], help="file name for each path, in order")
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    args.out.mkdir(parents=True, exist_ok=True)
    with streamlit_server() as server, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=list(CHROMIUM_ARGS))
        page = browser.new_page(viewport={"width": args.width, "height": args.height})
        for index, path in enumerate(args.paths):
            page.goto(server.url + "/" + path.lstrip("/"))
            wait_for_app(page)
            if args.scroll_to:
                page.wait_for_selector(args.scroll_to, state="attached", timeout=60_000)
                page.locator(args.scroll_to).first.scroll_into_view_if_needed()
                page.wait_for_timeout(500)
            target = args.out / (args.name[index] if index < len(args.name) else file_name(path))
            page.screenshot(path=str(target), full_page=args.full_page)
            print(f"{path} -> {target}")
        browser.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
