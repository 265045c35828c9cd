"""The Home page's link lists as HTML: preset links, lessons and every page with one line on what it shows.

Every link is a plain anchor with ``target="_self"``: Streamlit opens a markdown link in a new tab, and a class that
follows the Home page should stay in one tab (as the sidebar's links and a lesson's Next do). Links are relative, so
they work under a proxy's path prefix too. The page list is read from ``ui.page_registry`` (each page's label, and its
one line from the first paragraph of the script's docstring), so it cannot drift.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

from ui import page_registry
from ui.lessons import Lesson
from ui.presets import Preset
from ui.url_params import keep_presenter

# What the optional features need from the system (the README's Quick start says the same).
OWN_COPY = (
    "- **Figure export as PNG or SVG** needs Chromium on the server (Debian/Ubuntu: `apt-get install chromium`; "
    "another Chrome or Chromium through `BROWSER_PATH`). Without it, the Export menu still gives HTML, the data and "
    "the settings, and says what to install. The Docker images do not include Chromium.\n"
    "- **A GPU** is used when PyTorch sees one: CUDA (Docker: `deploy/Dockerfile.gpu` with the NVIDIA Container "
    "Toolkit) or Apple's MPS; the sidebar's Device control then offers it.\n"
    "- **Nothing else**: the real MiniLM model ships as a pip package (no download), and the icons are Streamlit's "
    "own Material icons (no emoji font)."
)


@dataclass(frozen=True)
class PageEntry:
    path: str  # URL path, e.g. "Sparse_plus_low_rank"
    label: str
    line: str  # what the page shows, one sentence or two


def link(href: str, label: str, *, bold: bool = True) -> str:
    """An anchor that opens in the same tab (and keeps the presenter view)."""
    text = f"<b>{html.escape(label)}</b>" if bold else html.escape(label)
    return f'<a href="{html.escape(keep_presenter(href), quote=True)}" target="_self">{text}</a>'


def page_entries() -> list[PageEntry]:
    """Every page in pages/, in the sidebar's order."""
    return [PageEntry(p.url_path, p.label, p.summary) for p in page_registry.PAGES]


def page_list_html(entries: list[PageEntry]) -> str:
    items = "".join(f"<li>{link('./' + e.path, e.label)}: {html.escape(e.line)}</li>" for e in entries)
    return f'<ul class="ae-page-list">{items}</ul>'


def preset_target(preset: Preset) -> str:
    """The preset's page and query, e.g. "Compare?tau=0.05&methods=lsh"."""
    return f"{preset.page}?{preset.query}" if preset.query else preset.page


def preset_html(preset: Preset) -> str:
    return f"{link('./' + preset_target(preset), preset.title)}<br>{html.escape(preset.text)}"


def lesson_html(lesson: Lesson) -> str:
    return f"{link(lesson.step_url(0), lesson.title)}<br>{html.escape(lesson.summary)}"
