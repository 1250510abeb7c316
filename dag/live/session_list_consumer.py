"""The live session list: `ws/sessions/`, one socket per list page, carrying its owner's row changes.

Protocol (JSON):
- client -> server `{"type": "watch", "ids": [...], "newer_than": ISO or null}`, sent on every connect:
  the rows the page shows, and (on the first page of everything) the creation time of its newest row.
  The server answers `{"type": "rows", "rows": [...]}`: the current rows of those of the ids the user
  owns, and of the user's sessions created after `newer_than`. That is the resync: whatever the page
  missed while disconnected, it gets now. One watch is answered at once, and then at most one every
  `WATCH_INTERVAL_S` seconds (each costs a few hundred rows read and rendered): a watch sent sooner is
  answered once the interval has passed, and of several sent meanwhile only the latest is.
- server -> client `{"type": "row", "row": {...}}` whenever one of the user's sessions changed: at most
  one per session every `OPENPROGRAM_LIST_UPDATE_S` seconds, and always its end (`session_list_notify`).
  A row is `{"id", "status", "phase", "created_at", "html"}`, its HTML the page's own row template; status
  and phase repeat what the HTML shows, as data for the page's script (`ListRow.as_message`).
Close codes: 4401 not logged in (on connect); 4429 the user has `OPENPROGRAM_MAX_LIVE_SOCKETS_PER_USER`
live sockets (lists and session streams) open in this server process already (dag.live.socket_limit;
the page retries with its backoff); 1000 once the login the socket was opened with has ended
(a logout, told at once; a password change; checked every `OPENPROGRAM_WS_HEARTBEAT_S` seconds): the page reconnects
with the cookie it holds now, and the handshake decides (dag.live.login_check); 4400 a message that is
not JSON (or nested too deeply to read); 4503 (try again later) when the channel layer (Redis) cannot be
reached: the page reconnects and resyncs with its watch (dag.live.layer_outage).

Only the user's own sessions ever reach the socket: it joins only its user's groups, and every row is
read with the user as owner (a watched id of someone else's session is ignored).
"""
from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from datetime import datetime, timezone

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from ..conf import conf
from . import broadcast
from .layer_outage import ClosesOnLayerOutage
from .list_rows import MAX_WATCHED, owned_row_message, owned_row_messages
from .list_throttle import SEND_NOW, Coalescer
from .login_check import CLOSE_RECONNECT, EndsWithItsLogin, login_still_holds
from .session_list_notify import owner_group
from .socket_limit import CLOSE_TOO_MANY_SOCKETS, TOO_MANY_SOCKETS_REASON, LimitedPerUser

log = logging.getLogger(__name__)

CLOSE_BAD_REQUEST = 4400
CLOSE_NOT_LOGGED_IN = 4401
# The least seconds between two answers to one socket's watches: the page sends one every few seconds
# while a row is unfinished, and a client sending them back to back must not keep the server busy.
WATCH_INTERVAL_S = 1.0


def parse_watch(content) -> tuple[list[uuid.UUID], datetime | None]:
    """The session ids and `newer_than` of a watch message; malformed entries are left out."""
    ids = []
    raw_ids = content.get("ids") if isinstance(content, dict) else None
    for value in (raw_ids if isinstance(raw_ids, list) else [])[:MAX_WATCHED]:
        try:
            ids.append(uuid.UUID(str(value)))
        except ValueError:
            continue
    return ids, parse_newer_than(content.get("newer_than") if isinstance(content, dict) else None)


def parse_newer_than(value) -> datetime | None:
    """A watch's `newer_than` in UTC; None for anything the page would not send: no ISO text, a naive time
    (the page sends the server's own aware timestamps), or one UTC cannot hold (year 1 at +05:00)."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
        # Converted here, where an overflow is a bad value, not later inside the row query.
        return moment.astimezone(timezone.utc) if moment.tzinfo is not None else None
    except (ValueError, OverflowError):
        return None


class SessionListConsumer(LimitedPerUser, EndsWithItsLogin, ClosesOnLayerOutage, AsyncJsonWebsocketConsumer):
    layer_use = "a session list's layer call"
    group: str | None = None
    _login_task = _watch_task = None
    # When watches are answered (`WATCH_INTERVAL_S`): the clock and the wait, replaced by tests.
    clock = staticmethod(time.monotonic)
    sleep = staticmethod(asyncio.sleep)

    async def connect(self):
        broadcast.bind_loop(asyncio.get_running_loop())
        # Answers and row updates are each read and then sent; one at a time, so that an answer read
        # before a row update cannot be sent after it and show the row's older state.
        self._sending = asyncio.Lock()
        self._watches = Coalescer(WATCH_INTERVAL_S, clock=self.clock)
        self._latest_watch = None
        await self.accept()  # before refusing: a close code only reaches a browser on an open socket
        self.user = self.scope.get("user")
        if self.user is None or not self.user.is_authenticated:
            await self.close(code=CLOSE_NOT_LOGGED_IN, reason="log in to follow your sessions")
            return
        if not self.take_socket_slot(self.user):
            await self.close(code=CLOSE_TOO_MANY_SOCKETS, reason=TOO_MANY_SOCKETS_REASON)
            return
        await self.follow_login(self.user)
        self.group = owner_group(self.user.pk)
        await self.join_group(self.group)
        self._login_task = asyncio.create_task(self._close_once_logged_out())

    async def disconnect(self, code):
        self.stop_tasks()
        await self.stop_following_login()
        if self.group is not None:
            await self.leave_group(self.group)

    async def login_lost(self) -> None:
        """A logout or a password change ended the socket's login (`EndsWithItsLogin`)."""
        if self.group is None:
            return  # not listening any more: closed already
        self.stop_tasks()
        await self._stop_listening()
        await self.close(code=CLOSE_RECONNECT, reason="the login changed; reconnect")

    def stop_tasks(self) -> None:
        for task in (self._login_task, self._watch_task):
            if task is not None:
                task.cancel()

    async def _close_once_logged_out(self):
        """Ask at every heartbeat interval whether the socket's login still holds: a list left open would
        otherwise go on showing its user's runs after a logout or a password change."""
        try:
            while True:
                await asyncio.sleep(conf.WS_HEARTBEAT_S)
                if not await login_still_holds(self.scope, self.user):
                    await self._stop_listening()
                    await self.close(code=CLOSE_RECONNECT, reason="the login changed; reconnect")
                    return
                await self.renew_groups()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("checking the login of a session list failed")
            # Closed rather than left open unchecked: the page reconnects, and connect() checks again.
            if self.group is not None:
                await self._stop_listening()
            await self.close(code=CLOSE_RECONNECT, reason="login check failed; reconnect")

    async def _stop_listening(self) -> None:
        """Hear no more of the user's sessions and answer no more watches: the close takes effect only
        when the client answers it."""
        group, self.group = self.group, None
        await self.leave_group(group)

    async def receive(self, text_data=None, bytes_data=None):
        if self.group is None:
            return
        try:
            content = json.loads(text_data or "")
        except (ValueError, RecursionError):  # RecursionError: nested deeper than the parser goes
            await self.close(code=CLOSE_BAD_REQUEST, reason="messages are JSON")
            return
        if isinstance(content, dict) and content.get("type") == "watch":
            self._latest_watch = parse_watch(content)
            wait = self._watches.offer("watch")
            if wait == SEND_NOW:
                await self._answer_watch()
            elif wait is not None:  # None: an answer is due already, and will answer this one
                if self._watch_task is not None:
                    self._watch_task.cancel()  # overdue (a loop too busy to run it): this one replaces it
                self._watch_task = asyncio.create_task(self._answer_watch_after(wait))

    async def _answer_watch_after(self, wait: float) -> None:
        try:
            await self.sleep(wait)
            # Answering now: a watch arriving meanwhile schedules the next answer, and must not cancel
            # this one (watches arriving during each answer would otherwise starve the page of all).
            self._watch_task = None
            if self._watches.take("watch"):
                await self._answer_watch()
        except asyncio.CancelledError:
            raise
        except Exception:  # the page watches again within seconds; the log says why this one failed
            log.exception("answering a session list's watch failed")

    async def _answer_watch(self) -> None:
        """Answer the latest watch with the rows it asks for, as the database has them now."""
        ids, newer_than = self._latest_watch
        async with self._sending:
            if self.group is None:
                return  # stopped listening meanwhile
            rows = await database_sync_to_async(owned_row_messages)(self.user, ids, newer_than)
            await self.send_json({"type": "rows", "rows": rows})

    async def list_changed(self, event):
        """One of the user's sessions changed: send its row as the database has it now."""
        async with self._sending:
            if self.group is None:
                return  # a message already on its way when the socket stopped listening
            row = await database_sync_to_async(owned_row_message)(self.user, event.get("session"))
            if row is not None:
                await self.send_json({"type": "row", "row": row})
