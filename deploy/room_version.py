"""``GET /_room/{code}/version``: a room's revision, which a student's browser asks for (``ui/room_poll.py``) so that
its page reruns only when the room changed (a move, a question opened or closed, a reveal), instead of rerunning a
Streamlit fragment every second.

    GET /_room/K7PX3M/version                 answered at once
    GET /_room/K7PX3M/version?after=12        held until the revision is past 12, for up to HOLD_S
    {"code": "K7PX3M", "version": 13}                     200, Cache-Control: no-store
    {"error": "No room `K7PX3M`: check the code, ..."}    404 (a code that cannot be one, a wrong or expired room)
    {"error": "`after` must be a whole number ..."}       400

Held requests (long polling) let a student follow a move within about ``service.rooms.REVISION_TTL_S`` of it instead
of within a polling interval, and an idle room costs one answer per student and HOLD_S instead of one a second. While
any request of a room is held, one watcher per replica and room reads the revision (one store read per
REVISION_TTL_S, whatever the number of students) and wakes them all. Past MAX_HELD held requests a replica answers at
once, and the browser falls back to asking once a second. A closed tab's request ends within two DISCONNECT_CHECK_S,
and every held request within one once the server is asked to stop (uvicorn waits for open requests before it exits).

The code must be exactly a stored code (``service.rooms.ALPHABET``, ``CODE_LENGTH``) before anything reads the store;
it is never used as a path. Served by ``deploy/serve.py`` beside the app (``st.App(routes=...)``), on the same port.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from service import rooms

PATH = "/_room/{code}/version"
HEADERS = {"Cache-Control": "no-store"}
HOLD_S = 20.0  # a held request is answered, changed or not, after this long (well under proxies' 60 s read timeouts)
MAX_HELD = 2000  # held requests per replica; past it, requests are answered at once
DISCONNECT_CHECK_S = 0.5  # the first check reads the request's own message: a closed tab is seen by the second
MAX_AFTER = 2**53  # a revision is a JSON number; anything larger cannot be one


class _Watch:
    """The revision of one room on this replica, read while a request of it is held."""

    def __init__(self, code: str) -> None:
        self.code = code
        self.rev = -1
        self.error = ""
        self.held = 0
        self.changed = asyncio.Event()

    async def run(self) -> None:
        try:
            while self.held > 0:
                try:
                    rev, error = await run_in_threadpool(rooms.revision, self.code), ""
                except rooms.RoomError as failure:
                    rev, error = self.rev, str(failure)
                if rev != self.rev or error != self.error:
                    self.rev, self.error = rev, error
                    woken, self.changed = self.changed, asyncio.Event()
                    woken.set()
                await asyncio.sleep(rooms.REVISION_TTL_S)
        finally:
            _watches.pop((id(asyncio.get_running_loop()), self.code), None)


_watches: dict[tuple[int, str], _Watch] = {}
_held = 0


def server_exiting() -> bool:
    """True once the server has been asked to stop: uvicorn's SIGTERM handler (a bound method of its ``Server``) has
    set ``should_exit``. uvicorn then waits for every open request before it exits, so a held request must end."""
    handler = signal.getsignal(signal.SIGTERM)
    return bool(getattr(getattr(handler, "__self__", None), "should_exit", False))


def _error(message: str, status: int) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=HEADERS)


def _answer(code: str, rev: int) -> JSONResponse:
    return JSONResponse({"code": code, "version": rev}, headers=HEADERS)


def _after(request: Request) -> int | None | str:
    """The ``after`` parameter: None when absent, the revision, or the message that refuses it."""
    values = request.query_params.getlist("after")
    if not values:
        return None
    raw = values[-1].strip()
    if len(values) > 1 or not raw.isascii() or not raw.isdigit() or len(raw) > 16 or int(raw) > MAX_AFTER:
        return f"`after` must be one whole number from 0 to {MAX_AFTER} (the revision the page drew)."
    return int(raw)


async def version(request: Request) -> Response:
    raw = str(request.path_params.get("code", ""))
    if len(raw) != rooms.CODE_LENGTH or any(ch not in rooms.ALPHABET for ch in raw):  # strict: the stored form only
        shown = raw[:12] or "(empty)"
        message = f"`{shown}` is not a room code: a room code is {rooms.CODE_LENGTH} capital letters and digits."
        return _error(message, 404)
    after = _after(request)
    if isinstance(after, str):
        return _error(after, 400)
    try:
        rev = await run_in_threadpool(rooms.revision, raw)  # a store read off the event loop
    except rooms.RoomError as error:
        return _error(str(error), 404)
    if after is None or rev > after or _held >= MAX_HELD:
        return _answer(raw, rev)
    return await _hold(request, raw, after, rev)


async def _hold(request: Request, code: str, after: int, rev: int) -> Response:
    """Answer when the room's revision is past ``after``, it has gone, HOLD_S have passed, or the client has left."""
    global _held
    loop = asyncio.get_running_loop()
    watch = _watches.get((id(loop), code))
    if watch is None:
        watch = _watches[(id(loop), code)] = _Watch(code)
        watch.rev = rev
        watch.held = 1
        task = loop.create_task(watch.run())
        _tasks.add(task)
        task.add_done_callback(_tasks.discard)
    else:
        watch.held += 1
    _held += 1
    deadline = loop.time() + HOLD_S
    try:
        while True:
            if watch.error:
                return _error(watch.error, 404)
            if watch.rev > after:
                return _answer(code, watch.rev)
            left = deadline - loop.time()
            if left <= 0 or server_exiting():  # held long enough, or the server is stopping: the browser asks again
                return _answer(code, max(watch.rev, rev))
            changed = watch.changed
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), timeout=min(left, DISCONNECT_CHECK_S))
            if not changed.is_set() and await request.is_disconnected():
                return Response(status_code=204, headers=HEADERS)  # nobody reads it: the tab has closed
    finally:
        watch.held -= 1
        _held -= 1


_tasks: set[asyncio.Task[None]] = set()  # the watchers' tasks, kept referenced while they run


def held() -> int:
    """Requests held on this replica now (for tests and operators)."""
    return _held


def routes(base_url_path: str = "") -> list[BaseRoute]:
    """The route at the root and, where Streamlit serves under ``server.baseUrlPath``, under that path too (a
    relative URL from a page reaches it either way)."""
    paths = [PATH]
    base = base_url_path.strip("/")
    if base:
        paths.append(f"/{base}{PATH}")
    return [Route(path, version, methods=["GET"]) for path in paths]
