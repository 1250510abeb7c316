"""Tells an owner's open session lists that one of their sessions changed (`broadcast.publish` calls it)
or was just launched (`queue_session` calls `announce` once its session is committed).

Each change of a session or its nodes becomes, at most every `OPENPROGRAM_LIST_UPDATE_S` seconds per
session (and always at its end), one `list.changed` message naming the session, sent to its owner's
channel layer group (`owner_group`), which every `SessionListConsumer` of that user joins. The message
carries no row: each consumer reads the row from the database when the message arrives, so the row a
browser gets is the newest one and only its owner's lists ever hear of it.

A session's owner is looked up once per session and kept (bounded), and looked up again with every
change of the session itself (a `session` message: its status, its budget, and the owner, which only an
administrator changes): node changes, by far the most, read no owner, and an owner change reaches the
new owner's lists with its own publication. In another process running the session (a worker), the new
owner is known from that process's next change of the session; until then its node changes still go
to the old owner's lists, which read every row with their own user as owner, and so show none of them.
"""
from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Callable

from ..conf import conf
from ..models import Session
from .layer_outage import LAYER_UNREACHABLE, outage
from .list_throttle import SEND_NOW, Coalescer

log = logging.getLogger(__name__)

# The consumers' handler for it: "list.changed" -> SessionListConsumer.list_changed.
CHANGED_EVENT = "list.changed"
OWNERS_KEPT = 4096


def owner_group(owner_id) -> str:
    """The channel layer group of one user's open session lists."""
    return f"dag-owner-{owner_id}"


def ends_run(messages: list[dict]) -> bool:
    """Whether the messages include the session reaching a terminal status."""
    return any(message.get("type") == "session"
               and (message.get("session") or {}).get("status") in Session.TERMINAL for message in messages)


def owner_from_database(session_id: str):
    return Session.objects.filter(pk=session_id).values_list("owner_id", flat=True).first()


class ListNotifier:
    """Throttles per session and sends `list.changed` to the owner's group from the broadcast's loop."""

    def __init__(self, interval_s: float | None = None, clock: Callable[[], float] = time.monotonic,
                 owner_of: Callable[[str], object] = owner_from_database,
                 sending_loop: Callable[[], asyncio.AbstractEventLoop | None] = lambda: None):
        self._interval_s = interval_s
        self._sending_loop = sending_loop  # the broadcast's: it owns the loop layer messages go from
        self._clock = clock
        self._owner_of = owner_of
        self._owners: dict[str, object] = {}
        self._lock = threading.Lock()
        self._coalescer: Coalescer | None = None

    @property
    def coalescer(self) -> Coalescer:
        interval = conf.LIST_UPDATE_S if self._interval_s is None else self._interval_s
        if self._coalescer is None or self._coalescer.interval_s != interval:
            self._coalescer = Coalescer(interval, self._clock)
        return self._coalescer

    def notify(self, session_id: str, messages: list[dict]) -> None:
        """Published `messages` of one session: tell its owner's lists now, later, or not again."""
        loop = self.loop()
        if loop is None:
            return  # nobody in this process's in-memory layer can be listening
        if any(message.get("type") == "session" for message in messages):
            self.forget_owner(session_id)  # it may have changed with this very message
        owner = self._owner(session_id)
        if owner is None:
            return  # deleted meanwhile
        with self._lock:
            delay = self.coalescer.offer(session_id, final=ends_run(messages))
        if delay is None:
            return
        if delay == SEND_NOW:
            self.send(loop, owner, session_id)
        else:
            self.schedule(loop, delay, lambda: self._send_if_due(loop, owner, session_id))

    def announce(self, owner_id, session_id: str) -> None:
        """A session was just created (queued, committed): tell its owner's lists at once, so the run shows
        at the top of their first page before it starts. Outside the throttle: one message per launch,
        which must not hold back the run's first change."""
        try:
            loop = self.loop()
            if loop is None:
                return  # nobody in this process's in-memory layer can be listening
            self._remember(session_id, owner_id)
            self.send(loop, owner_id, session_id)
        except Exception:  # a list that cannot be told must not fail the launch: it resyncs by itself
            log.exception("announcing session %s to its owner's lists failed", session_id)

    def _send_if_due(self, loop, owner, session_id: str) -> None:
        with self._lock:
            due = self.coalescer.take(session_id)
        if due:
            self.send(loop, owner, session_id)

    def _owner(self, session_id: str):
        owner = self._owners.get(session_id)
        if owner is None:
            owner = self._owner_of(session_id)
            if owner is not None:
                self._remember(session_id, owner)
        return owner

    def forget_owner(self, session_id: str) -> None:
        """The session's owner has changed: look it up again at the next change."""
        with self._lock:
            self._owners.pop(str(session_id), None)

    def _remember(self, session_id: str, owner) -> None:
        with self._lock:
            if session_id not in self._owners and len(self._owners) >= OWNERS_KEPT:
                self._owners.pop(next(iter(self._owners)))
            self._owners[session_id] = owner

    # The three points where time and the channel layer come in (tests replace them).

    def loop(self) -> asyncio.AbstractEventLoop | None:
        return self._sending_loop()

    def schedule(self, loop: asyncio.AbstractEventLoop, delay: float, callback: Callable[[], None]) -> None:
        loop.call_soon_threadsafe(loop.call_later, delay, callback)

    def send(self, loop: asyncio.AbstractEventLoop, owner, session_id: str) -> None:
        sending = _group_send(owner_group(owner), session_id)
        try:
            asyncio.run_coroutine_threadsafe(sending, loop)
        except RuntimeError:  # the loop closed between the check and the call: no one on it to tell
            sending.close()


async def _group_send(group: str, session_id: str) -> None:
    """Send one `list.changed`. A lost one costs nothing lasting: the list resyncs when its socket
    reconnects, and an unreachable layer closes that socket (4503) to make it reconnect."""
    from channels.layers import get_channel_layer
    started = outage.clock()
    try:
        await get_channel_layer().group_send(group, {"type": CHANGED_EVENT, "session": session_id})
    except LAYER_UNREACHABLE as exc:  # Redis away: said once per outage, not once per session and update
        outage.failed("telling session lists", exc)
    except Exception:  # e.g. a full layer
        log.warning("session list notification for session %s failed", session_id, exc_info=True)
    else:
        outage.reached(started)

