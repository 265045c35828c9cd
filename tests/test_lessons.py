"""Guided lessons: the files validate, every step opens without exception, and the panel links step to step."""

from __future__ import annotations

import urllib.parse

import pytest

from ui import lessons, page_registry, share_box

TIMEOUT = 300
STEPS = [(lesson_id, index) for lesson_id, lesson in lessons.lessons().items() for index in range(len(lesson.steps))]


def test_at_least_three_lessons_ship_with_the_app() -> None:
    assert {"temperature", "correction", "rank_vs_heads"} <= set(lessons.lessons())
    for lesson in lessons.lessons().values():
        assert 3 <= len(lesson.steps) <= 20
        assert all(len(step.text.split()) >= 20 for step in lesson.steps), lesson.id


def _valid() -> dict[str, object]:
    return {
        "title": "T",
        "summary": "S",
        "source": "P",
        "order": 1,
        "steps": [{"title": "a", "text": "b", "page": "Compare", "params": {"tau": "0.2", "methods": ["lsh"]}}],
    }


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        (lambda d: d["steps"][0].update(page="Nowhere"), "page 'Nowhere'"),
        (lambda d: d["steps"][0].update(params={"bad key": "1"}), "parameter name 'bad key'"),
        (lambda d: d["steps"][0].update(params={"step": "2"}), "parameter name 'step'"),
        (lambda d: d["steps"][0].update(params={"tau": {"nested": 1}}), "parameter 'tau'"),
        (lambda d: d["steps"][0].update(hide=["n", "a,b"]), "'hide'"),
        (lambda d: d.update(steps=[]), "1 to 20"),
        (lambda d: d.pop("title"), "'title'"),
        (lambda d: d["steps"][0].update(text="x" * 5000), "at most 1200"),
        (lambda d: d.pop("order"), "'order'"),
        (lambda d: d.update(order=True), "'order'"),
        (lambda d: d.update(order=0), "'order'"),
        (lambda d: d.update(order="1"), "'order'"),
        (lambda d: d["steps"][0].update(question="Which?"), "'question' must be a table"),
        (lambda d: d["steps"][0].update(question={"text": "Q", "choices": ["lsh"]}), "2 to 6 different"),
        (lambda d: d["steps"][0].update(question={"text": "Q", "choices": ["lsh", "lsh"]}), "2 to 6 different"),
        (lambda d: d["steps"][0].update(question={"text": "", "choices": ["lsh", "a"]}), "'text'"),
        (lambda d: d["steps"][0].update(question={"text": "Q", "choices": ["a", "b"], "pick": "best"}), "'pick'"),
    ],
)
def test_invalid_lessons_are_refused_with_the_field_named(change, fragment: str) -> None:  # type: ignore[no-untyped-def]
    lessons.parse_lesson("ok", _valid())  # the base case is valid
    data = _valid()
    change(data)
    with pytest.raises(lessons.LessonError, match=fragment.replace("(", r"\(")):
        lessons.parse_lesson("ok", data)


def test_lessons_come_in_teaching_order_the_introduction_first() -> None:
    found = lessons.lessons()
    assert next(iter(found)) == "temperature"  # the introduction, although it sorts last by name
    assert [lesson.order for lesson in found.values()] == sorted(lesson.order for lesson in found.values())


def test_two_lessons_in_the_same_place_are_refused() -> None:
    one, two = lessons.parse_lesson("one", _valid()), lessons.parse_lesson("two", _valid())
    with pytest.raises(lessons.LessonError, match="'one' and 'two' both have order = 1"):
        lessons.in_teaching_order([one, two])


def test_step_links_carry_settings_lesson_mode_and_position() -> None:
    lesson = lessons.parse_lesson("demo", {**_valid(), "steps": [*_valid()["steps"], *_valid()["steps"]]})  # type: ignore[list-item]
    url = lesson.step_url(1)
    path, query = url.split("?", 1)
    assert path == "./Compare"
    pairs = urllib.parse.parse_qsl(query)
    assert ("tau", "0.2") in pairs and ("methods", "lsh") in pairs
    assert ("guide", "demo") in pairs and ("step", "2") in pairs
    html = lessons.nav_html(lesson, 0)
    assert "step=2" in html and "<span>← Previous</span>" in html  # first step: no previous link
    assert "<span>Next →</span>" in lessons.nav_html(lesson, 1)  # last step: no next link


def test_position_clamps_bad_steps_and_ignores_unknown_lessons() -> None:
    lesson_id = next(iter(lessons.lessons()))
    count = len(lessons.lessons()[lesson_id].steps)
    assert lessons.position(lesson_id, "999")[1] == count - 1  # type: ignore[index]
    assert lessons.position(lesson_id, "-3")[1] == 0  # type: ignore[index]
    assert lessons.position(lesson_id, "x")[1] == 0  # type: ignore[index]
    assert lessons.position("no_such_lesson", "1") is None
    assert lessons.position(None, None) is None


@pytest.mark.parametrize(("lesson_id", "index"), STEPS)
def test_every_lesson_step_opens_without_exception(lesson_id: str, index: int, open_page) -> None:
    lesson = lessons.lessons()[lesson_id]
    step = lesson.steps[index]
    script = page_registry.url_paths()[step.page]
    query = urllib.parse.parse_qs(lesson.step_query(index))
    at = open_page(
        script, timeout=TIMEOUT, **{key: value if len(value) > 1 else value[0] for key, value in query.items()}
    )
    assert not at.exception, [e.value for e in at.exception]
    assert step.title in [s.value for s in at.subheader]
    assert f"step {index + 1} of {len(lesson.steps)}" in " ".join(c.value for c in at.caption)
    shared = [link for link in share_box.links_in(at) if "guide=" in link]
    assert shared and f"step={index + 1}" in shared[-1], "the share link must keep the lesson step"
    notices = "\n".join(w.value for w in at.warning)
    assert "unknown URL parameter" not in notices, notices
    assert "matched no control" not in notices, notices


def test_three_lessons_ask_the_class_a_question_the_page_answers() -> None:
    asking = {lid for lid, lesson in lessons.lessons().items() if any(step.question for step in lesson.steps)}
    assert len(asking) >= 3, asking
    question = lessons.StepQuestion("Q", ("lsh", "performer"))
    labels = dict(question.labelled_choices())
    # The measured answer comes from the page's tiles: no tile (not drawn yet) means no answer, never a guess.
    assert question.measured({labels["lsh"]: "0.412"}) == ""
    assert question.measured({labels["lsh"]: "0.412", labels["performer"]: "0.980"}) == "lsh"
    assert question.measured({labels["lsh"]: "0.990", labels["performer"]: "0.301 ± 0.010"}) == "performer"
    highest = lessons.StepQuestion("Q", ("lsh", "performer"), pick="highest")
    assert highest.measured({labels["lsh"]: "0.412", labels["performer"]: "0.980"}) == "performer"
