"""Guided lessons: short sequences of steps, each a page plus the settings that show the point.

A lesson is data, one TOML file per lesson in ``assets/lessons/`` (the file name is the lesson's id; its ``order``, a
whole number unique among the lessons, places it in the teaching order Home lists them in). The URL keeps
the lesson and the step (``?guide=temperature&step=2``) beside the step's own settings, so a link opens a class at
the same place. Next and Previous are plain links to the neighbouring step's URL: opening one starts the page from
that URL, exactly as a student who pasted it would.

Loading and validation are pure (no Streamlit), so tests and teachers can check a lesson without a server.
"""

from __future__ import annotations

import re
import tomllib
import urllib.parse
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from ui import page_registry
from ui.step_claims import Claim, ClaimError, parse_claims, tile_number

LESSON_DIR = Path(__file__).resolve().parent.parent / "assets" / "lessons"
GUIDE_KEY = "guide"
STEP_KEY = "step"
_ID = re.compile(r"[a-z0-9_]{1,40}")
_PARAM = re.compile(r"[A-Za-z0-9_]{1,40}")
MAX_ORDER = 999


class LessonError(ValueError):
    """A lesson file that cannot be used; the message names the file and the field."""


QUESTION_PICKS = ("lowest", "highest")


@dataclass(frozen=True)
class StepQuestion:
    """A step's predict-then-reveal question. Its choices are tiles the step's page shows (a method's registry name
    or a tile's label, as in claims); the measured answer is the choice whose tile shows the lowest (or highest)
    number in the page's own run, never a constant."""

    text: str
    choices: tuple[str, ...]
    pick: str = "lowest"

    def label(self, choice: str) -> str:
        from core import registry

        methods = registry.methods()
        return methods[choice].label if choice in methods else choice

    def labelled_choices(self) -> tuple[tuple[str, str], ...]:
        return tuple((choice, self.label(choice)) for choice in self.choices)

    def measured(self, tiles: dict[str, str]) -> str:
        """The choice the page's tiles pick, or "" while one of them is not drawn (or shows no number)."""
        numbers = {}
        for choice in self.choices:
            shown = tiles.get(self.label(choice))
            number = tile_number(shown) if shown is not None else None
            if number is None:
                return ""
            numbers[choice] = number
        chosen = min if self.pick == "lowest" else max
        return chosen(numbers, key=lambda choice: numbers[choice])


@dataclass(frozen=True)
class Step:
    title: str
    text: str
    page: str  # URL path of the page: "" for Home, else e.g. "Compare"
    params: tuple[tuple[str, str], ...]  # URL pairs in order; a list value gives repeated keys
    hide: tuple[str, ...]
    focus: str = ""  # the show_figure key of the step's main picture, shown first in presenter view ("" = first chart)
    # What the step's view shows, checked against the page's own numbers (ui/step_claims.py); or why it cannot be.
    claims: tuple[Claim, ...] = ()
    no_claim: str = ""
    question: StepQuestion | None = None  # predict, then reveal (a class room shows it: ui/room.py)


@dataclass(frozen=True)
class Lesson:
    id: str
    title: str
    summary: str
    source: str
    steps: tuple[Step, ...]
    order: int  # place in the teaching order (1 = first)

    def step_query(self, index: int) -> str:
        """The query string of step ``index`` (0-based): its settings, lesson mode, and the guide position."""
        step = self.steps[index]
        pairs = list(step.params)
        if step.hide:
            pairs += [("lesson", "1"), ("hide", ",".join(step.hide))]
        if step.focus:
            pairs.append(("focus", step.focus))
        pairs += [(GUIDE_KEY, self.id), (STEP_KEY, str(index + 1))]
        return urllib.parse.urlencode(pairs, safe=",/")

    def step_url(self, index: int) -> str:
        """A relative link to step ``index``; relative so it works under a proxy's path prefix too."""
        return f"./{self.steps[index].page}?{self.step_query(index)}"


def _text(raw: dict[str, Any], key: str, where: str, limit: int) -> str:
    value = raw.get(key)
    if not isinstance(value, str) or not value.strip():
        raise LessonError(f"{where}: '{key}' must be a non-empty string")
    value = " ".join(value.split())
    if len(value) > limit:
        raise LessonError(f"{where}: '{key}' has {len(value)} characters; at most {limit}")
    return value


def _params(raw: Any, where: str) -> tuple[tuple[str, str], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        raise LessonError(f"{where}: 'params' must be a table of URL parameters")
    pairs: list[tuple[str, str]] = []
    for key, value in raw.items():
        if not _PARAM.fullmatch(key) or key in (GUIDE_KEY, STEP_KEY, "lesson", "hide", "focus"):
            raise LessonError(f"{where}: parameter name '{key}' is not allowed (letters, digits and _ only)")
        values = value if isinstance(value, list) else [value]
        for item in values:
            if isinstance(item, bool) or not isinstance(item, (str, int, float)):
                raise LessonError(f"{where}: parameter '{key}' must be a string, a number or a list of them")
            pairs.append((key, str(item)))
    return tuple(pairs)


def _question(raw: Any, where: str) -> StepQuestion | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise LessonError(f"{where}: 'question' must be a table with text, choices and pick")
    choices = raw.get("choices")
    if (
        not isinstance(choices, list)
        or not 2 <= len(choices) <= 6
        or not all(isinstance(c, str) and c.strip() and len(c) <= 80 for c in choices)
        or len(set(choices)) != len(choices)
    ):
        raise LessonError(f"{where}: question 'choices' must be 2 to 6 different tiles (method names or tile labels)")
    pick = raw.get("pick", "lowest")
    if pick not in QUESTION_PICKS:
        raise LessonError(f"{where}: question 'pick' must be one of {QUESTION_PICKS}")
    return StepQuestion(text=_text(raw, "text", f"{where}, question", 200), choices=tuple(choices), pick=pick)


def parse_lesson(lesson_id: str, raw: dict[str, Any]) -> Lesson:
    """Validate one lesson's TOML data; raises LessonError naming the field."""
    where = f"lesson '{lesson_id}'"
    if not _ID.fullmatch(lesson_id):
        raise LessonError(f"{where}: the file name must be lower-case letters, digits and _ (at most 40)")
    steps_raw = raw.get("steps")
    if not isinstance(steps_raw, list) or not 1 <= len(steps_raw) <= 20:
        raise LessonError(f"{where}: needs 1 to 20 [[steps]]")
    pages = page_registry.url_paths()
    steps = []
    for number, item in enumerate(steps_raw, start=1):
        at = f"{where}, step {number}"
        if not isinstance(item, dict):
            raise LessonError(f"{at}: must be a table")
        page = item.get("page", "")
        if page not in pages:
            raise LessonError(f"{at}: page '{page}' is not one of {sorted(pages)}")
        hide = item.get("hide", [])
        if not isinstance(hide, list) or not all(isinstance(h, str) and _PARAM.fullmatch(h) for h in hide):
            raise LessonError(f"{at}: 'hide' must be a list of control names")
        try:
            claims = parse_claims(item.get("claims"), at)
        except ClaimError as exc:
            raise LessonError(str(exc)) from exc
        no_claim = " ".join(str(item.get("no_claim", "")).split())
        focus = item.get("focus", "")
        if not isinstance(focus, str) or (focus and not _PARAM.fullmatch(focus)):
            raise LessonError(f"{at}: 'focus' must be a figure's key (letters, digits and _)")
        steps.append(
            Step(
                title=_text(item, "title", at, 120),
                text=_text(item, "text", at, 1200),
                page=page,
                params=_params(item.get("params"), at),
                hide=tuple(hide),
                claims=claims,
                no_claim=no_claim,
                focus=focus,
                question=_question(item.get("question"), at),
            )
        )
    order = raw.get("order")
    if isinstance(order, bool) or not isinstance(order, int) or not 1 <= order <= MAX_ORDER:
        raise LessonError(f"{where}: 'order' must be a whole number from 1 to {MAX_ORDER} (its place in the list)")
    return Lesson(
        id=lesson_id,
        title=_text(raw, "title", where, 120),
        summary=_text(raw, "summary", where, 400),
        source=_text(raw, "source", where, 400),
        steps=tuple(steps),
        order=order,
    )


def load_lesson_file(path: Path) -> Lesson:
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise LessonError(f"lesson file {path.name}: {exc}") from exc
    return parse_lesson(path.stem, raw)


def in_teaching_order(found: list[Lesson]) -> dict[str, Lesson]:
    """The lessons by id, ordered by their ``order`` field; two lessons with the same place are refused."""
    taken: dict[int, str] = {}
    for lesson in found:
        if lesson.order in taken:
            raise LessonError(f"lessons '{taken[lesson.order]}' and '{lesson.id}' both have order = {lesson.order}")
        taken[lesson.order] = lesson.id
    return {lesson.id: lesson for lesson in sorted(found, key=lambda lesson: lesson.order)}


@lru_cache(maxsize=1)
def lessons() -> dict[str, Lesson]:
    """Every lesson in assets/lessons/, by id, in teaching order (read once per process)."""
    return in_teaching_order([load_lesson_file(path) for path in sorted(LESSON_DIR.glob("*.toml"))])


def position(guide: str | None, step: str | None) -> tuple[Lesson, int] | None:
    """The lesson and 0-based step a URL names, or None when it names no lesson (a bad step clamps)."""
    lesson = lessons().get(guide or "")
    if lesson is None:
        return None
    try:
        number = int((step or "1").strip()[:6])
    except ValueError:
        number = 1
    return lesson, min(max(number, 1), len(lesson.steps)) - 1


# ------------------------------------------------------------------ drawing (Streamlit)

PANEL_CSS = """<style>
.ae-lesson-nav {display: flex; gap: 0.6rem; flex-wrap: wrap; margin-top: 0.3rem;}
.ae-lesson-nav a {padding: 0.35rem 0.9rem; border: 1px solid rgba(151, 166, 195, 0.6); border-radius: 0.5rem;
                  text-decoration: none; color: inherit; font-weight: 600;}
.ae-lesson-nav a:hover {background: rgba(151, 166, 195, 0.2);}
.ae-lesson-nav span {padding: 0.35rem 0.9rem; opacity: 0.45;}
</style>"""


def _link(label: str, href: str | None) -> str:
    import html

    from ui.url_params import keep_presenter

    if href is None:
        return f"<span>{html.escape(label)}</span>"
    return f'<a href="{html.escape(keep_presenter(href), quote=True)}" target="_self">{html.escape(label)}</a>'


def nav_html(lesson: Lesson, index: int) -> str:
    """Previous / Next / Leave links for step ``index``: plain links, so the next step loads from its URL."""
    previous = lesson.step_url(index - 1) if index > 0 else None
    following = lesson.step_url(index + 1) if index + 1 < len(lesson.steps) else None
    leave = f"./{lesson.steps[index].page}?" + urllib.parse.urlencode(lesson.steps[index].params, safe=",/")
    parts = [_link("← Previous", previous), _link("Next →", following), _link("Leave the lesson", leave)]
    return PANEL_CSS + '<div class="ae-lesson-nav">' + "".join(parts) + "</div>"


def lesson_panel(guide: str | None, step: str | None, withheld: bool = False) -> Lesson | None:
    """Draw the current lesson step above the page's content; returns the lesson (None when the URL names none).

    withheld: a class room's question is open and not revealed (``ui.room.answers_hidden``): a step with a question
    keeps its title and text (which explain the answer) until the Reveal."""
    import streamlit as st

    found = position(guide, step)
    if found is None:
        if guide:
            st.warning(f"No lesson named `{guide[:40]}`; available: {', '.join(lessons()) or 'none'}.")
        return None
    lesson, index = found
    current = lesson.steps[index]
    # key: the presenter view's CSS (ui.PRESENTER_CSS) lifts this box under the title, before the page's picture.
    with st.container(border=True, key="ae_lesson"):
        st.caption(f"Lesson · {lesson.title} · step {index + 1} of {len(lesson.steps)}")
        if withheld and current.question is not None:
            st.subheader("Predict first")
            st.markdown("This step's explanation shows after the teacher's Reveal.")
        else:
            st.subheader(current.title)
            st.markdown(current.text)
        st.markdown(nav_html(lesson, index), unsafe_allow_html=True)
    return lesson
