"""deploy/room_version.py: ``GET /_room/{code}/version``, the revision a student's browser polls. Strict codes (never
a path), no-store, a 404 with a message for a wrong code, and a revision that moves with the room (move, question,
reveal) and within ``REVISION_TTL_S`` on a second replica's memory layer."""

from __future__ import annotations

import asyncio
import json
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


def get(path: str, base: str = "") -> tuple[int, dict[str, str], Any]:
    """One GET through Starlette's router (no HTTP client needed): status, headers, JSON body."""
    app = Starlette(routes=room_version.routes(base))
    scope = {
        "type": "http",
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"testserver")],
        "client": ("127.0.0.1", 1),
        "server": ("testserver", 80),
    }
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    # In a thread of its own: a browser test run earlier in this process (same xdist worker) leaves Playwright's event
    # loop running in the main thread, where asyncio.run refuses to start.
    worker = threading.Thread(target=lambda: asyncio.run(app(scope, receive, send)))
    worker.start()
    worker.join(timeout=60)
    start = next(m for m in sent if m["type"] == "http.response.start")
    headers = {k.decode().lower(): v.decode() for k, v in start["headers"]}
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    is_json = headers.get("content-type", "").startswith("application/json")
    return start["status"], headers, json.loads(body) if is_json else body.decode()


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
