"""Home leads: every page listed (from the page files), lessons in teaching order, every link in the same tab, and
no icon that needs an emoji font."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from ui import home, lessons, page_registry
from ui.presets import PRESETS

ROOT = Path(__file__).resolve().parents[1]
PAGE_FILES = [p.script for p in page_registry.PAGES]
ANCHOR = re.compile(r"<a\s[^>]*>")


@pytest.fixture(scope="module")
def home_html(open_page: Callable[..., AppTest]) -> str:
    at = open_page()
    assert not at.exception, [e.value for e in at.exception]
    return "\n".join(str(m.value) for m in at.markdown)


def test_every_page_file_has_one_line_on_home(home_html: str) -> None:
    entries = home.page_entries()
    assert [e.path for e in entries] == [p.url_path for p in page_registry.PAGES]
    for entry in entries:
        assert 20 <= len(entry.line) <= 300 and "\n" not in entry.line, entry
        assert not entry.line.lower().startswith(entry.label.lower() + ":"), entry  # the label is not repeated
        assert f'href="./{entry.path}"' in home_html, f"Home does not link {entry.path}"


def test_every_home_link_opens_in_the_same_tab(home_html: str) -> None:
    anchors = ANCHOR.findall(home_html)
    # Presets, lessons and pages; Streamlit opens a markdown link, [text](url), in a new tab.
    assert len(anchors) >= len(PRESETS) + len(lessons.lessons()) + len(PAGE_FILES)
    assert all('target="_self"' in a for a in anchors), [a for a in anchors if 'target="_self"' not in a]
    assert not re.search(r"\]\((?:\.|/|http)", home_html), "a markdown link opens a new tab"


def test_home_lists_the_lessons_in_teaching_order(home_html: str) -> None:
    places = [home_html.index(home.link(lesson.step_url(0), lesson.title)) for lesson in lessons.lessons().values()]
    assert places == sorted(places)
    assert next(iter(lessons.lessons())) == "temperature"
    assert "Chromium" in home_html  # what PNG/SVG export needs, in "Running your own copy"


# Emoji that Debian's default fonts (DejaVu, Liberation) have no glyph for: they showed as an empty box (❔ on Home).
EMOJI = re.compile("[\U0001f000-\U0001faff\u2753-\u2755\u2795-\u2797]")


def test_no_icon_needs_an_emoji_font() -> None:
    sources = [ROOT / "app.py", *PAGE_FILES, *(ROOT / "ui").rglob("*.py"), *(ROOT / "assets" / "lessons").glob("*")]
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()[:80]}"
        for path in sources
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if EMOJI.search(line)
    ]
    assert found == []
