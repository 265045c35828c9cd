"""A class in one room, in Chromium, on two replicas sharing one cache folder: a teacher on the first, two students
on the second (one on a 390 x 844 phone). The teacher moves to another page and temperature and both students follow
within 2 s; a forged move (a wrong key) is refused; answers count once per student (a reload too); Reveal shows the
answer the page measured, beside the class's; before it, no page in the room shows the error tiles' numbers."""

from __future__ import annotations

import os
import re
import time
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from deploy.processes import app_server
from service import rooms
from ui import lessons

from .helpers import REPO_ROOT, metric_tiles, wait_for_app

FOLLOW_S = 2.0
PHONE = {"width": 390, "height": 844}


def _step_url(base: str, lesson_id: str, index: int, **extra: str) -> str:
    query = lessons.lessons()[lesson_id].step_query(index) + "&n=64&" + urllib.parse.urlencode(extra)
    return f"{base}/{lessons.lessons()[lesson_id].steps[index].page}?{query}"


def _follows(page: Page, pattern: str, since: float) -> float:
    """Seconds from ``since`` until the page's URL matches ``pattern`` (fails after 15 s)."""
    page.wait_for_url(re.compile(pattern), timeout=15_000)
    return time.monotonic() - since


def test_a_teacher_and_two_students_on_two_replicas(
    browser: Browser, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = str(tmp_path / "shared-cache")
    monkeypatch.setenv("ATTN_EXPLORER_CACHE_DIR", cache)  # this test reads the room from the same store
    env = {**os.environ, "ATTN_EXPLORER_CACHE_DIR": cache, "ATTN_EXPLORER_WARMUP": "0", "ATTN_EXPLORER_PREFETCH": "0"}
    env.pop("ATTN_EXPLORER_CACHE_URL", None)
    with app_server(REPO_ROOT, env=env) as first, app_server(REPO_ROOT, env=env) as second:
        teacher = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
        laptop = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
        phone = browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True).new_page()

        teacher.goto(f"{first.url}/?room=new")
        teacher.wait_for_url(re.compile(r"room=[A-Z2-9]{6}&key="), timeout=30_000)
        wait_for_app(teacher)
        found = urllib.parse.parse_qs(urllib.parse.urlsplit(teacher.url).query)
        code, key = found["room"][0], found["key"][0]
        expect(teacher.get_by_text(f"Room {code}")).to_be_visible()

        # The page follows by asking the room's revision (ui/room_poll.py), held by the server until the room moves,
        # not by rerunning a fragment: each student's requests and their answers, as (sent, answered, response).
        version_url = re.compile(rf"/_room/{code}/version\?after=\d+$")
        sent: dict[int, list[float]] = {id(laptop): [], id(phone): []}
        answered: dict[int, list[tuple[float, Any]]] = {id(laptop): [], id(phone): []}
        for student in (laptop, phone):
            times, answers = sent[id(student)], answered[id(student)]
            student.on(
                "request", lambda r, times=times: times.append(time.monotonic()) if version_url.search(r.url) else 0
            )
            student.on(  # a response event comes when the server answers: for a held request, when the room moved
                "response",
                lambda r, answers=answers: answers.append((time.monotonic(), r)) if version_url.search(r.url) else 0,
            )
            student.goto(f"{second.url}/?room={code}")
            wait_for_app(student)
            expect(student.locator("[data-testid='aeRoomPoll']")).to_have_count(1)
            expect(student.get_by_text("following the teacher")).to_be_visible()
            student.wait_for_timeout(500)
            assert sent[id(student)], "the page did not ask for the room's revision"
        # Held, not polled: while the room does not move, no answer comes back (a poll would answer every second).
        quiet = time.monotonic()
        laptop.wait_for_timeout(2_500)
        for student in (laptop, phone):
            early = [at for at, _ in answered[id(student)] if at > quiet]
            assert not early, f"{len(early)} answers in 2.5 s of an unmoved room"

        # The teacher moves to another page (Compare, a lesson step with a question): both students follow.
        teacher.goto(_step_url(first.url, "temperature", 1, room=code, key=key))
        wait_for_app(teacher)
        moved = time.monotonic()
        delays = [_follows(s, r"/Compare\?.*tau=0\.05", moved) for s in (laptop, phone)]
        assert max(delays) <= FOLLOW_S, delays
        for student in (laptop, phone):
            answers = [r for at, r in answered[id(student)] if at > quiet]
            assert answers, "the held request was not answered when the room moved"
            assert all(r.status == 200 and r.headers["cache-control"] == "no-store" for r in answers)
        for student in (laptop, phone):
            wait_for_app(student)
            assert "key=" not in student.url
        # On the phone the picture leads: the first chart starts within the first screen.
        chart = phone.locator("[data-testid='stPlotlyChart'], [data-testid='aePlotlyChart']").first
        expect(chart).to_be_visible(timeout=60_000)
        box = chart.bounding_box()
        assert box is not None and box["y"] < PHONE["height"], box

        # A forged move: the room's page with a wrong key joins as a student and moves nothing.
        before = rooms.state(code)
        forger = browser.new_context().new_page()
        forger.goto(f"{second.url}/Scaling?n=64&room={code}&follow=0&key={'x' * 32}")
        wait_for_app(forger)
        expect(forger.get_by_text("joined it as a student")).to_be_visible()
        after = rooms.state(code)
        assert (after.page, after.query, after.version) == (before.page, before.query, before.version)

        # Predict: each student answers once (a second click finds no button), the teacher sees the counts.
        question = lessons.lessons()["temperature"].steps[1].question
        assert question is not None
        labels = dict(question.labelled_choices())
        laptop.locator(".st-key-ae_room_answer_temperature-2_lsh button").click()
        phone.locator(".st-key-ae_room_answer_temperature-2_performer button").click()
        for student in (laptop, phone):
            expect(student.get_by_text("Your answer")).to_be_visible(timeout=5_000)
            expect(student.locator("[class*='st-key-ae_room_answer_'] button")).to_have_count(0)
        assert rooms.counts(rooms.state(code)) == {"lsh": 1, "performer": 1}
        # A reload is the same student (its id kept in the browser's cookie): still answered, nothing counted twice.
        laptop.reload()
        wait_for_app(laptop)
        expect(laptop.get_by_text("Your answer")).to_be_visible(timeout=10_000)
        expect(laptop.locator("[class*='st-key-ae_room_answer_'] button")).to_have_count(0)
        assert rooms.counts(rooms.state(code)) == {"lsh": 1, "performer": 1}
        votes = f"Votes · {labels['lsh']}: 1 · {labels['performer']}: 1"
        expect(teacher.locator(".st-key-ae_room").get_by_text(votes)).to_be_visible(timeout=3_000)

        # Before the Reveal no page in the room shows the errors that answer the question (the projector included).
        for page in (teacher, laptop, phone):
            tiles = metric_tiles(page)
            assert all(tiles[labels[c]] == "?" for c in question.choices), tiles
        # Reveal: the tiles show their numbers on every page, and the measured answer is the lowest one's.
        teacher.get_by_role("button", name="Reveal").click()
        expect(teacher.get_by_text("The page measured:")).to_be_visible(timeout=5_000)
        expect(teacher.locator("[data-testid='stMetricValue']").filter(has_text="?")).to_have_count(0, timeout=10_000)
        tiles = metric_tiles(teacher)
        numbers = {c: float(tiles[labels[c]]) for c in question.choices}
        measured = min(numbers, key=lambda c: numbers[c])
        expect(teacher.get_by_text(f"The page measured: {labels[measured]}")).to_be_visible()
        for student in (laptop, phone):
            expect(student.get_by_text(f"The page measured: {labels[measured]}")).to_be_visible(timeout=3_000)
            expect(student.locator("[data-testid='stMetricValue']").filter(has_text="?")).to_have_count(0)

        # The teacher changes the temperature (the next step, tau = 1): both follow again.
        teacher.goto(_step_url(first.url, "temperature", 2, room=code, key=key))
        wait_for_app(teacher)
        moved = time.monotonic()
        delays = [_follows(s, r"/Compare\?.*tau=1(&|$)", moved) for s in (laptop, phone)]
        assert max(delays) <= FOLLOW_S, delays

        # Leave to explore, then rejoin in one click.
        wait_for_app(laptop)
        laptop.get_by_role("button", name="Leave to explore").click()
        expect(laptop.get_by_text("exploring on your own")).to_be_visible(timeout=5_000)
        teacher.goto(_step_url(first.url, "temperature", 1, room=code, key=key))
        wait_for_app(teacher)
        laptop.wait_for_timeout(2_500)
        assert "tau=1" in laptop.url  # still where the student went
        laptop.get_by_role("button", name="Rejoin").click()
        assert _follows(laptop, r"/Compare\?.*tau=0\.05", time.monotonic()) <= FOLLOW_S
        expect(laptop.get_by_text("following the teacher")).to_be_visible()
