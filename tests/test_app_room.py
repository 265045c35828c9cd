"""A class room on real pages (AppTest): ``?room=new`` opens one, the teacher's page publishes where it is and opens
the step's question with the answer its own tiles measured, a student's page follows, answers once, and sees the
reveal; a wrong code says so; a forged key moves nothing; a page without ``room=`` has no room."""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Callable
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from service import rooms
from ui import lessons
from ui import room as room_ui

TIMEOUT = 120


@pytest.fixture(autouse=True)
def _own_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTN_EXPLORER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("ATTN_EXPLORER_CACHE_URL", raising=False)


def _step(lesson_id: str, index: int) -> dict[str, str | list[str]]:
    values = urllib.parse.parse_qs(lessons.lessons()[lesson_id].step_query(index))
    return {k: v if len(v) > 1 else v[0] for k, v in values.items()} | {"n": "64"}


def _texts(at: AppTest) -> str:
    return "\n".join(str(e.value) for e in [*at.markdown, *at.error, *at.warning, *at.success, *at.caption])


def test_room_new_lands_on_the_teachers_link(open_page: Callable[..., AppTest]) -> None:
    at = open_page("app.py", room="new", timeout=TIMEOUT)
    assert not at.exception
    code, key = at.query_params["room"], at.query_params["key"]
    code = code[0] if isinstance(code, list) else code
    key = key[0] if isinstance(key, list) else key
    room = rooms.state(code)
    assert rooms.is_teacher(room, key)
    assert f"Room {code}" in _texts(at)
    assert f"/?room={code}" in _texts(at)  # the student link (its QR code is in the popover)


# A number with two or more decimals (an error such as 0.969; tau = 0.05 is not in a chart title).
NUMBER = re.compile(r"\d\.\d\d")


def _tiles(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def _chart_titles(at: AppTest) -> list[str]:
    """Every chart's title and subplot titles (annotations) as the page sent them."""
    texts = []
    for chart in at.get("plotly_chart"):
        layout = json.loads(chart.proto.spec).get("layout", {})
        title = layout.get("title")
        texts.append(title.get("text", "") if isinstance(title, dict) else str(title or ""))
        texts += [str(a.get("text", "")) for a in layout.get("annotations", [])]
    return [text for text in texts if text]


def _error_columns(at: AppTest) -> set[str]:
    return {str(c) for table in at.table for c in table.value.columns} & {"attention error", "output error"}


def _lesson_step_shown(at: AppTest, lesson_id: str, index: int) -> bool:
    step = lessons.lessons()[lesson_id].steps[index]
    title = step.title in [str(h.value) for h in at.subheader]
    text = step.text.split()[:6]
    return title and " ".join(text) in " ".join(_texts(at).split())


def _assert_answer_hidden(at: AppTest, labels: list[str]) -> None:
    tiles = _tiles(at)
    assert {label: tiles[label] for label in labels} == dict.fromkeys(labels, room_ui.HIDDEN_VALUE), tiles
    assert not [text for text in _chart_titles(at) if NUMBER.search(text)], _chart_titles(at)
    assert _chart_titles(at)  # the heatmaps themselves stay
    assert not _error_columns(at)
    assert "hidden until the teacher reveals" in _texts(at)
    csv = [str(b.proto.label) for b in at.get("download_button") if "Metrics table" in b.proto.label]
    assert csv and all("without the errors" in label for label in csv), csv


def _assert_answer_shown(at: AppTest, labels: list[str]) -> dict[str, float]:
    tiles = _tiles(at)
    assert not [label for label in labels if tiles[label] == room_ui.HIDDEN_VALUE], tiles
    numbers = {label: float(tiles[label]) for label in labels}
    assert [text for text in _chart_titles(at) if NUMBER.search(text)], _chart_titles(at)
    assert _error_columns(at) == {"attention error", "output error"}
    return numbers


def test_teacher_publishes_and_student_follows_answers_once_and_sees_the_reveal(
    open_page: Callable[..., AppTest],
) -> None:
    room = rooms.create()
    teacher = open_page("pages/1_Compare.py", room=room.code, key=room.key, timeout=TIMEOUT, **_step("temperature", 1))
    assert not teacher.exception
    state = rooms.state(room.code)
    assert (state.page, state.step, state.question_id) == ("Compare", 2, "temperature-2")
    assert "tau=0.05" in state.query and "key=" not in state.query and room.key not in state.query
    question = lessons.lessons()["temperature"].steps[1].question
    assert question is not None
    labels = [question.label(c) for c in question.choices]
    # Predict first: no tile, chart title, table or CSV on the teacher's page (the projector) tells the answer yet,
    # nor the step's text, which explains it; the room still got the answer the page measured.
    _assert_answer_hidden(teacher, labels)
    assert not _lesson_step_shown(teacher, "temperature", 1)
    assert state.question["measured"] in question.choices
    assert [b.label for b in teacher.button if b.key == "ae_room_reveal"] == ["Reveal"]

    student = open_page("app.py", room=room.code.lower(), timeout=TIMEOUT)  # joins on Home, follows to Compare
    assert not student.exception
    assert student.query_params["tau"] in ("0.05", ["0.05"])
    assert "following the teacher" in _texts(student)
    _assert_answer_hidden(student, labels)
    choice_buttons = [b for b in student.button if b.key and b.key.startswith("ae_room_answer_")]
    assert len(choice_buttons) == 2
    choice_buttons[0].click().run()
    assert rooms.counts(rooms.state(room.code)) == {"lsh": 1, "performer": 0}
    assert not [b for b in student.button if b.key and b.key.startswith("ae_room_answer_")]  # answered: no buttons
    assert "Your answer" in _texts(student)

    teacher.button(key="ae_room_reveal").click().run()
    assert rooms.state(room.code).revealed
    measured_label = question.label(state.question["measured"])
    assert f"The page measured: {measured_label}" in _texts(teacher)
    # After the Reveal every number shows, and the measured answer is the choice whose tile the page drew lowest.
    numbers = _assert_answer_shown(teacher, labels)
    assert measured_label == min(numbers, key=lambda label: numbers[label])
    assert _lesson_step_shown(teacher, "temperature", 1)
    student.run()
    assert f"The page measured: {measured_label}" in _texts(student)
    assert _assert_answer_shown(student, labels) == numbers


def test_the_presenter_view_hides_the_errors_in_its_row_of_maps_until_the_reveal(
    open_page: Callable[..., AppTest],
) -> None:
    room = rooms.create()
    teacher = open_page(
        "pages/1_Compare.py", room=room.code, key=room.key, present="1", timeout=TIMEOUT, **_step("temperature", 2)
    )
    assert not teacher.exception
    question = lessons.lessons()["temperature"].steps[2].question
    assert question is not None
    labels = [question.label(c) for c in question.choices]
    short = [label.split(" (")[0] for label in labels]
    _assert_answer_hidden(teacher, labels)
    assert set(short) <= set(_chart_titles(teacher))  # the row of maps: each method by name, without its error
    assert not _lesson_step_shown(teacher, "temperature", 2)
    measured = rooms.state(room.code).question["measured"]

    teacher.button(key="ae_room_reveal").click().run()
    numbers = _assert_answer_shown(teacher, labels)
    assert question.label(measured) == min(numbers, key=lambda label: numbers[label])
    row = [text for text in _chart_titles(teacher) if text.split(":")[0] in short and NUMBER.search(text)]
    assert len(row) == len(short), _chart_titles(teacher)
    assert _lesson_step_shown(teacher, "temperature", 2)


def test_a_student_leaves_to_explore_and_rejoins(open_page: Callable[..., AppTest]) -> None:
    room = rooms.create()
    rooms.move(room.code, room.key, page="Compare", query="n=64&tau=0.5", step=0)
    student = open_page("app.py", room=room.code, timeout=TIMEOUT)
    assert student.query_params["tau"] in ("0.5", ["0.5"])
    student.button(key="ae_room_leave").click().run()
    assert "exploring on your own" in _texts(student)
    rooms.move(room.code, room.key, page="Compare", query="n=64&tau=2", step=0)
    student.run()
    assert student.query_params["tau"] in ("0.5", ["0.5"])  # not following
    student.button(key="ae_room_rejoin").click().run()
    assert student.query_params["tau"] in ("2", ["2"])
    assert "following the teacher" in _texts(student)


def test_a_wrong_code_says_so_and_a_forged_key_moves_nothing(open_page: Callable[..., AppTest]) -> None:
    at = open_page("app.py", room="ZZZZZZ", timeout=TIMEOUT)
    assert not at.exception and "No room `ZZZZZZ`" in _texts(at)
    room = rooms.create()
    forged = open_page("pages/8_Scaling.py", room=room.code, key="x" * 32, timeout=TIMEOUT, n="64")
    assert not forged.exception
    assert "joined it as a student" in _texts(forged)
    assert rooms.state(room.code).version == 0


def test_a_page_without_room_has_no_room(open_page: Callable[..., AppTest]) -> None:
    at = open_page("app.py", timeout=TIMEOUT)
    assert not at.exception
    assert "Room " not in "\n".join(str(m.value) for m in at.markdown if "**Room" in str(m.value))
    assert "_ae_room" not in at.session_state
