"""URL-bound controls, invalid-URL notices, lesson mode, the copy-link box and settings JSON.

Every control is a Streamlit widget with ``bind="query-params"`` and ``key`` = the URL parameter name.
Streamlit silently drops URL values it cannot use; we parse the raw URL ourselves first, so a bad value is
clamped or snapped where that makes sense, and the user always sees a notice saying what happened.

Per page run the flow is:
  ``begin_page`` (snapshot of the raw URL) -> controls (each parses its raw value once per page visit) ->
  ``finish_page`` (unknown parameters, notices, copy link, settings download/upload).
"""

from __future__ import annotations

import json
import math
import re
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import streamlit as st
from streamlit.runtime.state.session_state_proxy import get_session_state

from ui.share_box import share_link_box

# URL parameters that are not widgets.
LESSON_KEY = "lesson"
HIDE_KEY = "hide"
GUIDE_KEY = "guide"  # a guided lesson's id (ui/lessons.py)
STEP_KEY = "step"  # its 1-based step
PRESENT_KEY = "present"  # presenter view (large fonts, no sidebar)
# Plain keys whose raw values the share link carries as they are (when they are short and plain).
CARRIED_KEYS = (GUIDE_KEY, STEP_KEY, PRESENT_KEY)
PLAIN_KEYS = (LESSON_KEY, HIDE_KEY, *CARRIED_KEYS)
# Values in notices are cut to this many characters (hostile URLs can be long).
NOTICE_VALUE_CHARS = 40
MAX_TEXT_CHARS = 4000
SETTINGS_VERSION = 1

_STATE = "_ui_state"


def _cut(raw: Any) -> str:
    """A raw URL value made safe to show inside a notice's code span: printable, short, no backticks."""
    text = raw if isinstance(raw, str) else ",".join(str(x) for x in raw) if isinstance(raw, list) else str(raw)
    text = "".join(ch if ch.isprintable() else "?" for ch in text)
    if len(text) > NOTICE_VALUE_CHARS:
        text = text[:NOTICE_VALUE_CHARS] + "…"
    return text.replace("`", "'")


Parser = Callable[[Any], tuple[Any, str | None]]


@dataclass
class Control:
    """One URL-bound control registered in this page run."""

    key: str
    label: str
    default: Any
    value: Any
    to_url: Callable[[Any], str | list[str]]
    parse: Parser
    hidden: bool = False


@dataclass
class PageState:
    """Per-session, per-page bookkeeping (kept in st.session_state)."""

    page: str
    url_path: str
    raw: dict[str, list[str]]
    first_run: bool
    controls: dict[str, Control] = field(default_factory=dict)
    notice_box: Any = None
    link_box: Any = None
    finished: bool = False  # ui.finish ran: a later run on this state is a fragment rerun
    share_drawn: bool = False  # a fragment drew the share link (it holds the fragment's controls)
    share_fragment: str | None = None  # the fragment that draws the share link (None: ui.finish draws it)
    footer_fragment: str | None = None  # a job stopped the full run inside this fragment, which drew the footer


def _session() -> dict[str, Any]:
    return st.session_state.setdefault(_STATE, {"seen": set(), "notices": {}, "hidden": {}})


def _raw_params() -> dict[str, list[str]]:
    raw: dict[str, list[str]] = {}
    for key in st.query_params:
        raw[key] = list(st.query_params.get_all(key))
    return raw


def begin_page(page: str, url_path: str) -> PageState:
    """Start a page run: snapshot the raw URL and make the notice area. Called by ``ui.page``."""
    session = _session()
    first = page not in session["seen"]
    session["seen"].add(page)
    if first:
        session["notices"][page] = []
        session["hidden"][page] = {}
    state = PageState(page=page, url_path=url_path, raw=_raw_params() if first else {}, first_run=first)
    st.session_state["_ui_page"] = state
    state.notice_box = st.container()
    return state


def current() -> PageState:
    state = st.session_state.get("_ui_page")
    if state is None:
        raise RuntimeError("call ui.page(...) at the top of the page before creating controls")
    return state


def notice(message: str) -> None:
    """Add a warning shown at the top of the page until the user dismisses it."""
    state = current()
    notices = _session()["notices"].setdefault(state.page, [])
    if message not in notices:
        notices.append(message)


# ------------------------------------------------------------------ lesson mode


def lesson_mode() -> bool:
    """True when the URL asks for lesson mode (``?lesson=1``)."""
    raw = _plain_param(LESSON_KEY)
    return raw is not None and raw.strip().lower() in ("1", "true", "yes", "on")


def presenter_mode() -> bool:
    """True when the URL asks for the presenter view (``?present=1``)."""
    raw = _plain_param(PRESENT_KEY)
    return raw is not None and raw.strip().lower() in ("1", "true", "yes", "on")


def hidden_keys() -> set[str]:
    """Controls a teacher hid with ``?lesson=1&hide=seed,device``. Without ``hide``, lesson mode hides nothing."""
    if not lesson_mode():
        return set()
    raw = _plain_param(HIDE_KEY) or ""
    return {part.strip() for part in raw[:2000].split(",") if part.strip()}


def _plain_param(key: str) -> str | None:
    try:
        value = st.query_params.get(key)
    except Exception:  # noqa: BLE001 - a hostile query string must never break the page
        return None
    return value if isinstance(value, str) else None


# ------------------------------------------------------------------ parsers


def _number(raw: Any) -> float | None:
    text = raw[-1] if isinstance(raw, list) and raw else raw
    if not isinstance(text, str):
        return None
    text = text.strip()[:64]
    try:
        if "/" in text:
            top, bottom = text.split("/", 1)
            value = float(top) / float(bottom)
        else:
            value = float(text)
    except (ValueError, ZeroDivisionError):
        return None
    return value if math.isfinite(value) else None


def int_parser(label: str, low: int, high: int) -> Parser:
    def parse(raw: Any) -> tuple[Any, str | None]:
        value = _number(raw)
        if value is None:
            return None, f"**{label}**: `{_cut(raw)}` is not a number; using the default."
        note = None
        if value != int(value):
            note = f"**{label}**: `{_cut(raw)}` is not a whole number; rounded."
        number = int(round(value))
        if number < low:
            return low, f"**{label}**: `{_cut(raw)}` is below the minimum {low}; using {low}."
        if number > high:
            return high, f"**{label}**: `{_cut(raw)}` is above the maximum {high}; using {high}."
        return number, note

    return parse


def float_parser(label: str, low: float, high: float) -> Parser:
    def parse(raw: Any) -> tuple[Any, str | None]:
        value = _number(raw)
        if value is None:
            return None, f"**{label}**: `{_cut(raw)}` is not a number; using the default."
        if value < low:
            return low, f"**{label}**: `{_cut(raw)}` is below the minimum {low:g}; using {low:g}."
        if value > high:
            return high, f"**{label}**: `{_cut(raw)}` is above the maximum {high:g}; using {high:g}."
        return value, None

    return parse


def snap_parser(label: str, options: Sequence[float], fmt: Callable[[Any], str], log: bool) -> Parser:
    """Numbers snap to the nearest option (in log space for log sliders) with a notice."""

    def distance(a: float, b: float) -> float:
        return abs(math.log(a) - math.log(b)) if log else abs(a - b)

    def parse(raw: Any) -> tuple[Any, str | None]:
        value = _number(raw)
        if value is None:
            return None, f"**{label}**: `{_cut(raw)}` is not a number; using the default."
        if log and value <= 0:
            return None, f"**{label}**: `{_cut(raw)}` must be greater than 0; using the default."
        lowest, highest = min(options), max(options)
        if value < lowest:
            return lowest, f"**{label}**: `{_cut(raw)}` is below the minimum {fmt(lowest)}; using {fmt(lowest)}."
        if value > highest:
            return highest, f"**{label}**: `{_cut(raw)}` is above the maximum {fmt(highest)}; using {fmt(highest)}."
        best = min(options, key=lambda option: distance(option, value))
        if distance(best, value) > 1e-9 * max(1.0, abs(value)):
            return best, f"**{label}**: `{_cut(raw)}` is not on the slider; using the nearest value {fmt(best)}."
        return best, None

    return parse


def choice_parser(label: str, options: Sequence[Any], fmt: Callable[[Any], str]) -> Parser:
    """Accepts an option's id (str(option), what share links use) or its displayed label (the address bar)."""
    by_text = {fmt(option): option for option in options}
    by_text.update({str(option): option for option in options})

    def parse(raw: Any) -> tuple[Any, str | None]:
        text = raw[-1] if isinstance(raw, list) and raw else raw
        if isinstance(text, str) and text in by_text:
            return by_text[text], None
        allowed = ", ".join(str(option) for option in options)
        return None, f"**{label}**: `{_cut(raw)}` is not one of `{_cut(allowed)}`; using the default."

    return parse


def bool_parser(label: str) -> Parser:
    def parse(raw: Any) -> tuple[Any, str | None]:
        text = (raw[-1] if isinstance(raw, list) and raw else raw) or ""
        text = str(text).strip().lower()
        if text in ("true", "1", "yes", "on"):
            return True, None
        if text in ("false", "0", "no", "off"):
            return False, None
        return None, f"**{label}**: `{_cut(raw)}` is not true or false; using the default."

    return parse


def text_parser(label: str, max_chars: int) -> Parser:
    def parse(raw: Any) -> tuple[Any, str | None]:
        text = raw[-1] if isinstance(raw, list) and raw else raw
        if not isinstance(text, str):
            return None, None
        cleaned = "".join(ch for ch in text if ch.isprintable() or ch in "\n\t")
        note = None
        if cleaned != text:
            note = f"**{label}**: removed control characters from the text."
        if len(cleaned) > max_chars:
            cleaned = cleaned[:max_chars]
            note = f"**{label}**: the text was longer than {max_chars} characters; it was cut."
        if not cleaned.strip():
            return None, f"**{label}**: the text was empty; using the default."
        return cleaned, note

    return parse


def multi_parser(label: str, options: Sequence[str], max_items: int, fmt: Callable[[Any], str] = str) -> Parser:
    """Accepts ids (share links) or displayed labels (the address bar) for each item."""
    by_text = {fmt(option): option for option in options}
    by_text.update({str(option): option for option in options})

    def parse(raw: Any) -> tuple[Any, str | None]:
        items = raw if isinstance(raw, list) else [raw]
        kept = list(dict.fromkeys(by_text[item] for item in items if item in by_text))[:max_items]
        dropped = [item for item in items if item not in by_text]
        note = f"**{label}**: ignored unknown value(s) `{_cut(dropped)}`." if dropped else None
        if not kept:
            return None, note or f"**{label}**: no valid values; using the default."
        return kept, note

    return parse


def range_parser(label: str, options: Sequence[float], fmt: Callable[[Any], str], log: bool) -> Parser:
    single = snap_parser(label, options, fmt, log)

    def parse(raw: Any) -> tuple[Any, str | None]:
        items = raw if isinstance(raw, list) else [raw]
        if len(items) != 2:
            return None, f"**{label}**: needs two values (low and high); using the default."
        low, note_low = single(items[0])
        high, note_high = single(items[1])
        if low is None or high is None:
            return None, note_low or note_high
        if low > high:
            low, high = high, low
        return (low, high), note_low or note_high

    return parse


# ------------------------------------------------------------------ the binding core


def _bind(
    key: str,
    label: str,
    default: Any,
    parse: Parser,
    to_url: Callable[[Any], str | list[str]],
    make_widget: Callable[[], Any],
    equal: Callable[[Any, Any], bool] | None = None,
    valid_now: Callable[[Any], bool] | None = None,
    widget_url: Callable[[Any], str | list[str]] | None = None,
) -> Any:
    """Resolve a control's value: raw URL (first visit) -> fixed value/notice -> widget (or hidden value).

    to_url: the value as written in share links (stable ids); widget_url: as Streamlit writes it into the
    address bar (the displayed label for selectboxes; defaults to to_url). Links may use either form.
    """
    state = current()
    session = _session()
    same = equal or (lambda a, b: a == b)
    hidden = key in hidden_keys()
    raw = state.raw.get(key)
    fixed: Any = None
    if state.first_run and raw is not None:
        fixed, problem = parse(raw)
        if problem:
            notice(problem)
        if not hidden and (fixed is None or not _raw_matches(raw, (widget_url or to_url)(fixed))):
            # Streamlit parses the URL value itself when the widget is made, and some values crash it
            # (`?seed=inf` -> OverflowError); so it only ever sees the cleaned value, or none.
            _replace_url_value(key, None if fixed is None else (widget_url or to_url)(fixed))
            if fixed is not None:
                st.session_state[key] = fixed
    if hidden:
        store = session["hidden"].setdefault(state.page, {})
        if state.first_run:
            store[key] = fixed if fixed is not None else default
        value = store.get(key, default)
    else:
        if valid_now is not None and key in st.session_state and not valid_now(st.session_state[key]):
            # The allowed range moved (e.g. n changed); put the stored value back inside it.
            fixed_now, _ = parse(to_url(st.session_state[key]))
            st.session_state[key] = fixed_now if fixed_now is not None else default
        value = make_widget()
        if state.first_run and raw is not None and fixed is not None and not same(value, fixed):
            notice(f"**{label}**: the link's value `{_cut(raw)}` could not be applied; using `{_cut(to_url(value))}`.")
    state.controls[key] = Control(key, label, default, value, to_url, parse, hidden)
    return value


def _replace_url_value(key: str, url_value: str | list[str] | None) -> None:
    """Replace (None: remove) a URL value before its widget exists, in the address bar and in the snapshot
    Streamlit seeds widgets from (it has no public setter; streamlit is pinned in requirements.txt)."""
    try:
        if url_value is None:
            if key in st.query_params:
                del st.query_params[key]
        else:
            st.query_params[key] = url_value
        with get_session_state().query_params() as params:
            initial = getattr(params, "_initial_query_params", None)
            if isinstance(initial, dict):
                if url_value is None:
                    initial.pop(key, None)
                else:
                    initial[key] = list(url_value) if isinstance(url_value, list) else [url_value]
    except Exception:  # noqa: BLE001 - the page must render even if the address bar cannot be rewritten
        pass


def _raw_matches(raw: list[str], url_value: str | list[str]) -> bool:
    if isinstance(url_value, list):
        return list(raw) == url_value
    return len(raw) == 1 and raw[0] == url_value


def _fmt_number(x: Any) -> str:
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, int):
        return str(x)
    return f"{float(x):.6g}"


def int_slider(
    label: str,
    key: str,
    low: int,
    high: int,
    default: int,
    *,
    step: int = 1,
    help: str | None = None,
    where: Any = None,
) -> int:
    """An integer slider bound to ``?key=``. Out-of-range URL values are clamped with a notice.

    When the range is a single value (e.g. a one-token text), it is shown as fixed text instead: Streamlit
    refuses a slider whose minimum equals its maximum.
    """
    where = where or st
    high = max(high, low)
    default = min(max(default, low), high)

    def make() -> Any:
        if high == low:
            where.markdown(f"**{label}**: {low} (the only value possible here)", help=help)
            return low
        return where.slider(label, low, high, default, step=step, key=key, help=help, bind="query-params")

    return int(
        _bind(
            key,
            label,
            default,
            int_parser(label, low, high),
            _fmt_number,
            make,
            valid_now=lambda v: isinstance(v, int) and low <= v <= high,
        )
    )


def int_input(
    label: str,
    key: str,
    low: int,
    high: int,
    default: int,
    *,
    step: int = 1,
    help: str | None = None,
    where: Any = None,
) -> int:
    """An integer number box bound to ``?key=`` (for seeds and exact counts)."""
    where = where or st
    default = min(max(default, low), high)
    return int(
        _bind(
            key,
            label,
            default,
            int_parser(label, low, high),
            _fmt_number,
            lambda: where.number_input(label, low, high, default, step=step, key=key, help=help, bind="query-params"),
            valid_now=lambda v: isinstance(v, int) and low <= v <= high,
        )
    )


def float_slider(
    label: str,
    key: str,
    low: float,
    high: float,
    default: float,
    *,
    step: float = 0.01,
    help: str | None = None,
    where: Any = None,
) -> float:
    """A float slider bound to ``?key=`` (a single-value range is shown as fixed text, as in int_slider)."""
    where = where or st
    high = max(high, low)
    default = min(max(default, low), high)

    def make() -> Any:
        if high == low:
            where.markdown(f"**{label}**: {_fmt_number(float(low))} (the only value possible here)", help=help)
            return float(low)
        return where.slider(
            label, float(low), float(high), float(default), step=float(step), key=key, help=help, bind="query-params"
        )

    return float(
        _bind(
            key,
            label,
            default,
            float_parser(label, low, high),
            _fmt_number,
            make,
            equal=lambda a, b: abs(float(a) - float(b)) <= step / 2 + 1e-12,
            valid_now=lambda v: isinstance(v, (int, float)) and low <= v <= high,
        )
    )


def log_slider(
    label: str,
    key: str,
    options: Sequence[float],
    default: float,
    *,
    fmt: Callable[[Any], str] = lambda x: f"{x:g}",
    help: str | None = None,
    where: Any = None,
    log: bool = True,
) -> float:
    """A slider over log-spaced numbers, bound to ``?key=``; URL values snap to the nearest option."""
    where = where or st
    options = list(options)
    default = min(options, key=lambda o: abs(math.log(o) - math.log(default)) if log else abs(o - default))
    return float(
        _bind(
            key,
            label,
            default,
            snap_parser(label, options, fmt, log),
            fmt,
            lambda: where.select_slider(
                label, options=options, value=default, format_func=fmt, key=key, help=help, bind="query-params"
            ),
            valid_now=lambda v: v in options,
        )
    )


def range_slider(
    label: str,
    key: str,
    options: Sequence[float],
    default: tuple[float, float],
    *,
    fmt: Callable[[Any], str] = lambda x: f"{x:g}",
    help: str | None = None,
    where: Any = None,
    log: bool = True,
) -> tuple[float, float]:
    """A two-handle slider over numeric options, bound to ``?key=low&key=high``."""
    where = where or st
    options = list(options)
    value = _bind(
        key,
        label,
        tuple(default),
        range_parser(label, options, fmt, log),
        lambda v: [fmt(v[0]), fmt(v[1])],
        lambda: where.select_slider(
            label, options=options, value=tuple(default), format_func=fmt, key=key, help=help, bind="query-params"
        ),
        equal=lambda a, b: tuple(a) == tuple(b),
        valid_now=lambda v: isinstance(v, (tuple, list)) and len(v) == 2 and all(x in options for x in v),
    )
    return float(value[0]), float(value[1])


def choice(
    label: str,
    key: str,
    options: Sequence[Any],
    default: Any,
    *,
    fmt: Callable[[Any], str] = str,
    help: str | None = None,
    where: Any = None,
    widget: str = "selectbox",
) -> Any:
    """One of a few options (selectbox, radio or select_slider), bound to ``?key=``.

    Share links carry ``str(option)``; Streamlit writes the displayed label (``fmt``) into the address bar, and
    a link with the other form is applied without the address bar showing it. So prefer short, readable
    options without ``fmt`` (e.g. "clustered", "real").
    """
    where = where or st
    options = list(options)
    if default not in options:
        default = options[0]

    def make() -> Any:
        if widget == "radio":
            return where.radio(
                label,
                options,
                index=options.index(default),
                format_func=fmt,
                key=key,
                help=help,
                horizontal=True,
                bind="query-params",
            )
        if widget == "select_slider":
            return where.select_slider(
                label, options=options, value=default, format_func=fmt, key=key, help=help, bind="query-params"
            )
        return where.selectbox(
            label, options, index=options.index(default), format_func=fmt, key=key, help=help, bind="query-params"
        )

    return _bind(key, label, default, choice_parser(label, options, fmt), fmt, make, valid_now=lambda v: v in options)


def toggle(label: str, key: str, default: bool = False, *, help: str | None = None, where: Any = None) -> bool:
    """An on/off switch bound to ``?key=true|false``."""
    where = where or st
    return bool(
        _bind(
            key,
            label,
            bool(default),
            bool_parser(label),
            _fmt_number,
            lambda: where.toggle(label, value=bool(default), key=key, help=help, bind="query-params"),
        )
    )


def text_area(
    label: str,
    key: str,
    default: str,
    *,
    max_chars: int = MAX_TEXT_CHARS,
    height: int = 120,
    help: str | None = None,
    where: Any = None,
) -> str:
    """Free text bound to ``?key=`` (cut to ``max_chars``, control characters removed)."""
    where = where or st
    value = _bind(
        key,
        label,
        default,
        text_parser(label, max_chars),
        lambda v: str(v),
        lambda: where.text_area(
            label, value=default, max_chars=max_chars, height=height, key=key, help=help, bind="query-params"
        ),
        equal=lambda a, b: True,
    )
    # The URL may carry more than the box allows; the engine only ever sees the cleaned, cut text.
    return "".join(ch for ch in str(value) if ch.isprintable() or ch in "\n\t")[:max_chars]


def text_line(
    label: str, key: str, default: str, *, max_chars: int = 200, help: str | None = None, where: Any = None
) -> str:
    """A one-line text box bound to ``?key=``."""
    where = where or st

    def parse(raw: Any) -> tuple[Any, str | None]:
        text = raw[-1] if isinstance(raw, list) and raw else raw
        if not isinstance(text, str):
            return None, None
        cleaned = "".join(ch for ch in text if ch.isprintable())[:max_chars]
        return cleaned, (f"**{label}**: cleaned the value." if cleaned != text else None)

    value = _bind(
        key,
        label,
        default,
        parse,
        lambda v: str(v),
        lambda: where.text_input(label, value=default, max_chars=max_chars, key=key, help=help, bind="query-params"),
        equal=lambda a, b: True,
    )
    return "".join(ch for ch in str(value) if ch.isprintable())[:max_chars]


def multiselect(
    label: str,
    key: str,
    options: Sequence[str],
    default: Sequence[str],
    *,
    fmt: Callable[[Any], str] = str,
    max_items: int | None = None,
    help: str | None = None,
    where: Any = None,
) -> list[str]:
    """Several of a list of names, bound to repeated ``?key=a&key=b`` (see ``choice`` about ``fmt``)."""
    where = where or st
    options = list(options)
    default = [d for d in default if d in options]
    limit = max_items or len(options)
    value = _bind(
        key,
        label,
        list(default),
        multi_parser(label, options, limit),
        lambda v: list(v),
        lambda: where.multiselect(
            label,
            options,
            default=default,
            format_func=fmt,
            key=key,
            help=help,
            max_selections=max_items,
            bind="query-params",
        ),
        valid_now=lambda v: isinstance(v, list) and all(x in options for x in v),
        widget_url=lambda v: [fmt(x) for x in v],
    )
    return list(value)


# ------------------------------------------------------------------ link, settings, end of page


def query_string(state: PageState | None = None) -> str:
    """The query string that reproduces the current view (non-default values, plus lesson flags)."""
    state = state or current()
    pairs: list[tuple[str, str]] = []
    for control in state.controls.values():
        if _values_equal(control.value, control.default):
            continue
        url_value = control.to_url(control.value)
        for item in url_value if isinstance(url_value, list) else [url_value]:
            pairs.append((control.key, item))
    if lesson_mode():
        pairs.append((LESSON_KEY, "1"))
        hide = sorted(k for k in hidden_keys() if re.fullmatch(r"[A-Za-z0-9_]{1,40}", k))
        if hide:
            pairs.append((HIDE_KEY, ",".join(hide)))
    for key in CARRIED_KEYS:
        raw = _plain_param(key)
        if raw is not None and re.fullmatch(r"[A-Za-z0-9_]{1,40}", raw):
            pairs.append((key, raw))
    return urllib.parse.urlencode(pairs, safe=",/")


def _values_equal(a: Any, b: Any) -> bool:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return list(a) == list(b)
    if isinstance(a, float) or isinstance(b, float):
        try:
            return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
        except (TypeError, ValueError):
            return False
    return bool(a == b)


def page_url(state: PageState | None = None) -> str:
    """The full shareable URL of this view (absolute when the browser told us its address)."""
    state = state or current()
    base = None
    try:
        base = st.context.url
    except Exception:  # noqa: BLE001 - no browser context (tests, bare mode)
        base = None
    if not base:
        base = "/" + state.url_path
    query = query_string(state)
    return f"{base}?{query}" if query else base


def settings_payload(state: PageState | None = None) -> dict[str, Any]:
    """JSON-able settings: every control's value in URL form, plus the page and the link."""
    state = state or current()
    params: dict[str, Any] = {}
    for control in state.controls.values():
        params[control.key] = control.to_url(control.value)
    return {"version": SETTINGS_VERSION, "page": state.page, "url": page_url(state), "params": params}


def _load_settings_callback(upload_key: str, page: str) -> None:
    """Runs before the script (a widget callback), so it may set widget values."""
    file = st.session_state.get(upload_key)
    if file is None:
        return
    session = _session()
    try:
        payload = json.loads(file.getvalue()[:200_000].decode("utf-8"))
        params = payload["params"]
        if not isinstance(params, dict):
            raise ValueError("params is not an object")
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        session["notices"].setdefault(page, []).append(f"The settings file could not be read: `{_cut(str(exc))}`.")
        return
    specs: dict[str, Control] = session.get("controls", {}).get(page, {})
    applied, ignored = 0, []
    for key, raw in params.items():
        control = specs.get(key)
        if control is None:
            ignored.append(str(key))
            continue
        raw_list = raw if isinstance(raw, list) else [str(raw)]
        value, problem = control.parse([str(x) for x in raw_list] if isinstance(raw, list) else str(raw))
        if problem:
            session["notices"].setdefault(page, []).append(problem)
        if value is None:
            continue
        if control.hidden:
            session["hidden"].setdefault(page, {})[key] = value
        else:
            st.session_state[key] = value
        applied += 1
    message = f"Loaded {applied} setting(s) from the file."
    if ignored:
        message += f" Ignored unknown: `{_cut(ignored)}`."
    session["notices"].setdefault(page, []).append(message)


def finish_page() -> None:
    """End of a page run: unknown-parameter notice, notices, copy link, settings export/import."""
    state = current()
    session = _session()
    session.setdefault("controls", {})[state.page] = dict(state.controls)
    if state.first_run:
        unknown = [k for k in state.raw if k not in state.controls and k not in PLAIN_KEYS]
        if unknown:
            notice(f"Ignored unknown URL parameter(s): `{_cut(unknown)}`.")
        if lesson_mode():
            names = hidden_keys() - set(state.controls)
            if names:
                notice(f"Lesson mode: `{_cut(sorted(names))}` matched no control on this page.")
    _render_notices(state)
    if not state.share_drawn:
        draw_share_link(state)
    _render_upload(state)
    state.footer_fragment = _fragment_id()
    # A fragment rerun reuses this state: its URL values were applied in this run and must not be re-applied.
    state.first_run = False
    state.finished = True


def fragment_rerun() -> bool:
    """True inside an ``st.fragment`` rerun (only some fragments run, not the page)."""
    from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

    ctx = get_script_run_ctx(suppress_warning=True)
    return bool(ctx.fragment_ids_this_run) if ctx is not None else current().finished


def finish_fragment(share: bool = True) -> None:
    """End of a page's ``st.fragment`` section: redraw the share link with the fragment's controls, and on a
    fragment rerun show new notices inside the fragment (the page's notice box is outside it).

    share: False for every fragment of a page but one, which draws the share box (a page has one); the others'
    controls reach the browser's URL at once and the share box on the next full run.
    """
    state = current()
    if state.finished:
        notices = _session()["notices"].get(state.page, [])
        if notices:
            st.warning("  \n".join(["**Some settings were adjusted:**", *(f"- {m}" for m in notices)]), icon="⚠️")
    # The footer this fragment drew when a job stopped the full run inside it goes if a rerun does not redraw it.
    footer = state.footer_fragment is not None and state.footer_fragment == _fragment_id()
    if share or footer:
        draw_share_link(state)
    if footer:
        _render_upload(state)


def finish_stopped() -> None:
    """End of a run stopped early (a cancelled or failed job), before ``st.stop()``: the page's footer on a full
    run; on a fragment rerun only the fragment's end (the footer outside it stays as the last full run drew it)."""
    state = current()
    if fragment_rerun():
        finish_fragment(share=state.share_fragment is not None and state.share_fragment == _fragment_id())
    else:
        finish_page()  # inside a fragment it draws the footer from there: see footer_fragment


def _fragment_id() -> str | None:
    from streamlit.runtime.scriptrunner_utils.script_run_context import ThreadState

    return ThreadState.get().fragment_id


def _render_notices(state: PageState) -> None:
    notices = _session()["notices"].get(state.page, [])
    if not notices:
        return
    with state.notice_box:
        st.warning("  \n".join(["**Some link settings were adjusted:**", *(f"- {m}" for m in notices)]), icon="⚠️")
        if st.button("Dismiss", key="_ui_dismiss_notices"):
            _session()["notices"][state.page] = []
            st.rerun()


def draw_share_link(state: PageState | None = None) -> None:
    """The share box: the view's link and its settings file. A page with an ``st.fragment`` draws it from the
    fragment (``finish_fragment``) so that a fragment rerun redraws it in place, in the sidebar."""
    state = state or current()
    state.share_drawn = True
    state.share_fragment = _fragment_id()
    box = state.link_box if state.link_box is not None else st.sidebar
    url = page_url(state)
    payload = settings_payload(state)
    with box:
        st.markdown("**Share this view**")
        share_link_box(url, key="_ui_share_link")
        st.caption("Copy with the icon at the right of the box. Opening the link reproduces these settings.")
        st.download_button(
            "Download settings (JSON)",
            json.dumps(payload, indent=2),
            file_name=f"{state.url_path}_settings.json",
            mime="application/json",
            key="_ui_settings_json",
            on_click="ignore",
        )


def _render_upload(state: PageState) -> None:
    """Drawn by the full run only: loading a file sets controls outside any fragment, so it must rerun the page."""
    box = state.link_box if state.link_box is not None else st.sidebar
    with box:
        upload_key = f"_ui_settings_upload_{state.url_path}"
        st.file_uploader(
            "Load settings (JSON)",
            type=["json"],
            key=upload_key,
            on_change=_load_settings_callback,
            args=(upload_key, state.page),
            help="A settings file downloaded from this page; its values replace the current ones.",
        )


# ------------------------------------------------------------------ server-side limits


def within_limits(check: Callable[[], Any], where: Any = None) -> bool:
    """Run a ``core.limits`` check before heavy work; on refusal show its message (knob, largest value that
    fits) as an error and return False, so the page skips the work instead of holding the server."""
    from core.errors import ParameterError

    try:
        check()
    except ParameterError as exc:
        (where or st).error(f"Refused before starting, to keep this shared server responsive: {exc}")
        return False
    return True
