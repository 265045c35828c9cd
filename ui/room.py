"""A class in one room, on every page (the room logic itself is ``service/rooms.py``, without Streamlit).

    /?room=new                 opens a room and lands on the teacher's link: ?room=<code>&key=<key>
    ?room=<code>               on any page: join as a student; the page follows the teacher's page, settings and
                               lesson step (its browser polls the room's revision every 1 s), until "Leave to
                               explore" (and "Rejoin" brings it back)

``ui.page`` calls ``begin`` and ``ui.finish`` calls ``finish``: a teacher's page publishes where it is at the end of
each run; a student's browser polls the room's revision (``ui/room_poll.py``, ``GET _room/<code>/version``) and
reruns the page only when it changed (without the app's server, an ``st.fragment`` polls instead). A lesson step
with a ``question`` opens it in the room: students answer once, the teacher sees the counts and reveals the answer
the page measured (from its metric tiles, drawn with ``tile``, which records each real value). Until the Reveal,
``answers_hidden()`` is True on every page in the room (the teacher's, which the projector shows, too): the page draws
its answering numbers as "?" (tiles), without them (chart titles, tables, CSV) and withholds the step's text. Nothing
here runs for a visitor without ``room=``.
"""

from __future__ import annotations

import html
import threading
import time
import urllib.parse
from typing import Any

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from service import rooms
from ui import page_registry, room_poll, streamlit_compat
from ui.url_params import FOLLOW_KEY, plain_param

ROOM_KEY = "room"
KEY_KEY = "key"
POLL_S = 1.0  # a student's page sees a teacher's move within this (plus one page run)
_SESSION = "_ae_room"
_TILES = "_ae_room_tiles"
NOT_FORWARDED = ("present", ROOM_KEY, KEY_KEY, FOLLOW_KEY)  # the teacher's own view; never the key

# A student's phone leads with the picture: the page's first chart (or the lesson step's focus figure) moves above the
# intro and controls, as in presenter view, and the room bar and lesson box follow it.
STUDENT_CSS = """<style>
@media (max-width: 700px) {
[data-testid="stMain"] [data-testid="stVerticalBlock"]:not([data-testid="stColumn"] *)
  > :nth-child(1 of :has([data-testid="aePlotlyChart"], [data-testid="stPlotlyChart"], [data-testid="stDataFrame"],
  [data-testid="stTable"])) {order: -1;}
[data-testid="stMain"] [data-testid="stVerticalBlock"]:not([data-testid="stColumn"] *) > :has(> .st-key-ae_room)
  {order: -4;}
}
.st-key-ae_room {gap: 0.3rem;}
</style>"""


# The teacher's presenter view: the room's box (code, live counts, Reveal) lifted under the title with the lesson's box,
# compact, so the chart still shows on a 1280 x 720 projector.
TEACHER_PRESENTER_CSS = """<style>
:has(> .st-key-ae_room) {order: -3;}
.st-key-ae_room {gap: 0.15rem; padding: 0.35rem 0.8rem !important;}
.st-key-ae_room p, .st-key-ae_room a {font-size: 0.74rem; line-height: 1.35; margin: 0 !important;}
.st-key-ae_room [data-testid="stAlert"] > div {padding: 0.3rem 0.8rem;}
.st-key-ae_room [data-testid="stPopover"] button, .st-key-ae_room [data-testid="stBaseButton-primary"]
  {min-height: 0; padding: 0.1rem 0.6rem;}
</style>"""


def session() -> dict[str, Any] | None:
    """This session's room (code, key for a teacher, student id, following, version seen), or None."""
    return st.session_state.get(_SESSION)


HIDDEN_VALUE = "?"  # what a tile shows while its number would answer the room's open question
HIDDEN_NOTE = "hidden until Reveal"


def record_tile(label: str, value: Any) -> None:
    """Keep a tile's real value for the room's measured answer (a teacher's page only: the dict exists only there).
    The measured answer of a question is read from them, as tests/test_step_claims.py reads the tiles."""
    try:
        tiles = st.session_state.get(_TILES)
    except Exception:  # noqa: BLE001 - outside a script run (bare mode)
        return
    if tiles is not None:
        tiles[str(label)] = str(value)


def tile(where: Any, label: str, value: str, *, hidden: bool = False, **kwargs: Any) -> DeltaGenerator:
    """A metric tile whose number may answer the room's question: its real value is recorded for the measured
    answer, and while ``hidden`` (``answers_hidden()``) it draws HIDDEN_VALUE, without delta, instead of the number."""
    record_tile(label, value)
    if hidden:
        return where.metric(
            label,
            HIDDEN_VALUE,
            delta=HIDDEN_NOTE,
            delta_color="off",
            delta_arrow="off",
            help="The class predicts first: the teacher's Reveal shows this number.",
        )
    return where.metric(label, value, **kwargs)


def answers_hidden() -> bool:
    """True while this session's room asks a question and has not revealed it (``rooms.answers_hidden``, decided
    once per page run in ``begin``): the page then hides every number that answers it. False without a room."""
    mine = session()
    return bool(mine and mine.get("hidden"))


def _lesson_step() -> tuple[int, str, Any]:
    """The URL's lesson step (from 1; 0 outside a lesson), the room id of its question ("<lesson>-<step>", "" for
    none) and the question (None for none)."""
    from ui import lessons
    from ui.url_params import GUIDE_KEY, STEP_KEY

    found = lessons.position(plain_param(GUIDE_KEY), plain_param(STEP_KEY))
    if not found:
        return 0, "", None
    step = found[1] + 1
    question = found[0].steps[found[1]].question
    return step, ("" if question is None else f"{found[0].id}-{step}"), question


def _step_question_id() -> str:
    return _lesson_step()[1]


def _script(url_path: str) -> str:
    return page_registry.url_paths().get(url_path, "app.py")


def _student_url(code: str) -> str:
    base = ""
    try:
        base = st.context.url or ""
    except Exception:  # noqa: BLE001
        base = ""
    parts = urllib.parse.urlsplit(base)
    root = f"{parts.scheme}://{parts.netloc}/" if parts.netloc else "/"
    return f"{root}?{ROOM_KEY}={code}"


def begin(url_path: str) -> None:
    """Top of a page run (``ui.page``): open, join or follow the room the URL names."""
    raw = plain_param(ROOM_KEY)
    if raw is None:
        if session() is not None:
            st.session_state.pop(_SESSION, None)
            st.session_state.pop(_TILES, None)
        return
    if raw.strip().lower() == "new":
        _open_new()
        return
    try:
        room = rooms.state(raw)
    except rooms.RoomError as error:
        st.error(f"**Room**: {error}", icon=":material/groups:")
        st.session_state.pop(_SESSION, None)
        _states.pop(str(raw), None)
        return
    key = plain_param(KEY_KEY)
    mine = session()
    if mine is None or mine.get("code") != room.code:
        following = (plain_param(FOLLOW_KEY) or "1").strip() != "0"
        student = _kept_student() or rooms.student_id()  # the browser's own id survives a reload (its cookie)
        mine = {"code": room.code, "student": student, "following": following, "version": -1}
        st.session_state[_SESSION] = mine
    if rooms.is_teacher(room, key):
        mine["key"] = key
        mine["hidden"] = rooms.answers_hidden(room, _step_question_id(), teacher=True)
        st.session_state[_TILES] = {}
        _teacher_bar(room)
        return
    mine.pop("key", None)
    st.session_state.pop(_TILES, None)
    if key:
        st.warning("This link's key does not open room " + room.code + ": you joined it as a student.")
    if mine["following"] and mine["version"] != room.version and room.version > 0:
        _follow(room, mine, url_path)
    mine["version"] = room.version
    mine["hidden"] = rooms.answers_hidden(room, _step_question_id(), teacher=False, following=mine["following"])
    st.html(STUDENT_CSS)
    _student_bar(room, mine)


def _kept_student() -> str | None:
    """The student id this browser kept in its cookie (set by the room's poll, ``room_poll.watch``), or None."""
    try:
        return rooms.kept_student(st.context.cookies.get(rooms.STUDENT_COOKIE))
    except Exception:  # noqa: BLE001 - no request behind this run (AppTest, bare mode)
        return None


def _open_new() -> None:
    made = st.session_state.get("_ae_room_made")
    try:
        if made is None or _expired(made[0]):
            room = rooms.create()
            made = (room.code, room.key)
            st.session_state["_ae_room_made"] = made
    except rooms.RoomError as error:
        st.error(f"**Room**: {error}", icon=":material/groups:")
        return
    st.query_params[ROOM_KEY] = made[0]
    st.query_params[KEY_KEY] = made[1]
    st.rerun()


def _expired(code: str) -> bool:
    try:
        rooms.state(code)
    except rooms.RoomError:
        return True
    return False


def _follow(room: rooms.RoomState, mine: dict[str, Any], here: str) -> None:
    """Go to the teacher's page and settings: forget this session's parsed URL and widget values, so the new page
    run applies the teacher's query as a fresh link would."""
    from ui import page_lifecycle

    store = page_lifecycle.session_store()
    for controls in store.get("controls", {}).values():
        for key in controls:
            st.session_state.pop(key, None)
    store["seen"].clear()
    mine["version"] = room.version
    pairs = urllib.parse.parse_qsl(room.query, keep_blank_values=True)
    params: dict[str, list[str]] = {}
    for key, value in pairs:
        params.setdefault(key, []).append(value)
    params[ROOM_KEY] = [room.code]
    streamlit_compat.release_query_bindings()  # switch_page refuses to set a URL parameter bound to a widget
    st.switch_page(_script(room.page), query_params=params)


def _teacher_bar(room: rooms.RoomState) -> None:
    from ui.url_params import presenter_on

    if presenter_on():
        st.html(TEACHER_PRESENTER_CSS)
    link = _student_url(room.code)
    with st.container(border=True, key="ae_room"):
        cols = st.columns([3, 1], vertical_alignment="center")
        cols[0].markdown(
            f"**Room {room.code}** · students open "
            f'<a href="{html.escape(link, quote=True)}" target="_blank">{html.escape(link)}</a> '
            "· only this link moves the room",
            unsafe_allow_html=True,
        )
        with cols[1].popover("QR code", icon=":material/qr_code_2:"):
            import segno

            st.image(segno.make(link, error="m").png_data_uri(scale=6, border=2), caption=link)
        st.session_state["_ae_room_slot"] = st.container()


def _student_bar(room: rooms.RoomState, mine: dict[str, Any]) -> None:
    """The room's bar, drawn by the page run (a click in it reruns the page); the poll below draws nothing."""
    with st.container(border=True, key="ae_room"):
        cols = st.columns([3, 1], vertical_alignment="center")
        if mine["following"]:
            cols[0].markdown(f"**Room {room.code}** · following the teacher")
            cols[1].button("Leave to explore", key="ae_room_leave", on_click=_set_following, args=(False,))
        else:
            cols[0].markdown(f"**Room {room.code}** · exploring on your own")
            cols[1].button("Rejoin", key="ae_room_rejoin", type="primary", on_click=_set_following, args=(True,))
        if room.question_id:
            _student_question(room, mine)
        mine["question"] = _question_key(room)
        if room_poll.served():
            # The browser asks the room's revision (a rerun only when it moved) and keeps this student's id.
            room_poll.watch(room.code, room.rev, mine["student"], int(max(60.0, room.expires - time.time())))
        else:
            _student_poll(room.code)  # plain `streamlit run app.py` and AppTest: no endpoint, a fragment polls


def _question_key(room: rooms.RoomState) -> tuple[str, bool]:
    return (room.question_id, room.revealed)


# One read of a room's state per replica and STATE_TTL_S, whatever the number of students polling it.
STATE_TTL_S = 0.25
_states: dict[str, tuple[float, rooms.RoomState]] = {}
_states_lock = threading.Lock()


def shared_state(code: str) -> rooms.RoomState:
    now = time.monotonic()
    with _states_lock:
        found = _states.get(code)
        if found is not None and now - found[0] < STATE_TTL_S:
            return found[1]
    room = rooms.state(code)
    with _states_lock:
        if len(_states) > 1000:
            _states.clear()
        _states[code] = (now, room)
    return room


@st.fragment(run_every=POLL_S)
def _student_poll(code: str) -> None:
    """Without the app's server only (``room_poll.served()`` False). Every POLL_S: follow the teacher's move, or rerun
    the page when the question opened, closed or was revealed. It draws nothing, so a poll costs a state read (shared
    by the replica's students) and an empty fragment run."""
    mine = session()
    if mine is None or mine.get("code") != code:
        return
    try:
        room = shared_state(code)
    except rooms.RoomError:
        st.rerun(scope="app")  # the page run says why
        return
    if mine["following"] and mine["version"] != room.version:
        _follow(room, mine, "")
    if _question_key(room) != mine.get("question"):
        st.rerun(scope="app")


def _set_following(following: bool) -> None:
    """Leave to explore / Rejoin (a button callback: the run that follows already sees it)."""
    mine = session()
    if mine is None:
        return
    mine["following"] = following
    if following:
        mine["version"] = -1  # the next poll (or this run) follows the teacher at once
        if FOLLOW_KEY in st.query_params:
            del st.query_params[FOLLOW_KEY]
    else:
        st.query_params[FOLLOW_KEY] = "0"


def _answer(code: str, student: str, value: str) -> None:
    try:
        rooms.answer(code, student, value)
    except rooms.RoomError as error:
        st.session_state["_ae_room_problem"] = str(error)


def _reveal(code: str) -> None:
    mine = session() or {}
    try:
        rooms.reveal(code, mine.get("key"))
    except rooms.RoomError as error:
        st.session_state["_ae_room_problem"] = str(error)


def _choice_label(room: rooms.RoomState, value: str) -> str:
    return dict((v, label) for v, label in room.question.get("choices", [])).get(value, value)


def _student_question(room: rooms.RoomState, mine: dict[str, Any]) -> None:
    question = room.question
    st.markdown(f"**Predict:** {question['text']}")
    given = rooms.my_answer(room.code, mine["student"], room.question_id)
    if given is None:
        cols = st.columns(len(question["choices"]))
        for col, (value, label) in zip(cols, question["choices"], strict=False):
            col.button(
                label,
                key=f"ae_room_answer_{room.question_id}_{value}",
                width="stretch",
                on_click=_answer,
                args=(room.code, mine["student"], value),
            )
    else:
        st.caption(f"Your answer: **{_choice_label(room, given)}**. Wait for the teacher to reveal it.")
    if room.revealed:
        _reveal_box(room)


def _reveal_box(room: rooms.RoomState) -> None:
    counts = rooms.counts(room)
    measured = room.question.get("measured", "")
    total = sum(counts.values())
    answered = " · ".join(
        f"{label}: {counts.get(value, 0)} of {total}" for value, label in room.question.get("choices", [])
    )
    shown = _choice_label(room, measured) if measured else "not yet computed"
    st.success(f"**The page measured: {shown}**. The class answered: {answered}.", icon=":material/visibility:")


# ------------------------------------------------------------------ end of a teacher's run


def _published_query(query: str) -> str:
    pairs = [(k, v) for k, v in urllib.parse.parse_qsl(query, keep_blank_values=True) if k not in NOT_FORWARDED]
    return urllib.parse.urlencode(pairs, safe=",/")


def finish(url_path: str, query: str, draw: bool = True) -> None:
    """End of a page run (``ui.finish``): a teacher's page publishes its page, settings and lesson step, and opens
    the step's question (with the answer this run measured)."""
    mine = session()
    if mine is None or "key" not in mine:
        return
    step, question_id, question = _lesson_step()
    try:
        room = rooms.move(mine["code"], mine["key"], page=url_path, query=_published_query(query), step=step)
        if question is not None:
            measured = question.measured(st.session_state.get(_TILES) or {})
            previous = room.question.get("measured", "") if room.question_id == question_id else ""
            asked = rooms.Question(question.text, question.labelled_choices(), measured or previous)
            room = rooms.ask(mine["code"], mine["key"], question_id, asked)
        elif room.question_id:
            room = rooms.close_question(mine["code"], mine["key"])
    except rooms.RoomError as error:
        st.error(f"**Room**: {error}")
        return
    slot = st.session_state.get("_ae_room_slot")
    if draw and room.question_id and slot is not None:
        with slot:
            _teacher_question(mine["code"])


@st.fragment(run_every=POLL_S)
def _teacher_question(code: str) -> None:
    mine = session()
    try:
        room = rooms.state(code)
    except rooms.RoomError as error:
        st.error(str(error))
        return
    if not room.question_id or mine is None:
        return
    if mine.get("hidden") and room.revealed and room.question_id == _step_question_id():
        st.rerun(scope="app")  # Reveal (here or in another tab): the page's run shows its numbers again
    counts = rooms.counts(room)
    votes = " · ".join(f"{label}: **{counts.get(value, 0)}**" for value, label in room.question["choices"])
    cols = st.columns([5, 1], vertical_alignment="center")
    cols[0].markdown(f"**Question to the class:** {room.question['text']}  \nVotes · {votes}")
    if not room.revealed:
        cols[1].button(
            "Reveal", key="ae_room_reveal", type="primary", icon=":material/visibility:", on_click=_reveal, args=(code,)
        )
    problem = st.session_state.pop("_ae_room_problem", None)
    if problem:
        st.error(problem)
    if room.revealed:
        _reveal_box(room)
