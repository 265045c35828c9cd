"""A student's page asks its server for the room's revision (``GET _room/<code>/version?after=<seen>``, served by
``deploy/room_version.py``), which holds the request until the room moves (or for up to 20 s), and reruns only when
it changed: a move reaches the student within a quarter second of the server seeing it, and an idle room costs one
answer per student and 20 s, not a Streamlit rerun. A request answered early (a replica holding too many) is asked
again no sooner than POLL_MS after it started, so a student asks at most once a second. It also keeps the student's
id in a cookie, so a reload is the same student.

A small ``st.components.v2`` component, as ``ui/plotly_chart.py``: no build, no iframe (it runs in the page itself, so
the relative URL keeps a proxy's path prefix). It fires its ``changed`` trigger (a rerun of the page) only when the
revision it fetched is newer than the one this page run drew, or once when the room is gone (404).

The endpoint exists only under the app's server (``deploy/serve.py``, which also serves the Plotly bundle); under
plain ``streamlit run app.py`` and in AppTest ``served()`` is False and ``ui/room.py`` polls with a fragment instead.
"""

from __future__ import annotations

import functools
from typing import Any

import streamlit as st

from ui import plotly_chart

COMPONENT_NAME = "attention_explorer.room_poll"
TEST_ID = "aeRoomPoll"
POLL_MS = 1000

HTML = f'<div data-testid="{TEST_ID}" hidden></div>'
JS = """
export default function ({ data, parentElement, setTriggerValue }) {
  if (data.student && data.cookie) {  // this browser's student id: a reload answers as the same student
    const kept = `${data.cookie}=${encodeURIComponent(data.student)}`;
    document.cookie = `${kept}; path=/; max-age=${data.max_age}; SameSite=Lax`;
  }
  const poll = parentElement.__aeRoomPoll || (parentElement.__aeRoomPoll = { gone: false, abort: null });
  poll.seen = data.seen;  // the revision this page run drew
  poll.url = `_room/${encodeURIComponent(data.code)}/version`;  // relative: a proxy's path prefix stays
  if (!poll.abort || poll.abort.signal.aborted) {
    const controller = (poll.abort = new AbortController());  // this loop's: an unmount ends it, a mount starts one
    const ask = async () => {  // one request at a time, held by the server until the room moves
      while (!controller.signal.aborted) {
        const started = Date.now();
        try {
          const url = `${poll.url}?after=${poll.seen}`;
          const options = { cache: "no-store", credentials: "same-origin", signal: controller.signal };
          const response = await fetch(url, options);
          if (response.status === 200) {
            const body = await response.json();
            if (typeof body.version === "number" && body.version > poll.seen) {
              poll.seen = body.version;
              setTriggerValue("changed", body.version);
            }
          } else if (response.status === 404 && !poll.gone) {
            poll.gone = true;  // the page run says why (a wrong or expired room)
            setTriggerValue("changed", -1);
          }
        } catch (error) {
          // offline for a moment, or unmounted (aborted): the loop asks again or ends
        }
        const wait = data.interval_ms - (Date.now() - started);  // an early answer: ask again no sooner than this
        if (!controller.signal.aborted && wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      }
    };
    ask();
  }
  return () => poll.abort.abort();
}
"""


def served() -> bool:
    """True under the app's server, which serves both the Plotly bundle and the room's version endpoint."""
    return plotly_chart.bundle_served()


@functools.cache
def renderer() -> Any:
    return st.components.v2.component(COMPONENT_NAME, html=HTML, js=JS, isolate_styles=False)


def watch(code: str, seen: int, student: str = "", keep_s: int = 0) -> None:
    """Mount (or update) the poll: rerun this page when room ``code`` is past revision ``seen``; and keep ``student``
    (this session's student id) in the browser's ``rooms.STUDENT_COOKIE`` for ``keep_s`` seconds, which the page
    reads back after a reload (``st.context.cookies``), so a student answers once per browser, not per session."""
    from service import rooms

    renderer()(
        data={
            "code": code,
            "seen": int(seen),
            "interval_ms": POLL_MS,
            "student": student,
            "cookie": rooms.STUDENT_COOKIE,
            "max_age": int(keep_s),
        },
        key="ae_room_poll",
        on_changed_change=_ignore,
        height=0,
    )


def _ignore() -> None:
    """The trigger's rerun is the point; the page run reads the room itself."""
