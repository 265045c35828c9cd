"""``GET /_room/{code}/version``: a room's revision, which a student's browser polls (``ui/room_poll.py``) so that
its page reruns only when the room changed (a move, a question opened or closed, a reveal), instead of rerunning a
Streamlit fragment every second.

    {"code": "K7PX3M", "version": 12}                     200, Cache-Control: no-store
    {"error": "No room `K7PX3M`: check the code, ..."}    404 (a code that cannot be one, a wrong or expired room)

The code must be exactly a stored code (``service.rooms.ALPHABET``, ``CODE_LENGTH``) before anything reads the store;
it is never used as a path. One store read per replica and ``service.rooms.REVISION_TTL_S`` answers every
student of a room. Served by ``deploy/serve.py`` beside the app (``st.App(routes=...)``), on the same port.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from service import rooms

PATH = "/_room/{code}/version"
HEADERS = {"Cache-Control": "no-store"}


def version(request: Request) -> JSONResponse:
    """A plain function: Starlette runs it in its thread pool, so a store read never blocks the event loop."""
    raw = str(request.path_params.get("code", ""))
    if len(raw) != rooms.CODE_LENGTH or any(ch not in rooms.ALPHABET for ch in raw):  # strict: the stored form only
        shown = raw[:12] or "(empty)"
        message = f"`{shown}` is not a room code: a room code is {rooms.CODE_LENGTH} capital letters and digits."
        return JSONResponse({"error": message}, status_code=404, headers=HEADERS)
    try:
        rev = rooms.revision(raw)
    except rooms.RoomError as error:
        return JSONResponse({"error": str(error)}, status_code=404, headers=HEADERS)
    return JSONResponse({"code": raw, "version": rev}, headers=HEADERS)


def routes(base_url_path: str = "") -> list[BaseRoute]:
    """The route at the root and, where Streamlit serves under ``server.baseUrlPath``, under that path too (a
    relative URL from a page reaches it either way)."""
    paths = [PATH]
    base = base_url_path.strip("/")
    if base:
        paths.append(f"/{base}{PATH}")
    return [Route(path, version, methods=["GET"]) for path in paths]
