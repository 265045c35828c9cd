"""A class in one room at scale: N students (protocol clients, as benchmarks/load.py's) follow one teacher over two
replicas that share one cache folder.

Each student opens ``/?room=<code>`` over Streamlit's websocket and behaves as the browser does with the room's poll
(``ui/room_poll.py``): it asks its replica ``GET /_room/<code>/version?after=<seen>`` over one kept-alive HTTP
connection, which the replica holds until the room moves past the revision its last page run drew (the component's
``seen``), and reruns the page only then; it still answers a fragment's ``auto_rerun`` if the server asks for one.
The teacher moves the room (``service.rooms.move``, what the teacher's page writes at the end of its run) between two
temperatures of Compare; for each move and student the benchmark times

  * follow: the move -> the student's session switches to the teacher's settings (``page_info_changed`` with them),
  * shown: the move -> that new page run finished (``script_finished``),

and counts errors (an exception on the page, a lost connection, a student that did not follow within the timeout).
Then every student idles in the room for ``--idle-s`` seconds and the CPU of each replica's process tree is measured.

    python -m benchmarks.rooms                       # 60 students, 2 replicas, 5 moves, 20 s idle
    python -m benchmarks.rooms --quick --out /tmp/bench
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shutil
import tempfile
import time
import urllib.parse
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import harness
from benchmarks.load import percentile, stream_url
from deploy import processes
from ui import room_poll

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "results"
TAUS = ("0.05", "1")
QUERY = "n=64&methods=performer&methods=lsh&tau={tau}"


@dataclass
class Student:
    index: int
    server: str
    query: str = ""  # the query string of the page this session shows now
    page_hash: str = ""
    finished_at: float = 0.0  # monotonic time of the last script_finished
    changed_at: dict[str, float] = field(default_factory=dict)  # tau -> when the session's URL switched to it
    shown_at: dict[str, float] = field(default_factory=dict)  # tau -> when that page run finished
    errors: list[str] = field(default_factory=list)
    ready: bool = False
    seen: int | None = None  # the revision the room poll of the last page run drew
    version_requests: int = 0
    held: bool = True  # the app's protocol (after=<seen>, held by the replica); False: a plain request every POLL_MS


def _tau(query: str) -> str | None:
    found = urllib.parse.parse_qs(query).get("tau")
    return found[0] if found else None


async def student(s: Student, code: str, stop: asyncio.Event) -> None:
    import websockets
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    async def send_rerun(ws: Any, fragment_id: str = "") -> None:
        request = BackMsg()
        request.rerun_script.query_string = s.query
        request.rerun_script.page_script_hash = s.page_hash
        if fragment_id:
            request.rerun_script.fragment_id = fragment_id
            request.rerun_script.is_auto_rerun = True
        await ws.send(request.SerializeToString())

    async def poll(ws: Any, fragment_id: str, interval: float) -> None:
        while not stop.is_set():
            await asyncio.sleep(interval)
            await send_rerun(ws, fragment_id)

    async def version_poll(ws: Any) -> None:
        """The component's loop: GET the revision with ``after=<seen>`` (keep-alive), which the replica holds until
        the room moves; a page rerun when it moved; an early answer asked again no sooner than POLL_MS after it was
        asked. With ``s.held`` False, the previous protocol: a plain GET every POLL_MS, answered at once."""
        host, port = urllib.parse.urlsplit(s.server).hostname, urllib.parse.urlsplit(s.server).port
        reader, writer = await asyncio.open_connection(host, port)
        seen = -1  # the component's own: the revision its page run drew, or the newer one it reran for
        if not s.held:
            await asyncio.sleep(random.random() * room_poll.POLL_MS / 1000)  # browsers' timers start at any phase
        try:
            while not stop.is_set():
                if s.seen is None and seen < 0:  # the component is mounted by the first page run
                    await asyncio.sleep(0.05)
                    continue
                if s.seen is not None:
                    seen = s.seen
                started = time.monotonic()
                path = f"/_room/{code}/version" + (f"?after={seen}" if s.held else "")
                writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAccept: */*\r\n\r\n".encode())
                await writer.drain()
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(re.search(rb"content-length: *(\d+)", head, re.IGNORECASE)[1])  # type: ignore[index]
                body = await reader.readexactly(length)
                s.version_requests += 1
                if not head.startswith(b"HTTP/1.1 200"):
                    s.errors.append(f"version: {head.splitlines()[0].decode()} {body.decode()[:100]}")
                elif (version := json.loads(body)["version"]) > seen:
                    seen = version
                    s.seen = None  # until the rerun draws the component again
                    await send_rerun(ws)
                pause = room_poll.POLL_MS / 1000 - ((time.monotonic() - started) if s.held else 0.0)
                await asyncio.sleep(max(0.0, pause))
        except Exception as error:  # noqa: BLE001 - a lost poll is an error of the run, counted
            if not stop.is_set():
                s.errors.append(f"version poll: {type(error).__name__}: {error}"[:200])
        finally:
            writer.close()

    pollers: dict[str, asyncio.Task[None]] = {}
    try:
        async with websockets.connect(stream_url(s.server), subprotocols=["streamlit"], max_size=None) as ws:  # type: ignore[list-item]
            s.query = f"room={code}"
            await send_rerun(ws)
            pollers["version"] = asyncio.create_task(version_poll(ws))
            while not stop.is_set():
                try:
                    data = await asyncio.wait_for(ws.recv(), timeout=0.5)
                except TimeoutError:
                    continue
                msg = ForwardMsg()
                msg.ParseFromString(data)
                kind = msg.WhichOneof("type")
                now = time.monotonic()
                if kind == "new_session":
                    s.page_hash = msg.new_session.page_script_hash
                elif kind == "page_info_changed":
                    s.query = msg.page_info_changed.query_string
                    tau = _tau(s.query)
                    if tau is not None and tau not in s.changed_at:
                        s.changed_at[tau] = now
                elif kind == "auto_rerun":
                    fragment = msg.auto_rerun.fragment_id
                    if fragment not in pollers:
                        pollers[fragment] = asyncio.create_task(poll(ws, fragment, msg.auto_rerun.interval))
                elif kind == "stop_auto_rerun":
                    for name in [name for name in pollers if name != "version"]:
                        pollers.pop(name).cancel()
                elif kind == "delta" and msg.delta.new_element.WhichOneof("type") == "bidi_component":
                    element = msg.delta.new_element.bidi_component
                    if element.component_name == room_poll.COMPONENT_NAME:
                        s.seen = int(json.loads(element.json)["seen"])
                elif kind == "delta" and msg.delta.new_element.WhichOneof("type") == "exception":
                    exc = msg.delta.new_element.exception
                    s.errors.append(f"exception: {exc.type}: {exc.message}"[:200])
                elif kind == "script_finished":
                    s.finished_at = now
                    tau = _tau(s.query)
                    if tau is not None and tau in s.changed_at and tau not in s.shown_at:
                        s.shown_at[tau] = now
                    if "room=" in s.query:
                        s.ready = True
    except Exception as error:  # noqa: BLE001 - a lost connection is an error of the run, counted
        if not stop.is_set():
            s.errors.append(f"connection: {type(error).__name__}: {error}"[:200])
    finally:
        for task in pollers.values():
            task.cancel()


async def scenario(
    servers: list[str], pids: list[int], students: int, moves: int, idle_s: float, held: bool = True
) -> dict[str, Any]:
    from service import rooms

    room = rooms.create()
    stop = asyncio.Event()
    clients = [Student(i, servers[i % len(servers)], held=held) for i in range(students)]
    tasks = [asyncio.create_task(student(c, room.code, stop)) for c in clients]
    # Warm both replicas on the two views (as a teacher's own page run would have), then join everyone.
    rooms.move(room.code, room.key, page="Compare", query=QUERY.format(tau=TAUS[-1]), step=0)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not all(c.ready for c in clients):
        await asyncio.sleep(0.5)
    joined = sum(c.ready for c in clients)
    follow: list[float] = []
    shown: list[float] = []
    missed = 0
    for index in range(moves):
        tau = TAUS[index % 2]
        for c in clients:
            c.changed_at.pop(tau, None)
            c.shown_at.pop(tau, None)
        await asyncio.sleep(1.0 + 0.37 * index)  # moves fall at different points of the students' poll cycle
        moved = time.monotonic()
        rooms.move(room.code, room.key, page="Compare", query=QUERY.format(tau=tau), step=0)
        limit = time.monotonic() + 30
        while time.monotonic() < limit and not all(tau in c.shown_at for c in clients):
            await asyncio.sleep(0.05)
        for c in clients:
            if tau in c.changed_at:
                follow.append(c.changed_at[tau] - moved)
            if tau in c.shown_at:
                shown.append(c.shown_at[tau] - moved)
            else:
                missed += 1
    # Idle: everyone in the room, nothing moves.
    await asyncio.sleep(2.0)
    before = [harness.tree_cpu_seconds([pid]) for pid in pids]
    start = time.monotonic()
    await asyncio.sleep(idle_s)
    elapsed = time.monotonic() - start
    idle = [(harness.tree_cpu_seconds([pid]) - b) / elapsed for pid, b in zip(pids, before, strict=True)]
    load_after_idle = os.getloadavg()
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    errors = [e for c in clients for e in c.errors]
    return {
        "students": students,
        "replicas": len(servers),
        "joined": joined,
        "moves": moves,
        "follow_p50_s": percentile(follow, 50),
        "follow_p95_s": percentile(follow, 95),
        "shown_p50_s": percentile(shown, 50),
        "shown_p95_s": percentile(shown, 95),
        "shown_max_s": max(shown) if shown else None,
        "not_followed": missed,
        "errors": len(errors),
        "error_samples": errors[:5],
        "idle_s": idle_s,
        "idle_cpu_per_replica_core": [round(x, 4) for x in idle],
        "version_requests": sum(c.version_requests for c in clients),
        "load_after_idle": [round(x, 2) for x in load_after_idle],
    }


def _fmt(value: Any, *, percent: bool = True) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.2f}"
    if isinstance(value, list):
        return ", ".join(f"{100 * v:.1f} %" if percent else f"{v:g}" for v in value)
    return str(value)


# The app's protocol first (the targets are judged on it), then the one it replaced, measured in the same run.
PROTOCOLS = {
    "held": "held until the room moves (`?after=<seen>`, the app)",
    "poll": "a request every second (before)",
}


def _rows(result: dict[str, Any]) -> list[tuple[str, Any]]:
    return [
        ("students (protocol clients) / replicas", f"{result['students']} / {result['replicas']}"),
        ("joined the room", result["joined"]),
        ("teacher's moves (Compare, τ 0.05 <-> 1)", result["moves"]),
        (
            "move -> student's URL follows, p50 / p95 (s)",
            f"{_fmt(result['follow_p50_s'])} / {_fmt(result['follow_p95_s'])}",
        ),
        (
            "move -> student's page run finished, p50 / p95 / max (s)",
            f"{_fmt(result['shown_p50_s'])} / {_fmt(result['shown_p95_s'])} / {_fmt(result['shown_max_s'])}",
        ),
        ("target p95 <= 2 s", "met" if (result["shown_p95_s"] or 99) <= 2.0 else "NOT met"),
        ("students not shown a move within 30 s", result["not_followed"]),
        ("errors", result["errors"]),
        (f"CPU per replica while the room idles ({result['idle_s']:g} s)", _fmt(result["idle_cpu_per_replica_core"])),
        ("target idle < 5 % of a core", "met" if max(result["idle_cpu_per_replica_core"]) < 0.05 else "NOT met"),
        ("revision requests answered (all students, whole run)", result.get("version_requests", "–")),
        ("load average after the idle measurement", _fmt(result.get("load_after_idle"), percent=False)),
    ]


def markdown(result: dict[str, Any], command: str) -> str:
    """The table: one column per protocol measured (``result["protocols"]``, in PROTOCOLS' order)."""
    measured = [name for name in PROTOCOLS if name in result["protocols"]]
    rows = {name: _rows(result["protocols"][name]) for name in measured}
    first = rows[measured[0]]
    lines = [
        f"# A class in one room: {first[0][1].replace(' / ', ' students over ')} replicas",
        "",
        f"Command: `{command}`. Commit {result.get('commit') or '?'}; machine: {result['machine']}. Each protocol"
        " ran on fresh replicas with an empty cache, one after the other.",
        "",
        "| measure | " + " | ".join(PROTOCOLS[name] for name in measured) + " |",
        "|---|" + "---|" * len(measured),
        *(
            f"| {label} | " + " | ".join(str(rows[name][index][1]) for name in measured) + " |"
            for index, (label, _) in enumerate(first)
        ),
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=60)
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--moves", type=int, default=5)
    parser.add_argument("--idle-s", type=float, default=20.0)
    parser.add_argument("--quick", action="store_true", help="6 students, 2 moves, 5 s idle")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument(
        "--protocols", nargs="+", choices=list(PROTOCOLS), default=list(PROTOCOLS), help="default: both, in turn"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.students, args.moves, args.idle_s = 6, 2, 5.0
    scratch = Path(tempfile.mkdtemp(prefix="bench-rooms-"))
    env = dict(
        os.environ,
        ATTN_EXPLORER_CACHE_DIR=str(scratch / "results"),
        ATTN_EXPLORER_WARMUP="0",
        ATTN_EXPLORER_PREFETCH="0",
    )
    env.pop("ATTN_EXPLORER_CACHE_URL", None)
    os.environ["ATTN_EXPLORER_CACHE_DIR"] = env["ATTN_EXPLORER_CACHE_DIR"]  # the teacher's moves: the same store
    os.environ.pop("ATTN_EXPLORER_CACHE_URL", None)
    load_start = os.getloadavg()
    result: dict[str, Any] = {"protocols": {}}
    for protocol in args.protocols:
        with ExitStack() as stack:
            # Each protocol starts from an empty cache folder of its own, which the teacher's moves here write to.
            env["ATTN_EXPLORER_CACHE_DIR"] = str(scratch / protocol / "results")
            os.environ["ATTN_EXPLORER_CACHE_DIR"] = env["ATTN_EXPLORER_CACHE_DIR"]
            apps = [stack.enter_context(processes.app_server(ROOT, env=env)) for _ in range(args.replicas)]
            run = scenario(
                [a.url for a in apps],
                [a.process.pid for a in apps],
                args.students,
                args.moves,
                args.idle_s,
                held=protocol == "held",
            )
            result["protocols"][protocol] = asyncio.run(run)
    shutil.rmtree(scratch, ignore_errors=True)
    result["commit"] = harness.commit(ROOT)
    facts = harness.machine_facts(load_start)
    result["machine_facts"] = facts
    result["machine"] = (
        f"{facts['cpus']} CPU cores, {facts['platform']}, load at start {facts['load_average_at_start']}"
    )
    command = "python -m benchmarks.rooms" + (" " + " ".join(argv) if argv else "")
    harness.write_results(args.out, "rooms", result, markdown(result, re.sub(r"\s+", " ", command)))
    return result


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
