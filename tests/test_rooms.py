"""service/rooms.py: create, join, wrong code, expiry, forged moves, once-per-student answers; on the disk store and on
Redis (the two backends of the shared result cache)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from ci_env import unavailable

from service import rooms
from tests.redis_server import RedisServer, redis_server_binary

QUESTION = rooms.Question("Which has the lower error?", (("lsh", "LSH"), ("performer", "Performer")), "lsh")


@pytest.fixture(params=["disk", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("ATTN_EXPLORER_CACHE_DIR", str(tmp_path / "cache"))
    if request.param == "disk":
        monkeypatch.delenv("ATTN_EXPLORER_CACHE_URL", raising=False)
        yield "disk"
        return
    try:
        redis_server_binary()
    except Exception:  # noqa: BLE001
        unavailable("the Redis room store needs Debian's redis-server (apt-get install -y redis-server)")
    server = RedisServer().start()
    monkeypatch.setenv("ATTN_EXPLORER_CACHE_URL", server.url)
    try:
        yield "redis"
    finally:
        server.stop()


def test_create_gives_a_readable_code_and_a_long_key_and_a_student_joins(store: str) -> None:
    room = rooms.create()
    assert len(room.code) == 6 and set(room.code) <= set(rooms.ALPHABET)
    assert not set(room.code) & set("01OI")
    assert len(room.key) >= 32
    joined = rooms.state(room.code.lower())  # as typed off the projector
    assert joined.code == room.code and joined.version == 0
    assert room.key not in str(joined.to_json())  # a student's state never carries the key
    assert rooms.create().code != room.code


def test_a_wrong_code_says_so(store: str) -> None:
    with pytest.raises(rooms.RoomError, match="No room"):
        rooms.state("ABCDEF")
    with pytest.raises(rooms.RoomError, match="not a room code"):
        rooms.state("abc")
    with pytest.raises(rooms.RoomError, match="not a room code"):
        rooms.state("ABCDE0")  # 0 is not in the alphabet


def test_a_room_expires(store: str, monkeypatch: pytest.MonkeyPatch) -> None:
    room = rooms.create()
    now = rooms.state(room.code).created
    rooms.state(room.code, now=now + 3.9 * 3600)
    with pytest.raises(rooms.RoomError, match="expired"):
        rooms.state(room.code, now=now + 4 * 3600 + 1)
    monkeypatch.setattr(rooms, "ROOM_HOURS", 0.5)
    short = rooms.create()
    with pytest.raises(rooms.RoomError, match="0.5 hours"):
        rooms.state(short.code, now=rooms.state(short.code).created + 1801)


def test_only_the_key_moves_the_room(store: str) -> None:
    room = rooms.create()
    moved = rooms.move(room.code, room.key, page="Compare", query="tau=0.05", step=2)
    assert (moved.page, moved.query, moved.step, moved.version) == ("Compare", "tau=0.05", 2, 1)
    same = rooms.move(room.code, room.key, page="Compare", query="tau=0.05", step=2)
    assert same.version == 1  # nothing changed: nothing written
    for forged in (None, "", "x" * 32, room.key[:-1] + ("A" if room.key[-1] != "A" else "B")):
        with pytest.raises(rooms.RoomError, match="Only the teacher"):
            rooms.move(room.code, forged, page="Scaling", query="", step=0)
        with pytest.raises(rooms.RoomError, match="Only the teacher"):
            rooms.reveal(room.code, forged) if rooms.state(room.code).question_id else rooms.ask(
                room.code, forged, "q1", QUESTION
            )
    after = rooms.state(room.code)
    assert (after.page, after.query, after.version) == ("Compare", "tau=0.05", 1)


def test_limits_on_size_and_rate(store: str) -> None:
    room = rooms.create()
    with pytest.raises(rooms.RoomError, match="longer"):
        rooms.move(room.code, room.key, page="Compare", query="x" * (rooms.MAX_QUERY_CHARS + 1))
    with pytest.raises(rooms.RoomError, match="Too many moves"):
        for index in range(rooms.MAX_MOVES_PER_SECOND + 1):
            rooms.move(room.code, room.key, page="Compare", query=f"tau={index}", now=rooms.state(room.code).created)


def test_answers_count_once_per_student_and_reveal(store: str) -> None:
    room = rooms.create()
    with pytest.raises(rooms.RoomError, match="No question"):
        rooms.answer(room.code, "s1", "lsh")
    opened = rooms.ask(room.code, room.key, "temperature-2", QUESTION)
    assert rooms.counts(opened) == {"lsh": 0, "performer": 0}
    assert rooms.answer(room.code, "s1", "lsh")
    assert not rooms.answer(room.code, "s1", "performer")  # a second answer is not counted
    assert rooms.answer(room.code, "s2", "performer")
    with pytest.raises(rooms.RoomError, match="not one of"):
        rooms.answer(room.code, "s3", "scatterbrain")
    assert rooms.counts(rooms.state(room.code)) == {"lsh": 1, "performer": 1}
    assert rooms.my_answer(room.code, "s1", "temperature-2") == "lsh"
    assert not rooms.state(room.code).revealed
    assert rooms.reveal(room.code, room.key).revealed
    # A new question starts new counts, closed again
    nxt = rooms.ask(room.code, room.key, "temperature-3", QUESTION)
    assert rooms.counts(nxt) == {"lsh": 0, "performer": 0} and not nxt.revealed
    assert rooms.close_question(room.code, room.key).question_id == ""


def test_answers_from_many_threads_are_each_counted_once(store: str) -> None:
    room = rooms.create()
    rooms.ask(room.code, room.key, "q", QUESTION)
    counted: list[bool] = []

    def vote(index: int) -> None:
        for _ in range(3):  # each student clicks three times
            counted.append(rooms.answer(room.code, f"student-{index}", "lsh" if index % 3 else "performer"))

    threads = [threading.Thread(target=vote, args=(index,)) for index in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(counted) == 12
    assert rooms.counts(rooms.state(room.code)) == {"lsh": 8, "performer": 4}


def test_rooms_per_hour_are_bounded(store: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rooms, "MAX_ROOMS_PER_HOUR", 3)
    for _ in range(3):
        rooms.create(now=1e9)
    with pytest.raises(rooms.RoomError, match="Too many rooms"):
        rooms.create(now=1e9)
    rooms.create(now=1e9 + 3600)  # the next hour


def test_the_benchmark_table_says_whether_the_targets_are_met() -> None:
    from benchmarks import rooms as bench

    result = {
        "students": 60, "replicas": 2, "joined": 60, "moves": 5, "follow_p50_s": 0.5, "follow_p95_s": 1.2,
        "shown_p50_s": 0.6, "shown_p95_s": 1.4, "shown_max_s": 1.9, "not_followed": 0, "errors": 0, "idle_s": 20.0,
        "idle_cpu_per_replica_core": [0.03, 0.04], "machine": "test", "commit": "abc",
    }  # fmt: skip
    table = bench.markdown({"protocols": {"held": result}, "machine": "test", "commit": "abc"}, "x")
    assert table.count("| met |") == 2 and "NOT met" not in table
    slow = result | {"shown_p95_s": 2.5, "idle_cpu_per_replica_core": [0.03, 0.2]}
    both = bench.markdown({"protocols": {"poll": slow, "held": result}, "machine": "test", "commit": "abc"}, "x")
    assert both.count("| met | NOT met |") == 2 and "20.0 %" in both  # the app's protocol first, each its own verdict
    assert "60 students over 2 replicas" in both.splitlines()[0]


def test_answers_stay_hidden_until_the_reveal() -> None:
    """Predict, then reveal: the numbers that answer a question hide from everyone in the room until the Reveal."""
    room = rooms.RoomState(code="ABCDEF", key_hash="", created=0.0, expires=1.0)
    opened = replace(room, question_id="temperature-2", question={"text": "Q"})
    revealed = replace(opened, revealed=True)
    # The teacher's page decides from its own step: it opens that step's question at the end of its run.
    assert rooms.answers_hidden(room, "temperature-2", teacher=True)  # the first run, before the question opens
    assert rooms.answers_hidden(opened, "temperature-2", teacher=True)
    assert not rooms.answers_hidden(revealed, "temperature-2", teacher=True)
    assert not rooms.answers_hidden(opened, "", teacher=True)  # a step without a question (closed at the run's end)
    assert rooms.answers_hidden(replace(revealed, question_id="temperature-1"), "temperature-2", teacher=True)
    # A student: the room's open question, on any page, until it is revealed.
    assert rooms.answers_hidden(opened, "", teacher=False)
    assert rooms.answers_hidden(opened, "", teacher=False, following=False)
    assert not rooms.answers_hidden(revealed, "temperature-2", teacher=False)
    assert not rooms.answers_hidden(room, "", teacher=False)
    # Following the teacher onto a question's step before the teacher's page has opened it: hidden already.
    assert rooms.answers_hidden(room, "temperature-2", teacher=False)
    assert rooms.answers_hidden(replace(revealed, question_id="temperature-1"), "temperature-2", teacher=False)
    assert not rooms.answers_hidden(room, "temperature-2", teacher=False, following=False)  # exploring on its own


def test_a_browser_keeps_its_student_id_and_a_forged_one_is_not_used() -> None:
    kept = rooms.student_id()
    assert rooms.kept_student(kept) == kept
    for value in (None, "", "short", "x" * 65, "a b c d e f g h i j", "<script>alert(1)</script>aaaa", "é" * 20):
        assert rooms.kept_student(value) is None, value
