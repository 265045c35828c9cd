"""deploy/room_version.py: ``GET /_room/{code}/version``, the revision a student's browser polls. Strict codes (never
a path), no-store, a 404 with a message for a wrong code, and a revision that moves with the room (move, question,
reveal) and within ``REVISION_TTL_S`` on a second replica's memory layer."""

from __future__ import annotations

import asyncio
import json
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette

from deploy import room_version
from service import rooms

QUESTION = rooms.Question("Which has the lower error?", (("lsh", "LSH"), ("performer", "Performer")), "lsh")


@pytest.fixture(autouse=True)
def _own_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTN_EXPLORER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("ATTN_EXPLORER_CACHE_URL", raising=False)
    monkeypatch.setattr(rooms, "_revisions", {})


async def call(
    app: Starlette, path: str, query: str = "", *, leave_after_s: float | None = None
) -> tuple[int, dict[str, str], Any]:
    """One GET through Starlette's router (no HTTP client needed): status, headers, JSON body. ``leave_after_s``: the
    client closes its connection after that long (as a closed tab)."""
    scope = {
        "type": "http",
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": [(b"host", b"testserver")],
        "client": ("127.0.0.1", 1),
        "server": ("testserver", 80),
    }
    sent: list[dict[str, Any]] = []
    started = time.monotonic()
    body_read = False

    async def receive() -> dict[str, Any]:
        nonlocal body_read
        if not body_read:
            body_read = True
            return {"type": "http.request", "body": b"", "more_body": False}
        if leave_after_s is not None and time.monotonic() - started >= leave_after_s:
            return {"type": "http.disconnect"}
        await asyncio.sleep(3600)  # the connection stays open: nothing more arrives
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    headers = {k.decode().lower(): v.decode() for k, v in start["headers"]}
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    is_json = headers.get("content-type", "").startswith("application/json")
    return start["status"], headers, json.loads(body) if is_json else body.decode()


def in_thread(work: Any) -> Any:
    """Run a coroutine function in a thread of its own: a browser test run earlier in this process (same xdist worker)
    leaves Playwright's event loop running in the main thread, where asyncio.run refuses to start."""
    result: list[Any] = []
    worker = threading.Thread(target=lambda: result.append(asyncio.run(work())))
    worker.start()
    worker.join(timeout=60)
    assert result, "the request did not finish within 60 s"
    return result[0]


def get(path: str, base: str = "", query: str = "") -> tuple[int, dict[str, str], Any]:
    app = Starlette(routes=room_version.routes(base))
    return in_thread(lambda: call(app, path, query))  # type: ignore[no-any-return]


def test_a_room_answers_its_revision_without_caching() -> None:
    room = rooms.create()
    status, headers, body = get(f"/_room/{room.code}/version")
    assert status == 200
    assert headers["cache-control"] == "no-store"
    assert headers["content-type"].startswith("application/json")
    assert body == {"code": room.code, "version": 0}


def test_the_revision_moves_with_every_write_of_the_room() -> None:
    room = rooms.create()
    seen = [get(f"/_room/{room.code}/version")[2]["version"]]
    for write in (
        lambda: rooms.move(room.code, room.key, page="Compare", query="tau=0.05"),
        lambda: rooms.ask(room.code, room.key, "q1", QUESTION),
        lambda: rooms.reveal(room.code, room.key),
        lambda: rooms.close_question(room.code, room.key),
    ):
        write()
        time.sleep(rooms.REVISION_TTL_S + 0.05)  # past this process's memory layer, as a second replica would be
        seen.append(get(f"/_room/{room.code}/version")[2]["version"])
    assert seen == sorted(set(seen)) and len(seen) == 5  # strictly increasing: every write is a new revision
    rooms.move(room.code, room.key, page="Compare", query="tau=0.05")  # nothing changed: nothing written
    time.sleep(rooms.REVISION_TTL_S + 0.05)
    assert get(f"/_room/{room.code}/version")[2]["version"] == seen[-1]


def test_a_refused_move_does_not_change_the_revision() -> None:
    room = rooms.create()
    with pytest.raises(rooms.RoomError):
        rooms.move(room.code, "forged", page="Compare", query="tau=1")
    time.sleep(rooms.REVISION_TTL_S + 0.05)
    assert get(f"/_room/{room.code}/version")[2]["version"] == 0


def test_a_wrong_code_gets_a_404_with_a_clear_message() -> None:
    status, headers, body = get("/_room/ABCDEF/version")
    assert status == 404 and headers["cache-control"] == "no-store"
    assert "No room `ABCDEF`" in body["error"]


@pytest.mark.parametrize("code", ["abcdef", "ABCDE", "ABCDEFG", "ABCDE0", "ABC%20EF", "..%2F..", "ABCDE%00"])
def test_a_code_that_cannot_be_one_is_refused_before_the_store_is_read(
    code: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    room = rooms.create()
    monkeypatch.setattr(rooms, "state", lambda *a, **k: pytest.fail("the store was read"))
    status, headers, body = get(f"/_room/{code}/version")
    assert status == 404 and headers["cache-control"] == "no-store"
    assert "is not a room code" in body["error"]
    assert room.code  # a real room exists; a lower-case or padded spelling of a code still is not one


def test_an_expired_room_gets_a_404() -> None:
    room = rooms.create(now=time.time() - rooms.lifetime_s() - 10)
    status, _, body = get(f"/_room/{room.code}/version")
    assert status == 404
    assert f"Room `{room.code}` has expired" in body["error"]


def test_under_a_base_url_path_the_route_answers_there_too() -> None:
    room = rooms.create()
    assert get(f"/explorer/_room/{room.code}/version", base="/explorer/")[0] == 200
    assert get(f"/_room/{room.code}/version", base="/explorer/")[0] == 200
    assert get(f"/explorer/_room/{room.code}/version")[0] == 404  # no base path: nothing there


def test_a_request_after_an_older_revision_is_answered_at_once() -> None:
    room = rooms.create()
    rooms.move(room.code, room.key, page="Compare", query="tau=1")
    started = time.monotonic()
    status, _, body = get(f"/_room/{room.code}/version", query="after=0")
    assert status == 200 and body["version"] > 0
    assert time.monotonic() - started < 1.0


def test_a_held_request_is_answered_when_the_room_moves_and_not_before(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(room_version, "HOLD_S", 30.0)
    room = rooms.create()
    app = Starlette(routes=room_version.routes())
    moved_at: list[float] = []

    def move_later() -> None:
        time.sleep(1.0)
        moved_at.append(time.monotonic())
        rooms.move(room.code, room.key, page="Compare", query="tau=0.05")

    async def work() -> tuple[Any, float]:
        mover = threading.Thread(target=move_later)
        mover.start()
        answer = await call(app, f"/_room/{room.code}/version", "after=0")
        answered = time.monotonic()
        mover.join()
        return answer, answered

    (status, headers, body), answered = in_thread(work)
    assert status == 200 and headers["cache-control"] == "no-store"
    assert body == {"code": room.code, "version": rooms.state(room.code).rev} and body["version"] > 0
    delay = answered - moved_at[0]
    # Held until the move (not answered at once), and then answered within the watcher's read interval, not a poll's.
    assert 0 <= delay <= rooms.REVISION_TTL_S + 0.35, delay
    assert room_version.held() == 0


def test_a_held_request_for_an_unmoved_room_is_answered_unchanged_after_the_hold(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(room_version, "HOLD_S", 1.5)
    room = rooms.create()
    started = time.monotonic()
    status, _, body = get(f"/_room/{room.code}/version", query="after=0")
    took = time.monotonic() - started
    assert status == 200 and body == {"code": room.code, "version": 0}
    assert 1.5 <= took < 3.0, took


def test_many_held_requests_share_one_store_read_per_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(room_version, "HOLD_S", 1.5)
    room = rooms.create()
    reads: list[float] = []
    real_state = rooms.state
    monkeypatch.setattr(rooms, "state", lambda code: reads.append(time.monotonic()) or real_state(code))
    app = Starlette(routes=room_version.routes())

    async def work() -> list[Any]:
        return await asyncio.gather(*(call(app, f"/_room/{room.code}/version", "after=0") for _ in range(40)))

    started = time.monotonic()
    answers = in_thread(work)
    took = time.monotonic() - started
    assert [a[0] for a in answers] == [200] * 40
    # 40 students held for 1.5 s: about one read per REVISION_TTL_S for all of them, not one per student.
    assert len(reads) <= took / rooms.REVISION_TTL_S + 3, (len(reads), took)
    assert room_version.held() == 0


def test_a_closed_tab_ends_its_held_request_within_the_check_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(room_version, "HOLD_S", 60.0)
    room = rooms.create()
    app = Starlette(routes=room_version.routes())
    started = time.monotonic()
    status, _, _ = in_thread(lambda: call(app, f"/_room/{room.code}/version", "after=0", leave_after_s=0.3))
    took = time.monotonic() - started
    assert status == 204
    # The first check may only read the request's (empty) body, as a server's first message is: two checks at most.
    assert took <= 0.3 + 2 * room_version.DISCONNECT_CHECK_S + 0.5, took
    assert took - 0.3 < 2.0  # a closed tab's work stops within 2 s
    assert room_version.held() == 0


def test_a_room_that_expires_while_held_answers_404(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(room_version, "HOLD_S", 30.0)
    room = rooms.create()
    real_revision = rooms.revision
    gone_at = time.monotonic() + 0.8

    def revision(code: str | None) -> int:
        if time.monotonic() >= gone_at:
            raise rooms.RoomError(
                f"Room `{room.code}` has expired (rooms last 4 hours); ask the teacher for a new one."
            )
        return real_revision(code)

    monkeypatch.setattr(rooms, "revision", revision)
    status, _, body = get(f"/_room/{room.code}/version", query="after=0")
    assert status == 404 and "has expired" in body["error"]
    assert time.monotonic() < gone_at + 2.0


def test_past_the_held_limit_a_replica_answers_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(room_version, "MAX_HELD", 0)
    room = rooms.create()
    started = time.monotonic()
    status, _, body = get(f"/_room/{room.code}/version", query="after=0")
    assert status == 200 and body["version"] == 0
    assert time.monotonic() - started < 1.0


# Negative, not a number, a float, empty, an Arabic-Indic digit, repeated, and past any revision.
BAD_AFTER = [
    "after=-1",
    "after=abc",
    "after=1e3",
    "after=1.5",
    "after=",
    "after=%D9%A1",
    "after=1&after=2",
    "after=" + "9" * 40,
]


@pytest.mark.parametrize("query", BAD_AFTER)
def test_a_bad_after_is_refused_with_a_message_naming_it(query: str) -> None:
    room = rooms.create()
    status, headers, body = get(f"/_room/{room.code}/version", query=query)
    assert status == 400 and headers["cache-control"] == "no-store"
    assert body["error"].startswith("`after` must be one whole number from 0 to")


class _Uvicorn:
    """Stands for uvicorn's Server: its SIGTERM handler is a bound method, and a signal sets ``should_exit``."""

    should_exit = False

    def handle_exit(self, sig: int, frame: Any) -> None:
        self.should_exit = True


def test_a_stopping_server_answers_its_held_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(room_version, "HOLD_S", 60.0)
    server = _Uvicorn()
    previous = signal.signal(signal.SIGTERM, server.handle_exit)
    try:
        room = rooms.create()
        threading.Timer(0.5, server.handle_exit, args=(signal.SIGTERM, None)).start()
        started = time.monotonic()
        status, _, body = get(f"/_room/{room.code}/version", query="after=0")
        took = time.monotonic() - started
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert status == 200 and body == {"code": room.code, "version": 0}  # the browser asks again, elsewhere
    assert took < 0.5 + room_version.DISCONNECT_CHECK_S + 0.5, took
    assert room_version.held() == 0


def test_a_real_server_with_a_held_request_stops_promptly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """uvicorn waits for every open request before it exits: a held one must not keep the server up for HOLD_S (a
    deploy, a scale-down), nor until the SIGKILL that follows a stop's 15 s."""
    import http.client
    import os

    from deploy.processes import app_server

    root = Path(__file__).resolve().parent.parent
    cache = str(tmp_path / "cache")
    monkeypatch.setenv("ATTN_EXPLORER_CACHE_DIR", cache)  # the room is made here, in the server's store
    env = {**os.environ, "ATTN_EXPLORER_CACHE_DIR": cache, "ATTN_EXPLORER_WARMUP": "0", "ATTN_EXPLORER_PREFETCH": "0"}
    env.pop("ATTN_EXPLORER_CACHE_URL", None)
    room = rooms.create()
    answers: list[tuple[int, float]] = []
    with app_server(root, env=env) as server:
        host, port = server.url.removeprefix("http://").split(":")

        def ask() -> None:
            connection = http.client.HTTPConnection(host, int(port), timeout=60)
            connection.request("GET", f"/_room/{room.code}/version?after=0")
            answers.append((connection.getresponse().status, time.monotonic()))

        asker = threading.Thread(target=ask)
        asker.start()
        time.sleep(2.0)  # the request is held
        assert not answers, "an unmoved room's request was answered at once"
        stopping = time.monotonic()
    stopped = time.monotonic() - stopping
    asker.join(timeout=10)
    assert answers and answers[0][0] == 200
    assert answers[0][1] - stopping < 2.0, answers[0][1] - stopping
    assert stopped < 8.0, f"the server took {stopped:.1f} s to stop with a held request"
