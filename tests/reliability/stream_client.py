"""A websocket client of one session's stream that keeps the DAG the way the browser does
(static/js/live/stream.js): a snapshot, then changes in rev order; on a gap, a heartbeat ahead of it, or
a dropped socket it reconnects with `?since_rev=<last rev applied>`; 4400/4404 are final.

`follow()` runs until the session has ended and the client holds the database's revision; `differences()`
then says what the client holds that the database does not, the `lost` figure of the reliability suite.
"""
from __future__ import annotations

import asyncio
import json
import time

import websockets
from websockets.asyncio.client import connect

FATAL_CODES = {4400, 4404}
BACKOFF_S, MAX_BACKOFF_S = 0.05, 1.0  # the browser's 0.25 to 8 s, shortened to keep the tests short
TERMINAL = {"completed", "error", "cancelled", "interrupted"}  # a session's, as dag.models has them


class StreamFailed(AssertionError):
    pass


class StreamClient:
    def __init__(self, ws_url: str, session_id: str, cookie: str):
        self.base = f"{ws_url}/ws/sessions/{session_id}/"  # a restarted server keeps its port
        self.origin = ws_url.replace("ws", "http", 1)
        self.cookie = cookie
        self.rev: int | None = None
        self.session: dict = {}
        self.nodes: dict[int, dict] = {}
        self.snapshots = 0  # snapshots received in full (one per connection, unless it dropped first)
        self.close_codes: list[int | None] = []  # how each socket the server ended was closed
        self._socket = None
        self._backoff = BACKOFF_S

    @property
    def done(self) -> bool:
        return self.session.get("status") in TERMINAL and self.rev is not None and self.rev >= self.session["rev"]

    async def follow(self, timeout_s: float, *, until_rev: int | None = None) -> "StreamClient":
        """Reconnect as often as needed until done (and at `until_rev` if given), within `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while not self._finished(until_rev):
            if time.monotonic() > deadline:
                raise StreamFailed(f"stream {self.base} not done within {timeout_s:g} s: rev {self.rev}, "
                                   f"session {self.session.get('status')} at rev {self.session.get('rev')}")
            try:
                if await asyncio.wait_for(self.run_once(), max(0.1, deadline - time.monotonic())):
                    continue  # a resync: at once
            except (OSError, asyncio.TimeoutError, websockets.InvalidHandshake):
                pass  # the server is away (restarting)
            await asyncio.sleep(self._backoff)  # closed or away: try again later, like the browser
            self._backoff = min(self._backoff * 2, MAX_BACKOFF_S)
        return self

    def _finished(self, until_rev: int | None) -> bool:
        return self.done and (until_rev is None or self.rev >= until_rev)

    async def run_once(self) -> bool:
        """One socket: read until the session is done or a resync is due (True), or the server closes it
        (False)."""
        query = "" if self.rev is None else f"?since_rev={self.rev}"
        async with connect(self.base + query, origin=self.origin, additional_headers={"Cookie": self.cookie},
                           max_size=None, open_timeout=20) as socket:
            self._socket = socket
            try:
                async for frame in socket:
                    if not self.receive(json.loads(frame)) or self.done:
                        return True
            except websockets.ConnectionClosed:
                pass
            finally:
                self._socket = None
            code = socket.close_code
            self.close_codes.append(code)
            if code in FATAL_CODES:
                raise StreamFailed(f"stream {self.base} refused: {code} {socket.close_reason}")
            return False

    @property
    def connected(self) -> bool:
        return self._socket is not None

    async def drop(self) -> None:
        """Cut the open socket (as a flaky network would); `follow` reconnects from the last rev."""
        socket = self._socket
        if socket is not None:
            socket.transport.abort()

    def receive(self, message: dict) -> bool:
        """Apply one message; False when the stream must reconnect to catch up."""
        kind = message.get("type")
        if kind == "snapshot":
            self._backoff = BACKOFF_S
            if message.get("since_rev") is None:
                self.nodes = {}
            self.session = message["session"]
            self._merge(message["nodes"])
            return self._finish_snapshot(message)
        if kind == "snapshot_more":
            self._merge(message["nodes"])
            return self._finish_snapshot(message)
        if kind == "batch":
            return self._apply(message["items"])
        if kind in ("node", "session"):
            return self._apply([message])
        if kind == "heartbeat":
            return not (self.rev is not None and message["rev"] > self.rev)
        return True

    def _finish_snapshot(self, message: dict) -> bool:
        if not message.get("more"):
            self.snapshots += 1
            self.rev = message["rev"] if self.rev is None else max(self.rev, message["rev"])
        return True

    def _merge(self, nodes: list[dict]) -> None:
        for node in nodes:
            held = self.nodes.get(node["id"])
            if held is None or held["rev"] <= node["rev"]:
                self.nodes[node["id"]] = node

    def _apply(self, items: list[dict]) -> bool:
        if self.rev is None:
            return True
        for item in items:
            if item["rev"] <= self.rev:
                continue
            if item["rev"] != self.rev + 1:
                return False  # a gap: reconnect from the last applied revision
            if item["type"] == "node":
                self._merge([item["node"]])
            else:
                self.session = item["session"]
            self.rev = item["rev"]
        return True

    def differences(self, session: dict, nodes: list[dict]) -> int:
        """Records where this client and the database disagree: nodes missing, extra, or of another
        status or rev, and the session's status and rev."""
        database = {node["id"]: node for node in nodes}
        lost = len(set(database) ^ set(self.nodes))
        lost += sum(1 for node_id in set(database) & set(self.nodes)
                    if (database[node_id]["status"], database[node_id]["rev"])
                    != (self.nodes[node_id]["status"], self.nodes[node_id]["rev"]))
        lost += (self.session.get("status"), self.session.get("rev"), self.rev) != (
            session["status"], session["rev"], session["rev"])
        return lost
