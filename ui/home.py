"""The Home page's link lists as HTML: preset links, lessons and every page with one line on what it shows.

Every link is a plain anchor with ``target="_self"``: Streamlit opens a markdown link in a new tab, and a class that
follows the Home page should stay in one tab (as the sidebar's links and a lesson's Next do). Links are relative, so
they work under a proxy's path prefix too. The page list is read from the page files (their labels in
``ui.sidebar.PAGE_LABELS``, their one line from the first paragraph of each file's docstring), so it cannot drift.
"""

from __future__ import annotations

import ast
import html
from dataclasses import dataclass
from pathlib import Path

from ui.lessons import Lesson
from ui.presets import Preset
from ui.sidebar import PAGE_LABELS, ROOT, page_files

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
    """An anchor that opens in the same tab."""
    text = f"<b>{html.escape(label)}</b>" if bold else html.escape(label)
    return f'<a href="{html.escape(href, quote=True)}" target="_self">{text}</a>'


def _summary(script: Path, label: str) -> str:
    """The first paragraph of the script's docstring, without a leading "<label>: "."""
    doc = ast.get_docstring(ast.parse(script.read_text(encoding="utf-8"))) or ""
    line = " ".join(doc.split("\n\n")[0].split())
    head, sep, rest = line.partition(": ")
    if sep and head.lower() in (label.lower(), script.stem.split("_", 1)[-1].replace("_", " ").lower()):
        line = rest
    return line[:1].upper() + line[1:]


def page_entries() -> list[PageEntry]:
    """Every page in pages/, in the sidebar's order."""
    entries = []
    for rel, name in page_files():
        label = PAGE_LABELS.get(name, name.replace("_", " "))
        entries.append(PageEntry(name, label, _summary(ROOT / rel, label)))
    return entries


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
