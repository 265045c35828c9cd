"""A class in one room: the teacher's page, settings and lesson step, shared with every student who joined (pure: no
Streamlit; the page glue is ``ui/room.py``).

A room lives in the shared store the app already uses for results (disk on one host, Redis across hosts), so a student
on any replica follows the same room. Every access to that store goes through ``Store`` below (one import to change
when the result cache moves).

    room = create()                          # code "K7PX3M" (read off a projector), key (only the teacher's link)
    move(room.code, room.key, page="Compare", query="tau=0.05", step=2)   # refused without the right key
    state(room.code)                         # what a student's page follows
    answer(room.code, student_id(), "lsh")   # counted once per student and question; counts only, never names

Limits for strangers: rooms created per hour (all together), the size of a room's state, and moves per room and
second. A wrong or expired code raises ``RoomError`` with a message to show.
"""

from __future__ import annotations

import hmac
import json
import re
import secrets
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from service import result_cache as _result_cache

ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"  # no 0/O, 1/I: readable off a projector
CODE_LENGTH = 6
KEY_BYTES = 24  # secrets.token_urlsafe(24): 32 characters
MAX_STATE_BYTES = 8_000  # a room's whole state (page, query, question) as JSON
MAX_QUERY_CHARS = 4_000
MAX_ROOMS_PER_HOUR = 200  # created on this store, all visitors together
MAX_MOVES_PER_SECOND = 5  # per room: a teacher's page run publishes once; a script hammering it is refused
MAX_CHOICES = 6
PREFIX = "room:"


class RoomError(ValueError):
    """A room request that cannot be served; the message says why, for the page to show."""


class Store:
    """The shared store, by key: JSON values with an expiry, an add-if-absent and a counter. Disk (diskcache) on one
    host, Redis across hosts, as the result cache is configured. Both operations that must not race (a student's
    first answer, a count) are atomic on both backends."""

    def _redis(self) -> Any:
        return _result_cache.redis_store()

    def get(self, key: str) -> Any:
        redis = self._redis()
        if redis is not None:
            data = redis.call(lambda client: client.get(PREFIX + key), None)
        else:
            data = _result_cache.get_cache().get(PREFIX + key, default=None, retry=True)
        return None if data is None else json.loads(data)

    def set(self, key: str, value: Any, expire: float) -> bool:
        data = json.dumps(value, separators=(",", ":"))
        redis = self._redis()
        if redis is not None:
            seconds = max(1, int(expire))
            return bool(redis.call(lambda client: client.set(PREFIX + key, data, ex=seconds), False))
        return bool(_result_cache.get_cache().set(PREFIX + key, data, expire=expire, retry=True))

    def add(self, key: str, value: Any, expire: float) -> bool:
        """Store ``value`` only if ``key`` is absent; True when this call stored it."""
        data = json.dumps(value, separators=(",", ":"))
        redis = self._redis()
        if redis is not None:
            seconds = max(1, int(expire))
            return bool(redis.call(lambda client: client.set(PREFIX + key, data, ex=seconds, nx=True), False))
        return bool(_result_cache.get_cache().add(PREFIX + key, data, expire=expire, retry=True))

    def incr(self, key: str, expire: float) -> int:
        redis = self._redis()
        if redis is not None:

            def bump(client: Any) -> int:
                pipe = client.pipeline()
                pipe.incr(PREFIX + key)
                pipe.expire(PREFIX + key, max(1, int(expire)))
                return int(pipe.execute()[0])

            return int(redis.call(bump, 0))
        cache = _result_cache.get_cache()
        with cache.transact(retry=True):
            value = int(json.loads(cache.get(PREFIX + key, default="0")))
            cache.set(PREFIX + key, json.dumps(value + 1), expire=expire)
        return value + 1

    def count(self, key: str) -> int:
        value = self.get(key)
        return int(value) if value is not None else 0


STORE = Store()


# How long a room lasts. A constant, not yet an ATTN_EXPLORER_* variable: declaring one in core/config.py changes the
# engine's hash (benchmarks/refresh.py hashes core/), which marks the engine's tables stale until they are re-run.
ROOM_HOURS = 4.0


def lifetime_s() -> float:
    return ROOM_HOURS * 3600.0


@dataclass(frozen=True)
class Question:
    """The question of the current lesson step: its text, its choices (value, label) and the measured answer (the
    value the page's own numbers pick; filled in by the teacher's page, which measured it)."""

    text: str
    choices: tuple[tuple[str, str], ...]
    measured: str = ""


@dataclass(frozen=True)
class RoomState:
    code: str
    key_hash: str  # never the key itself: a student reads this state
    created: float
    expires: float
    page: str = ""  # URL path ("" = Home)
    query: str = ""  # the teacher's query string, without room and key
    step: int = 0  # the lesson step (1-based; 0 = no lesson)
    version: int = 0  # +1 per move: a student's page follows when it changes
    rev: int = 0  # +1 per write (move, question, reveal): a student's page reruns when it changes (``revision``)
    question_id: str = ""  # "" = no question open
    question: dict[str, Any] = field(default_factory=dict)
    revealed: bool = False

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Room:
    """What ``create`` hands the teacher: the code for everyone, the key for the teacher's link only."""

    code: str
    key: str


def _hash(key: str) -> str:
    import hashlib

    return hashlib.sha256(key.encode()).hexdigest()


def normal_code(code: str | None) -> str:
    """The code as typed (spaces, lower case) in its stored form; RoomError when it cannot be a code."""
    text = "".join((code or "").split()).upper()[:20]
    if len(text) != CODE_LENGTH or any(ch not in ALPHABET for ch in text):
        shown = text[:12] or "(empty)"
        raise RoomError(f"`{shown}` is not a room code: a room code is {CODE_LENGTH} letters and digits.")
    return text


def create(now: float | None = None) -> Room:
    """A new room; RoomError when this store has made too many rooms this hour."""
    now = time.time() if now is None else now
    made = STORE.incr(f"made:{int(now // 3600)}", 3600)
    if made > MAX_ROOMS_PER_HOUR:
        raise RoomError(f"Too many rooms were opened this hour (at most {MAX_ROOMS_PER_HOUR}); try again later.")
    key = secrets.token_urlsafe(KEY_BYTES)
    for _ in range(20):
        code = "".join(secrets.choice(ALPHABET) for _ in range(CODE_LENGTH))
        room = RoomState(code=code, key_hash=_hash(key), created=now, expires=now + lifetime_s())
        if STORE.add(code, room.to_json(), lifetime_s()):
            return Room(code, key)
    raise RoomError("Could not find a free room code; try again.")


def state(code: str | None, now: float | None = None) -> RoomState:
    """The room's state; RoomError for a wrong or expired code."""
    code = normal_code(code)
    raw = STORE.get(code)
    now = time.time() if now is None else now
    if raw is None:
        raise RoomError(f"No room `{code}`: check the code, or the room has expired (rooms last {_hours()}).")
    room = RoomState(**raw)
    if now >= room.expires:
        raise RoomError(f"Room `{code}` has expired (rooms last {_hours()}); ask the teacher for a new one.")
    return room


# A replica answers every student's request of a room from memory for REVISION_TTL_S: one store read per replica, room
# and REVISION_TTL_S, whatever the number of students asking (a held request sees a move within REVISION_TTL_S).
REVISION_TTL_S = 0.25
_revisions: dict[str, tuple[float, int]] = {}
_revision_reads: dict[str, threading.Lock] = {}  # per room: one store read at a time
_revisions_lock = threading.Lock()


def revision(code: str | None) -> int:
    """The room's ``rev`` (what a student's browser asks for; one store read per replica and REVISION_TTL_S, also when
    a class's requests arrive together: the first reads, the others wait for its answer); RoomError for a code that
    cannot be one, a wrong or an expired room."""
    code = normal_code(code)
    with _revisions_lock:
        found = _revisions.get(code)
        if found is not None and time.monotonic() - found[0] < REVISION_TTL_S:
            return found[1]
        if len(_revisions) > 1000:
            _revisions.clear()
            _revision_reads.clear()
        reading = _revision_reads.setdefault(code, threading.Lock())
    with reading:
        with _revisions_lock:
            found = _revisions.get(code)
            if found is not None and time.monotonic() - found[0] < REVISION_TTL_S:
                return found[1]  # read by the request this one waited for
        now = time.monotonic()
        rev = state(code).rev
        with _revisions_lock:
            _revisions[code] = (now, rev)
    return rev


def _hours() -> str:
    hours = lifetime_s() / 3600
    return f"{hours:g} hour" + ("" if hours == 1 else "s")


def is_teacher(room: RoomState, key: str | None) -> bool:
    return bool(key) and hmac.compare_digest(_hash(key or ""), room.key_hash)


def _save(room: RoomState, key: str | None, now: float) -> RoomState:
    if not is_teacher(room, key):
        raise RoomError("Only the teacher's link (with its key) can move this room.")
    second = int(now)
    if STORE.incr(f"{room.code}:moves:{second}", 5) > MAX_MOVES_PER_SECOND:
        raise RoomError(f"Too many moves: at most {MAX_MOVES_PER_SECOND} a second.")
    room = replace(room, rev=room.rev + 1)
    data = room.to_json()
    if len(json.dumps(data)) > MAX_STATE_BYTES:
        raise RoomError(f"The room's state is larger than {MAX_STATE_BYTES} bytes.")
    STORE.set(room.code, data, max(1.0, room.expires - now))
    return room


def move(code: str, key: str | None, *, page: str, query: str, step: int = 0, now: float | None = None) -> RoomState:
    """The teacher's page publishes where it is; nothing is written when nothing changed. RoomError without the key."""
    now = time.time() if now is None else now
    room = state(code, now)
    if len(query) > MAX_QUERY_CHARS:
        raise RoomError(f"The page's settings are longer than {MAX_QUERY_CHARS} characters.")
    if (room.page, room.query, room.step) == (page, query, step) and is_teacher(room, key):
        return room
    return _save(replace(room, page=page, query=query, step=step, version=room.version + 1), key, now)


def ask(code: str, key: str | None, question_id: str, question: Question, now: float | None = None) -> RoomState:
    """Open ``question`` (a new id starts new counts); the same question again keeps its counts and reveal."""
    now = time.time() if now is None else now
    room = state(code, now)
    if not 2 <= len(question.choices) <= MAX_CHOICES:
        raise RoomError(f"A question needs 2 to {MAX_CHOICES} choices.")
    data = {"text": question.text, "choices": [list(c) for c in question.choices], "measured": question.measured}
    if room.question_id == question_id and room.question == data and is_teacher(room, key):
        return room
    revealed = room.revealed if room.question_id == question_id else False
    return _save(replace(room, question_id=question_id, question=data, revealed=revealed), key, now)


def close_question(code: str, key: str | None, now: float | None = None) -> RoomState:
    now = time.time() if now is None else now
    room = state(code, now)
    if not room.question_id and is_teacher(room, key):
        return room
    return _save(replace(room, question_id="", question={}, revealed=False), key, now)


def reveal(code: str, key: str | None, now: float | None = None) -> RoomState:
    now = time.time() if now is None else now
    room = state(code, now)
    if not room.question_id:
        raise RoomError("No question is open.")
    return _save(replace(room, revealed=True), key, now)


def answers_hidden(room: RoomState, step_question: str, *, teacher: bool, following: bool = True) -> bool:
    """Whether a page in ``room`` hides the numbers that answer a question (predict, then reveal).

    step_question: the id of the question the page's own lesson step carries ("" for none). The teacher's page opens
    its step's question at the end of its run, so the teacher's page decides from its step alone: hidden until the room
    has revealed that question. A student's page hides while the room's question is open and not revealed, and also
    while it follows the teacher onto a step whose question the teacher's page has not opened yet (the move and the
    question are two writes)."""
    if teacher:
        return bool(step_question) and not (room.question_id == step_question and room.revealed)
    if room.question_id and not room.revealed:
        return True
    return following and bool(step_question) and room.question_id != step_question


STUDENT_COOKIE = "ae_room_student"  # the browser keeps its student id here, so a reload answers as the same student
_STUDENT_ID = re.compile(r"[A-Za-z0-9_-]{16,64}")


def student_id() -> str:
    """A random id for one student's browser (kept in its session and cookie, never in a URL; no name)."""
    return secrets.token_urlsafe(12)


def kept_student(value: str | None) -> str | None:
    """The student id a browser kept (its STUDENT_COOKIE) when it can be one of ``student_id``'s, else None."""
    text = (value or "").strip()
    return text if _STUDENT_ID.fullmatch(text) else None


def answer(code: str, student: str, choice: str, now: float | None = None) -> bool:
    """Count ``choice`` for the open question, once per student: True when counted, False when this student had
    already answered it. RoomError for no open question or a choice it does not offer."""
    now = time.time() if now is None else now
    room = state(code, now)
    if not room.question_id:
        raise RoomError("No question is open.")
    if choice not in {value for value, _ in room.question.get("choices", [])}:
        raise RoomError("That is not one of the question's choices.")
    if not student or len(student) > 64:
        raise RoomError("No student id.")
    left = max(1.0, room.expires - now)
    if not STORE.add(f"{code}:{room.question_id}:voter:{_hash(student)[:32]}", choice, left):
        return False
    STORE.incr(f"{code}:{room.question_id}:count:{choice}", left)
    return True


def my_answer(code: str, student: str, question_id: str) -> str | None:
    """The choice this student gave to the question, or None."""
    value = STORE.get(f"{normal_code(code)}:{question_id}:voter:{_hash(student)[:32]}")
    return None if value is None else str(value)


def counts(room: RoomState) -> dict[str, int]:
    """Answers per choice of the open question (every choice, 0 included)."""
    if not room.question_id:
        return {}
    return {
        value: STORE.count(f"{room.code}:{room.question_id}:count:{value}")
        for value, _ in room.question.get("choices", [])
    }
