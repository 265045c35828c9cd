"""The URL-bound controls: sliders, number boxes, choices, toggles, multiselects and text boxes.

Every control is a Streamlit widget with ``bind="query-params"`` and ``key`` = the URL parameter name. On a page's
first run each control parses its raw URL value (``ui/url_params.py``: clamped or snapped where that makes sense,
with a notice saying what happened) before Streamlit sees it, and registers itself with the page run
(``ui/page_lifecycle.py``) for the share link and the settings file.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import streamlit as st

from ui.page_lifecycle import Control, current, hidden_keys, notice, session_store
from ui.url_params import (
    MAX_TEXT_CHARS,
    Parser,
    bool_parser,
    choice_parser,
    cut_value,
    float_parser,
    fmt_number,
    int_parser,
    line_parser,
    multi_parser,
    range_parser,
    raw_matches,
    replace_url_value,
    snap_parser,
    text_parser,
)

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
    session = session_store()
    same = equal or (lambda a, b: a == b)
    hidden = key in hidden_keys()
    raw = state.raw.get(key)
    fixed: Any = None
    if state.first_run and raw is not None:
        fixed, problem = parse(raw)
        if problem:
            notice(problem)
        if not hidden and (fixed is None or not raw_matches(raw, (widget_url or to_url)(fixed))):
            # Streamlit parses the URL value itself when the widget is made, and some values crash it
            # (`?seed=inf` -> OverflowError); so it only ever sees the cleaned value, or none.
            replace_url_value(key, None if fixed is None else (widget_url or to_url)(fixed))
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
            used = cut_value(to_url(value))
            notice(f"**{label}**: the link's value `{cut_value(raw)}` could not be applied; using `{used}`.")
    state.controls[key] = Control(key, label, default, value, to_url, parse, hidden)
    return value


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
            fmt_number,
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
            fmt_number,
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
            where.markdown(f"**{label}**: {fmt_number(float(low))} (the only value possible here)", help=help)
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
            fmt_number,
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
            fmt_number,
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
    value = _bind(
        key,
        label,
        default,
        line_parser(label, max_chars),
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
