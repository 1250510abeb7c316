"""The live session list: `ws/sessions/`, one socket per list page, carrying its owner's row changes.

Protocol (JSON):
- client -> server `{"type": "watch", "ids": [...], "newer_than": ISO or null}`, sent on every connect:
  the rows the page shows, and (on the first page of everything) the creation time of its newest row.
  The server answers `{"type": "rows", "rows": [...]}`: the current rows of those of the ids the user
  owns, and of the user's sessions created after `newer_than`. That is the resync: whatever the page
  missed while disconnected, it gets now.
- server -> client `{"type": "row", "row": {...}}` whenever one of the user's sessions changed: at most
  one per session every `OPENPROGRAM_LIST_UPDATE_S` seconds, and always its end (`session_list_notify`).
  A row is `{"id", "status", "phase", "created_at", "html"}`, its HTML the page's own row template; status
  and phase repeat what the HTML shows, as data for the page's script (`ListRow.as_message`).
Close codes: 4401 not logged in, 4400 a message that is not JSON, 4503 (try again later) when the channel
layer (Redis) cannot be reached: the page reconnects and resyncs with its watch (dag.live.layer_outage).

Only the user's own sessions ever reach the socket: it joins only its user's group, and every row is
read with the user as owner (a watched id of someone else's session is ignored).
"""
from __future__ import annotations

import asyncio
import json
import uuid
from datetime import datetime

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from . import broadcast
from .layer_outage import ClosesOnLayerOutage
from .list_rows import MAX_WATCHED, owned_row_message, owned_row_messages
from .session_list_notify import owner_group

CLOSE_BAD_REQUEST = 4400
CLOSE_NOT_LOGGED_IN = 4401


def parse_watch(content) -> tuple[list[uuid.UUID], datetime | None]:
    """The session ids and `newer_than` of a watch message; malformed entries are left out."""
    ids = []
    raw_ids = content.get("ids") if isinstance(content, dict) else None
    for value in (raw_ids if isinstance(raw_ids, list) else [])[:MAX_WATCHED]:
        try:
            ids.append(uuid.UUID(str(value)))
        except ValueError:
            continue
    newer_than = content.get("newer_than") if isinstance(content, dict) else None
    try:
        newer_than = datetime.fromisoformat(newer_than) if isinstance(newer_than, str) else None
    except ValueError:
        newer_than = None
    if newer_than is not None and newer_than.tzinfo is None:
        newer_than = None  # the page sends the server's own aware timestamps; a naive one is not from it
    return ids, newer_than


class SessionListConsumer(ClosesOnLayerOutage, AsyncJsonWebsocketConsumer):
    layer_use = "a session list's layer call"
    group: str | None = None

    async def connect(self):
        broadcast.bind_loop(asyncio.get_running_loop())
        await self.accept()  # before refusing: a close code only reaches a browser on an open socket
        self.user = self.scope.get("user")
        if self.user is None or not self.user.is_authenticated:
            await self.close(code=CLOSE_NOT_LOGGED_IN, reason="log in to follow your sessions")
            return
        self.group = owner_group(self.user.pk)
        await self.join_group(self.group)

    async def disconnect(self, code):
        if self.group is not None:
            await self.leave_group(self.group)

    async def receive(self, text_data=None, bytes_data=None):
        if self.group is None:
            return
        try:
            content = json.loads(text_data or "")
        except ValueError:
            await self.close(code=CLOSE_BAD_REQUEST, reason="messages are JSON")
            return
        if isinstance(content, dict) and content.get("type") == "watch":
            ids, newer_than = parse_watch(content)
            rows = await database_sync_to_async(owned_row_messages)(self.user, ids, newer_than)
            await self.send_json({"type": "rows", "rows": rows})

    async def list_changed(self, event):
        """One of the user's sessions changed: send its row as the database has it now."""
        row = await database_sync_to_async(owned_row_message)(self.user, event.get("session"))
        if row is not None:
            await self.send_json({"type": "row", "row": row})
