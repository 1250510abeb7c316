"""Websocket clients watching many sessions on a live server at once, as browsers would, and how late each
node change reached them: its arrival minus the node's own recorded time (`bench._api.changed_at`, taken
just before its write, so the figure slightly overstates commit-to-arrival).

The clients run in a process of their own (`python -m bench._live_watch HOST:PORT`, one event loop), as
browsers are: the bench's process, busy launching sessions, neither delays their reading nor shares an
interpreter lock with them. `LiveWatch` starts that process and tells it, on its stdin, which session to
watch with which login cookie; each client follows its session from its snapshot to its end.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._api import changed_at  # noqa: E402 (after the path is set, when run as a script)
from bench._ws_client import WebSocket, WebSocketClosed  # noqa: E402

TERMINAL = ("completed", "error", "cancelled", "interrupted")
RECONNECTS = 5


class LiveWatch:
    """The client process: `watch` opens a client on a session; `results` once the sessions have ended."""

    def __init__(self, server_url: str):
        self._lock = threading.Lock()  # launching threads call `watch` at once
        self._process = subprocess.Popen([sys.executable, "-m", "bench._live_watch", server_url.split("//", 1)[1]],
                                         cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    @property
    def pid(self) -> int:
        return self._process.pid

    def watch(self, session_id, cookie: str) -> None:
        """Open a client on `session_id`'s stream, logged in by the `sessionid` cookie `cookie`."""
        with self._lock:
            self._process.stdin.write(f"{session_id} {cookie}\n")
            self._process.stdin.flush()

    def results(self, timeout_s: float) -> dict:
        """Waits up to `timeout_s` for every client to see its session end, closes the rest: the latencies
        (ms, sorted), how many clients, how many were still open, how many times they reconnected, what
        failed, and how many clients received how many node changes (`by_count`)."""
        with self._lock:
            self._process.stdin.write(f"results {timeout_s}\n")
        output, _ = self._process.communicate(timeout=timeout_s + 30)
        return json.loads(output)


def _ended(message: dict) -> bool:
    """Whether `message` says its session has ended (or is gone)."""
    kind = message["type"]
    if kind == "deleted":
        return True
    if kind in ("snapshot", "session"):
        return (message.get("session") or {}).get("status") in TERMINAL
    return kind == "batch" and any(_ended(item) for item in message["items"])


def _changes(message: dict, asked: float) -> list[float]:
    """When each node change `message` carries was made: every live one, and those of a snapshot made
    after the client `asked` for its stream (a server slow to open it delivers them late; the earlier
    ones a page opened later would see as they are, no latency of the live view)."""
    if message["type"] in ("snapshot", "snapshot_more"):
        return [moment for moment in map(changed_at, message["nodes"]) if moment >= asked]
    items = message["items"] if message["type"] == "batch" else [message]
    return [changed_at(item["node"]) for item in items if item["type"] == "node"]


class Clients:
    """The clients of the watching process, on its event loop."""

    def __init__(self, netloc: str):
        self.netloc = netloc
        self.latencies_ms: list[float] = []
        self.failures: list[str] = []
        self.reconnections = 0
        self.received: dict[str, int] = {}  # node changes received, by session
        self.tasks: list[asyncio.Task] = []

    async def results(self, timeout_s: float) -> dict:
        """What `LiveWatch.results` returns, once every client has ended or `timeout_s` has passed."""
        if self.tasks:
            await asyncio.wait(self.tasks, timeout=timeout_s)
        still_open = [task for task in self.tasks if not task.done()]
        for task in still_open:
            task.cancel()
        await asyncio.gather(*still_open, return_exceptions=True)  # their sockets closed
        received = Counter(self.received.get(task.get_name(), 0) for task in self.tasks)
        return {"latencies_ms": sorted(self.latencies_ms), "clients": len(self.tasks),
                "still_open": len(still_open), "reconnections": self.reconnections, "failures": self.failures,
                "by_count": dict(sorted(received.items()))}

    async def follow(self, session_id: str, cookie: str) -> None:
        """Read the session's stream to its end, reconnecting as the page does when the server closes it
        (4503 while the channel layer is out of reach, a reset) with a growing pause, RECONNECTS times."""
        problem = None
        for attempt in range(RECONNECTS + 1):
            if attempt:
                self.reconnections += 1
                await asyncio.sleep(0.5 * attempt)
            try:
                await self._read_to_end(session_id, cookie)
                return
            except (OSError, WebSocketClosed, asyncio.IncompleteReadError) as exc:
                problem = exc
            except (KeyError, TypeError, ValueError) as exc:  # a message not as expected: said, not retried
                self.failures.append(f"{session_id}: a message this client cannot read: {exc!r}")
                return
        self.failures.append(f"{session_id}: {problem!r}, {RECONNECTS} reconnections later")

    async def _read_to_end(self, session_id: str, cookie: str) -> None:
        asked = time.time()
        socket_ = await WebSocket.connect(f"ws://{self.netloc}/ws/sessions/{session_id}/",
                                          cookie=f"sessionid={cookie}")
        try:
            while True:
                message = json.loads(await socket_.recv())
                arrived = time.time()
                latencies = [(arrived - moment) * 1000 for moment in _changes(message, asked)]
                self.latencies_ms.extend(latencies)
                self.received[session_id] = self.received.get(session_id, 0) + len(latencies)
                if _ended(message):
                    return
        finally:
            with contextlib.suppress(OSError):  # the server may have closed it first
                await socket_.close()


async def serve(netloc: str) -> None:
    """Read "<session id> <cookie>" lines from stdin, a client for each, until "results <timeout>"; then
    print the results as JSON."""
    clients = Clients(netloc)
    loop = asyncio.get_running_loop()
    while True:
        line = (await loop.run_in_executor(None, sys.stdin.readline)).split()
        if not line or line[0] == "results":
            timeout_s = float(line[1]) if line else 0.0
            print(json.dumps(await clients.results(timeout_s)), flush=True)
            return
        clients.tasks.append(asyncio.create_task(clients.follow(*line), name=line[0]))


if __name__ == "__main__":
    asyncio.run(serve(sys.argv[1]))
