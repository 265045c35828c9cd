"""Start the app on a free port, open each given URL path in headless Chromium and save a PNG per path.

    .venv/bin/python scripts/screenshot.py / /Compare --out artifacts/screenshots
    .venv/bin/python scripts/screenshot.py --lessons   # every lesson step in presenter view, 1280 x 720

``--lessons`` writes ``assets/screenshots/lessons/<lesson>_<step>.png`` (the committed copies): each step opened from
its own link with ``present=1``, the first screen of a projector.

``--rooms`` writes ``assets/screenshots/rooms/``: a class room's teacher in presenter view at 1280 x 720 with the
lesson step's question open (three students answered; no error number shows yet), the same after Reveal, and a
student's phone (390 x 844).

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

LESSON_SHOTS = REPO_ROOT / "assets" / "screenshots" / "lessons"
ROOM_SHOTS = REPO_ROOT / "assets" / "screenshots" / "rooms"


def room_shots(out: Path) -> None:
    """A room on the temperature lesson's step 2: the teacher's presenter view, question open and revealed."""
    import os
    import tempfile

    from playwright.sync_api import expect, sync_playwright

    os.environ["ATTN_EXPLORER_CACHE_DIR"] = tempfile.mkdtemp(prefix="room-shots-")  # the server and this process
    os.environ.pop("ATTN_EXPLORER_CACHE_URL", None)
    from service import rooms
    from ui import lessons

    lesson = lessons.lessons()["temperature"]
    room = rooms.create()
    out.mkdir(parents=True, exist_ok=True)
    with streamlit_server() as server, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=list(CHROMIUM_ARGS))
        teacher = browser.new_page(viewport={"width": 1280, "height": 720})
        teacher.goto(f"{server.url}/{lesson.step_url(1).removeprefix('./')}&present=1&room={room.code}&key={room.key}")
        wait_for_app(teacher)
        for student, choice in (("a", "lsh"), ("b", "lsh"), ("c", "performer")):
            rooms.answer(room.code, student, choice)
        teacher.wait_for_timeout(2500)  # the live counts
        teacher.screenshot(path=str(out / "teacher_question.png"))
        phone = browser.new_page(viewport={"width": 390, "height": 844}, is_mobile=True)
        phone.goto(f"{server.url}/?room={room.code}")
        phone.wait_for_url("**/Compare?**", timeout=60_000)
        wait_for_app(phone)
        phone.wait_for_timeout(2000)
        phone.screenshot(path=str(out / "student_phone.png"))
        teacher.get_by_role("button", name="Reveal").click()
        expect(teacher.get_by_text("The page measured")).to_be_visible(timeout=10_000)
        hidden = teacher.locator("[data-testid='stMetricValue']").filter(has_text="?")
        expect(hidden).to_have_count(0, timeout=30_000)  # the page's run after the Reveal shows the numbers
        teacher.wait_for_timeout(1500)
        teacher.screenshot(path=str(out / "teacher_revealed.png"))
        browser.close()
    print(f"wrote {out}")


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
    parser.add_argument("--lessons", action="store_true", help="every lesson step in presenter view at 1280 x 720")
    parser.add_argument("--rooms", action="store_true", help="a class room's teacher and student, see above")
    args = parser.parse_args()
    if args.rooms:
        room_shots(ROOM_SHOTS)
        return 0
    if args.lessons:
        from ui import lessons

        args.out = args.out if args.out != REPO_ROOT / "artifacts" / "screenshots" else LESSON_SHOTS
        args.width, args.height = 1280, 720
        args.scroll_to = None
        args.name, args.paths = [], []
        for lesson in lessons.lessons().values():
            for index in range(len(lesson.steps)):
                args.paths.append("/" + lesson.step_url(index).removeprefix("./") + "&present=1")
                args.name.append(f"{lesson.id}_{index + 1}.png")

    from playwright.sync_api import sync_playwright

    args.out.mkdir(parents=True, exist_ok=True)
    with streamlit_server() as server, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=list(CHROMIUM_ARGS))
        page = browser.new_page(viewport={"width": args.width, "height": args.height})
        for index, path in enumerate(args.paths):
            page.goto(server.url + "/" + path.lstrip("/"))
            wait_for_app(page)
            page.wait_for_timeout(1500)  # charts that mount and size after the run
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
