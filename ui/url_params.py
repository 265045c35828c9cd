"""The page's URL: reading its raw values, parsing them with the clamp-and-notice behaviour, writing them back.

Streamlit silently drops URL values it cannot use; we read the raw URL ourselves first. Each control's value is
checked by a ``core.registry.ParamSpec`` (the engine's own coercion: clamp, round, snap to the nearest option);
this module only builds that spec and turns its finding into the notice the page shows (with the control's
label in bold and the offending value, cut short, in a code span).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import streamlit as st

from core.registry import Finding, ParamSpec
from ui import streamlit_compat

# URL parameters that are not widgets.
LESSON_KEY = "lesson"
HIDE_KEY = "hide"
GUIDE_KEY = "guide"  # a guided lesson's id (ui/lessons.py)
STEP_KEY = "step"  # its 1-based step
PRESENT_KEY = "present"  # presenter view (large fonts, no sidebar)
FOCUS_KEY = "focus"  # the figure (its show_figure key) a presenter view shows first, e.g. a lesson step's picture
# Plain keys whose raw values the share link carries as they are (when they are short and plain).
CARRIED_KEYS = (GUIDE_KEY, STEP_KEY, PRESENT_KEY, FOCUS_KEY)
ROOM_KEY = "room"  # a class room's code, or "new" (ui/room.py); never in a share link
ROOM_SECRET_KEY = "key"  # the room's teacher key: only the teacher's own link carries it
FOLLOW_KEY = "follow"  # follow=0: a student in the room exploring on their own
PLAIN_KEYS = (LESSON_KEY, HIDE_KEY, *CARRIED_KEYS, ROOM_KEY, ROOM_SECRET_KEY, FOLLOW_KEY)
# Values in notices are cut to this many characters (hostile URLs can be long).
NOTICE_VALUE_CHARS = 40
MAX_TEXT_CHARS = 4000

# A control's parser: raw URL value (a list of strings, or one string) -> (value or None for the default, notice).
Parser = Callable[[Any], tuple[Any, str | None]]

# The notice for each finding of ParamSpec.coerce, after "**label**: ". {value}: the raw value, cut short;
# {limit}: the value used, as the control shows it; {choices}: the allowed values; {dropped}: the unknown items.
NOTICE_TEXTS: dict[str, str] = {
    "not_a_number": "`{value}` is not a number; using the default.",
    "not_positive": "`{value}` must be greater than 0; using the default.",
    "not_whole": "`{value}` is not a whole number; rounded.",
    "below_minimum": "`{value}` is below the minimum {limit}; using {limit}.",
    "above_maximum": "`{value}` is above the maximum {limit}; using {limit}.",
    "off_grid": "`{value}` is not on the slider; using the nearest value {limit}.",
    "not_a_choice": "`{value}` is not one of `{choices}`; using the default.",
    "not_a_bool": "`{value}` is not true or false; using the default.",
    "control_characters": "removed control characters from the text.",
    "too_long": "the text was longer than {limit} characters; it was cut.",
    "too_short": "the text was empty; using the default.",
    "unknown_items": "ignored unknown value(s) `{dropped}`.",
    "no_items": "no valid values; using the default.",
    "not_a_pair": "needs two values (low and high); using the default.",
}
# A one-line text box says the same for everything it changed.
LINE_NOTICE_TEXTS = {**NOTICE_TEXTS, "control_characters": "cleaned the value.", "too_long": "cleaned the value."}


def cut_value(raw: Any) -> str:
    """A raw URL value made safe to show inside a notice's code span: printable, short, no backticks."""
    text = raw if isinstance(raw, str) else ",".join(str(x) for x in raw) if isinstance(raw, list) else str(raw)
    text = "".join(ch if ch.isprintable() else "?" for ch in text)
    if len(text) > NOTICE_VALUE_CHARS:
        text = text[:NOTICE_VALUE_CHARS] + "…"
    return text.replace("`", "'")


# ------------------------------------------------------------------ reading the URL


def raw_params() -> dict[str, list[str]]:
    """Every URL parameter with all its values, as the browser sent them."""
    raw: dict[str, list[str]] = {}
    for key in st.query_params:
        raw[key] = list(st.query_params.get_all(key))
    return raw


def plain_param(key: str) -> str | None:
    """The (last) value of a URL parameter that is not a widget; None when absent or unreadable."""
    try:
        value = st.query_params.get(key)
    except Exception:  # noqa: BLE001 - a hostile query string must never break the page
        return None
    return value if isinstance(value, str) else None


def presenter_on() -> bool:
    """True when the URL asks for the presenter view (``?present=1``)."""
    raw = plain_param(PRESENT_KEY)
    return raw is not None and raw.strip().lower() in ("1", "true", "yes", "on")


def keep_presenter(href: str) -> str:
    """A link to a view of this app that keeps the presenter view: ``present=1`` added when this page has it; and a
    class room (``room=``, the teacher's ``key``, ``follow=0`` for a student exploring on their own).

    Every in-app link goes through here (Home's presets, lessons and pages, a lesson's Next and Previous, the sidebar,
    links between pages), so a class on a projector stays in the projector layout whatever it follows.
    """
    extra = [(PRESENT_KEY, "1")] if presenter_on() else []
    extra += room_pairs()
    if not extra:
        return href
    base, _, query = href.partition("?")
    names = {name for name, _ in extra}
    pairs = [part for part in query.split("&") if part and part.split("=", 1)[0] not in names]
    return base + "?" + "&".join([*pairs, *(f"{name}={value}" for name, value in extra)])


def room_pairs() -> list[tuple[str, str]]:
    """The class room this page is in, as URL pairs for its links (ui/room.py); none outside a room."""
    room = plain_param(ROOM_KEY)
    if room is None or not re.fullmatch(r"[A-Za-z0-9]{6}", room.strip()):
        return []
    pairs = [(ROOM_KEY, room.strip())]
    key = plain_param(ROOM_SECRET_KEY)
    if key and re.fullmatch(r"[A-Za-z0-9_-]{20,100}", key):
        pairs.append((ROOM_SECRET_KEY, key))
    mine = st.session_state.get("_ae_room")
    if isinstance(mine, dict) and not mine.get("following", True) and "key" not in mine:
        pairs.append((FOLLOW_KEY, "0"))
    return pairs


# ------------------------------------------------------------------ parsing values


def spec_parser(
    spec: ParamSpec,
    label: str,
    show_limit: Callable[[Any], str] = str,
    texts: dict[str, str] = NOTICE_TEXTS,
) -> Parser:
    """A parser that checks a raw URL value with ``spec.coerce`` and words its finding as a notice.

    show_limit: how the control shows a value it moved to (a bound, a grid value).
    """
    whole_list = spec.kind in ("multi", "range")

    def parse(raw: Any) -> tuple[Any, str | None]:
        given = raw if whole_list else raw[-1] if isinstance(raw, list) and raw else raw
        coerced = spec.coerce(given)
        if coerced.finding is None:
            return coerced.value, None
        return coerced.value, _notice(coerced.finding, raw, label, spec, show_limit, texts)

    return parse


def _notice(
    finding: Finding, raw: Any, label: str, spec: ParamSpec, show_limit: Callable[[Any], str], texts: dict[str, str]
) -> str:
    text = texts[finding.kind].format(
        value=cut_value(raw if finding.part is None else finding.part),
        limit="" if finding.limit is None else show_limit(finding.limit),
        choices=cut_value(", ".join(str(choice) for choice in spec.choices)),
        dropped=cut_value(list(finding.dropped)),
    )
    return f"**{label}**: {text}"


def _aliases(options: Sequence[Any], fmt: Callable[[Any], str]) -> tuple[tuple[str, Any], ...]:
    # The displayed labels (what Streamlit writes into the address bar); a later option wins a shared label.
    return tuple({fmt(option): option for option in options}.items())


def int_parser(label: str, low: int, high: int) -> Parser:
    return spec_parser(ParamSpec(label, "int", None, "", low=low, high=high), label)


def float_parser(label: str, low: float, high: float) -> Parser:
    return spec_parser(ParamSpec(label, "float", None, "", low=low, high=high), label, lambda x: f"{x:g}")


def snap_parser(label: str, options: Sequence[float], fmt: Callable[[Any], str], log: bool) -> Parser:
    """Numbers snap to the nearest option (in log space for log sliders) with a notice."""
    return spec_parser(ParamSpec(label, "float", None, "", grid=tuple(options), log=log), label, fmt)


def choice_parser(label: str, options: Sequence[Any], fmt: Callable[[Any], str]) -> Parser:
    """Accepts an option's id (str(option), what share links use) or its displayed label (the address bar)."""
    spec = ParamSpec(label, "choice", None, "", choices=tuple(options), aliases=_aliases(options, fmt))
    return spec_parser(spec, label)


def bool_parser(label: str) -> Parser:
    return spec_parser(ParamSpec(label, "bool", None, ""), label)


def text_parser(label: str, max_chars: int) -> Parser:
    """Free text: control characters removed (line breaks kept), cut to max_chars, not blank."""
    return spec_parser(ParamSpec(label, "text", None, "", low=1, high=max_chars, multiline=True), label)


def line_parser(label: str, max_chars: int) -> Parser:
    """One line of text: control characters (line breaks too) removed, cut to max_chars."""
    return spec_parser(ParamSpec(label, "text", None, "", high=max_chars), label, texts=LINE_NOTICE_TEXTS)


def multi_parser(label: str, options: Sequence[str], max_items: int, fmt: Callable[[Any], str] = str) -> Parser:
    """Accepts ids (share links) or displayed labels (the address bar) for each item."""
    spec = ParamSpec(label, "multi", None, "", high=max_items, choices=tuple(options), aliases=_aliases(options, fmt))
    return spec_parser(spec, label)


def range_parser(label: str, options: Sequence[float], fmt: Callable[[Any], str], log: bool) -> Parser:
    return spec_parser(ParamSpec(label, "range", None, "", grid=tuple(options), log=log), label, fmt)


# ------------------------------------------------------------------ writing values back


def fmt_number(x: Any) -> str:
    """A number (or boolean) as the URL carries it."""
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, int):
        return str(x)
    return f"{float(x):.6g}"


def raw_matches(raw: list[str], url_value: str | list[str]) -> bool:
    """True when the URL already carries url_value."""
    if isinstance(url_value, list):
        return list(raw) == url_value
    return len(raw) == 1 and raw[0] == url_value


def replace_url_value(key: str, url_value: str | list[str] | None) -> None:
    """Replace (None: remove) a URL value before its widget exists, in the address bar and in the snapshot
    Streamlit seeds widgets from (ui/streamlit_compat.py)."""
    try:
        if url_value is None:
            if key in st.query_params:
                del st.query_params[key]
        else:
            st.query_params[key] = url_value
        with streamlit_compat.session_state().query_params() as params:
            initial = streamlit_compat.initial_query_params(params)
            if initial is not None:
                if url_value is None:
                    initial.pop(key, None)
                else:
                    initial[key] = list(url_value) if isinstance(url_value, list) else [url_value]
    except Exception:  # noqa: BLE001 - the page must render even if the address bar cannot be rewritten
        pass
