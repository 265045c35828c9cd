"""One page run, from start to end: the URL snapshot, notices, lesson and presenter mode, the share box, the
settings download/upload, and the server-limit check before heavy work.

Per page run the flow is:
  ``begin_page`` (snapshot of the raw URL) -> controls (``ui/widgets.py``; each parses its raw value once per page
  visit) -> ``finish_page`` (unknown parameters, notices, copy link, settings download/upload).
"""

from __future__ import annotations

import json
import math
import re
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import streamlit as st

from service import dask_client, result_cache
from ui import streamlit_compat
from ui.share_box import share_link_box
from ui.url_params import (
    CARRIED_KEYS,
    HIDE_KEY,
    LESSON_KEY,
    PLAIN_KEYS,
    Parser,
    cut_value,
    plain_param,
    presenter_on,
    raw_params,
)

SETTINGS_VERSION = 1
SETTINGS_UPLOAD_MB = 1  # a settings file is about 1 KB (the server's own limit is the heads uploader's)

_STATE = "_ui_state"


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


def session_store() -> dict[str, Any]:
    """This session's bookkeeping across pages: pages seen, notices and hidden controls' values per page."""
    return st.session_state.setdefault(_STATE, {"seen": set(), "notices": {}, "hidden": {}})


def begin_page(page: str, url_path: str) -> PageState:
    """Start a page run: snapshot the raw URL and make the notice area. Called by ``ui.page``."""
    session = session_store()
    first = page not in session["seen"]
    session["seen"].add(page)
    if first:
        session["notices"][page] = []
        session["hidden"][page] = {}
    state = PageState(page=page, url_path=url_path, raw=raw_params() if first else {}, first_run=first)
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
    notices = session_store()["notices"].setdefault(state.page, [])
    if message not in notices:
        notices.append(message)


# ------------------------------------------------------------------ lesson mode


def lesson_mode() -> bool:
    """True when the URL asks for lesson mode (``?lesson=1``)."""
    raw = plain_param(LESSON_KEY)
    return raw is not None and raw.strip().lower() in ("1", "true", "yes", "on")


def presenter_mode() -> bool:
    """True when the URL asks for the presenter view (``?present=1``)."""
    return presenter_on()


def hidden_keys() -> set[str]:
    """Controls a teacher hid with ``?lesson=1&hide=seed,device``. Without ``hide``, lesson mode hides nothing."""
    if not lesson_mode():
        return set()
    raw = plain_param(HIDE_KEY) or ""
    return {part.strip() for part in raw[:2000].split(",") if part.strip()}


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
        raw = plain_param(key)
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
    session = session_store()
    try:
        payload = json.loads(file.getvalue()[:200_000].decode("utf-8"))
        params = payload["params"]
        if not isinstance(params, dict):
            raise ValueError("params is not an object")
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        message = f"The settings file could not be read: `{cut_value(str(exc))}`."
        session["notices"].setdefault(page, []).append(message)
        return
    specs: dict[str, Control] = session.get("controls", {}).get(page, {})
    applied, ignored = 0, []
    for key, raw in params.items():
        control = specs.get(key)
        if control is None:
            ignored.append(str(key))
            continue
        value, problem = control.parse([str(x) for x in raw] if isinstance(raw, list) else str(raw))
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
        message += f" Ignored unknown: `{cut_value(ignored)}`."
    session["notices"].setdefault(page, []).append(message)


def finish_page() -> None:
    """End of a page run: unknown-parameter notice, notices, copy link, settings export/import."""
    state = current()
    session = session_store()
    session.setdefault("controls", {})[state.page] = dict(state.controls)
    _cache_backend_notice(session)
    if state.first_run:
        unknown = [k for k in state.raw if k not in state.controls and k not in PLAIN_KEYS]
        if unknown:
            notice(f"Ignored unknown URL parameter(s): `{cut_value(unknown)}`.")
        if lesson_mode():
            names = hidden_keys() - set(state.controls)
            if names:
                notice(f"Lesson mode: `{cut_value(sorted(names))}` matched no control on this page.")
    _render_notices(state)
    if not state.share_drawn:
        draw_share_link(state)
    _render_upload(state)
    _publish_room(state)
    state.footer_fragment = _fragment_id()
    # A fragment rerun reuses this state: its URL values were applied in this run and must not be re-applied.
    state.first_run = False
    state.finished = True


def _publish_room(state: PageState, draw: bool = True) -> None:
    """A class room's teacher: publish this page, its settings and its lesson step (ui/room.py)."""
    if "_ae_room" in st.session_state:
        from ui import room

        room.finish(state.url_path, query_string(state), draw)


def _cache_backend_notice(session: dict[str, Any]) -> None:
    """Once per session each: the shared result cache (Redis) or the compute cluster (Dask) does not answer, so this
    page computed without it."""
    problem = result_cache.backend_problem()
    if problem and not session.get("cache_backend_noticed"):
        session["cache_backend_noticed"] = True
        notice(f"**Result cache**: {problem} Results are computed here without it until it answers again.")

    unreachable = dask_client.problem()
    if unreachable and not session.get("cluster_noticed"):
        session["cluster_noticed"] = True
        notice(f"**Compute cluster**: {unreachable}. Heavy jobs compute on this server until it answers again.")


def fragment_rerun() -> bool:
    """True inside an ``st.fragment`` rerun (only some fragments run, not the page)."""
    ctx = streamlit_compat.script_run_ctx()
    return bool(ctx.fragment_ids_this_run) if ctx is not None else current().finished


def finish_fragment(share: bool = True) -> None:
    """End of a page's ``st.fragment`` section: redraw the share link with the fragment's controls, and on a
    fragment rerun show new notices inside the fragment (the page's notice box is outside it).

    share: False for every fragment of a page but one, which draws the share box (a page has one); the others'
    controls reach the browser's URL at once and the share box on the next full run.
    """
    state = current()
    if state.finished:
        notices = session_store()["notices"].get(state.page, [])
        if notices:
            st.warning("  \n".join(["**Some settings were adjusted:**", *(f"- {m}" for m in notices)]), icon="⚠️")
    # The footer this fragment drew when a job stopped the full run inside it goes if a rerun does not redraw it.
    footer = state.footer_fragment is not None and state.footer_fragment == _fragment_id()
    if share or footer:
        draw_share_link(state)
    if share and state.finished:  # a fragment rerun: the full run drew the room's panel
        _publish_room(state, draw=False)
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
    return streamlit_compat.script_thread_state().fragment_id


def _render_notices(state: PageState) -> None:
    notices = session_store()["notices"].get(state.page, [])
    if not notices:
        return
    with state.notice_box:
        st.warning("  \n".join(["**Some link settings were adjusted:**", *(f"- {m}" for m in notices)]), icon="⚠️")
        if st.button("Dismiss", key="_ui_dismiss_notices"):
            session_store()["notices"][state.page] = []
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
            max_upload_size=SETTINGS_UPLOAD_MB,
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
