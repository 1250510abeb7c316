"""The live stream of one session's DAG: `ws/sessions/{id}/?since_rev=R`.

Protocol (server -> client, JSON):
- `{"type": "snapshot", "session": {...}, "nodes": [...], "rev": R, "since_rev": S, "now": T, "more": M}`:
  the state up to revision R. `since_rev` null means the full DAG (replace, and R is the revision to go
  on from, even one below the client's own: a database restored from a backup); a number means only
  rows changed after S (merge); `now` is the server's time (ISO, as the nodes' times are). Sent on
  connect, and again whenever the server repairs a gap from the database. A large snapshot continues in
  `{"type": "snapshot_more", "nodes": [...], "rev": R, "more": M}` frames until `more` is false (see
  dag.live.frames: frames stay under 1 MiB).
- `{"type": "node"|"session", "rev": R, ...}` and `{"type": "batch", "items": [...], "rev": R}`: live
  changes, contiguous in rev order after the snapshot.
- `{"type": "heartbeat", "rev": R, "now": T}` every `OPENPROGRAM_WS_HEARTBEAT_S` seconds. With the
  snapshot's, its `now` lets a browser time a running call by the clock its start was stamped by, not
  its own, which may be off by minutes or hours.

Close codes:
- 4400: a bad session id or query parameter.
- 4404: not logged in, not the owner, or no such session (one code, so the stream does not reveal which
  sessions exist); also for a path that is no stream (`NoSuchStreamConsumer`). Checked on connect, at
  every heartbeat, and whenever the session itself changes or is re-read from the database: a change of
  owner (an admin's) publishes a `session` change, and the stream closes before it forwards that or
  anything after it.
- 4403: on a shared page's stream (`shared_consumer`), in place of 4404: the share link is not one, has
  expired or was revoked (told at once, by `DELETE /api/sessions/{id}/share/`).
- 4410: the session was deleted while the stream was open (sent after a `{"type": "deleted"}` frame).
- 4429: the user has `OPENPROGRAM_MAX_LIVE_SOCKETS_PER_USER` live sockets (streams and session lists)
  open in this server process already (dag.live.socket_limit). The page retries with its backoff.
- 4503 (try again later): the channel layer (Redis) cannot be reached; the client reconnects and
  resyncs by revision, as after any drop (see dag.live.layer_outage).
- 1000: the login the socket was opened with has ended (a logout, told at once; a password change,
  found by the heartbeat; see dag.live.login_check): the page reconnects, and `connect()` decides.

The database is the truth: the consumer joins the session's group *before* reading the snapshot and
drops live messages the snapshot already covers; when the layer loses or reorders a message (a rev gap),
or the heartbeat finds the database ahead of what was sent, it re-reads the changes from the database.

What one socket makes the server hold is bounded only by the number of sockets (4429 above): Daphne
gives a consumer no way to wait until its client has read what was sent, and this consumer's handlers
run one at a time, so it cannot wait for a client's acknowledgement in the middle of sending a snapshot.

On the in-memory layer (the embedded default) no message from another process can arrive: a session
that a `run_function` process (or any process but this one) runs would only move at each heartbeat.
So there the consumer follows the database itself, reading the session's revision every
`REMOTE_POLL_S` seconds while another worker holds the session and it has not ended (a session this
process runs is left to the layer, so the two never race).
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer, AsyncWebsocketConsumer

from ..conf import conf
from ..models import Node, Session
from ..recording import clock
from ..runs.leases import worker_id
from . import broadcast
from .frames import run_after, run_changes_session, run_frames, runs_of, snapshot_frames
from .layer_outage import ClosesOnLayerOutage
from .login_check import CLOSE_RECONNECT, EndsWithItsLogin, login_still_holds
from .node_rows import node_dicts
from .socket_limit import CLOSE_TOO_MANY_SOCKETS, TOO_MANY_SOCKETS_REASON, LimitedPerUser

log = logging.getLogger(__name__)

CLOSE_BAD_REQUEST = 4400
CLOSE_NOT_FOUND = 4404
CLOSE_DELETED = 4410  # HTTP's 410 Gone: the session was deleted while the stream was open
ALLOWED_PARAMETERS = frozenset({"since_rev"})


class BadStreamRequest(ValueError):
    """The session id or a query parameter of the stream URL is malformed."""


def parse_stream_request(session_id: str, query_string: bytes) -> tuple[uuid.UUID, int | None]:
    """The session id and `since_rev` of a stream URL, or BadStreamRequest naming what is wrong."""
    try:
        parsed_id = uuid.UUID(session_id)
    except (ValueError, TypeError):
        raise BadStreamRequest(f"session id {session_id!r} is not a UUID") from None
    try:
        params = parse_qs(query_string.decode("ascii"), keep_blank_values=True, strict_parsing=False)
    except UnicodeDecodeError:
        raise BadStreamRequest("the query string is not ASCII") from None
    unknown = sorted(set(params) - ALLOWED_PARAMETERS)
    if unknown:
        raise BadStreamRequest(f"unknown parameter {unknown[0]!r}; allowed: since_rev")
    values = params.get("since_rev")
    if values is None:
        return parsed_id, None
    # isascii: str.isdigit() also accepts digits such as "²" that int() refuses.
    if len(values) != 1 or not (values[0].isascii() and values[0].isdigit()) or len(values[0]) > 18:
        raise BadStreamRequest("since_rev must be one non-negative integer revision")
    return parsed_id, int(values[0])


# Nodes per database read while sending a snapshot: the first rows reach the browser while later
# ones are still being read, and no single read holds thousands of model instances.
SNAPSHOT_CHUNK = 2000


def read_owned_session(session_id: uuid.UUID, owner_id) -> dict | None:
    """The session's record, None if it is gone or no longer owned by `owner_id`."""
    session = Session.objects.filter(pk=session_id, owner_id=owner_id).first()
    return session.as_dict() if session is not None else None


def read_nodes(session_id: uuid.UUID, since_rev: int | None, after_seq: int, limit: int) -> list[dict]:
    """Up to `limit` nodes after `after_seq` in seq order, only those changed after `since_rev`."""
    nodes = Node.objects.filter(session_id=session_id, seq__gt=after_seq)
    if since_rev is not None:
        nodes = nodes.filter(rev__gt=since_rev)
    return node_dicts(nodes.order_by("seq")[:limit])


def server_now() -> str:
    """The server's time, written as a node's times are (`Node.as_dict`)."""
    return clock.now().isoformat()


def owned_session_exists(user, session_id: uuid.UUID) -> bool:
    return Session.objects.filter(pk=session_id, owner=user).exists()


def owned_rev(session_id: uuid.UUID, owner_id) -> int | None:
    """The session's revision, None if it is gone or no longer owned by `owner_id` (an admin may change
    a session's owner)."""
    return Session.objects.filter(pk=session_id, owner_id=owner_id).values_list("rev", flat=True).first()


def run_state(session_id: uuid.UUID) -> tuple[int, str, str] | None:
    """The session's (rev, worker, status), None if it is gone."""
    return Session.objects.filter(pk=session_id).values_list("rev", "worker", "status").first()


# How often a consumer on the in-memory layer reads a session run by another process (seconds): the
# latency of its live view, at one indexed read per interval and viewer.
REMOTE_POLL_S = 0.2


class SessionConsumer(LimitedPerUser, EndsWithItsLogin, ClosesOnLayerOutage, AsyncJsonWebsocketConsumer):
    layer_use = "a live stream's layer call"
    session_id: uuid.UUID | None = None
    group: str | None = None
    rev: int | None = None  # the highest revision this client has been sent, contiguously
    user = None  # who opened the stream, checked again at every heartbeat
    # Set once a heartbeat finds the viewer may no longer see the session, or cannot tell: the close
    # takes effect only when the client answers it, and nothing more is sent meanwhile.
    refused = False
    _heartbeat_task = _follow_task = None

    async def connect(self):
        broadcast.bind_loop(asyncio.get_running_loop())
        self._lock = asyncio.Lock()
        # Accept before refusing: a close code only reaches a browser on an open socket (a refused
        # handshake shows up as an anonymous 1006).
        await self.accept()
        try:
            session_id, since_rev = parse_stream_request(
                self.scope["url_route"]["kwargs"].get("session_id", ""), self.scope.get("query_string", b""))
        except BadStreamRequest as exc:
            await self.close(code=CLOSE_BAD_REQUEST, reason=str(exc)[:120])
            return
        if not await self.admit(session_id):
            return
        self.session_id = session_id
        self.group = broadcast.group_name(session_id)
        # Join first, then read: a change committed in between is in both, and the rev check drops it.
        await self.join_group(self.group)
        async with self._lock:
            if not await self._send_changes(since_rev):
                return
        self._heartbeat_task = asyncio.create_task(self._beat())
        if conf.IN_MEMORY_LAYER:
            self._follow_task = asyncio.create_task(self._follow_other_process())

    # Who may watch: the session's owner, logged in. A shared page's stream (`shared_consumer`) overrides
    # these four, and what closes it when it may no longer watch.
    refused_code, refused_reason = CLOSE_NOT_FOUND, "no such session"

    async def admit(self, session_id: uuid.UUID) -> bool:
        """Whether this socket may watch the session; if not, it is closed with the code that says why."""
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_NOT_FOUND, reason="no such session")
            return False
        # Counted before the database is asked: a user at the cap costs the server no query either.
        if not self.take_socket_slot(user):
            await self.close(code=CLOSE_TOO_MANY_SOCKETS, reason=TOO_MANY_SOCKETS_REASON)
            return False
        if not await database_sync_to_async(owned_session_exists)(user, session_id):
            await self.close(code=CLOSE_NOT_FOUND, reason="no such session")
            return False
        self.user = user
        await self.follow_login(user)
        return True

    def visible_rev(self) -> int | None:
        """The session's revision while this viewer may see it, else None (reads the database)."""
        return owned_rev(self.session_id, self.user.pk)

    def visible_record(self) -> dict | None:
        """The session's record while this viewer may see it, else None (reads the database)."""
        return read_owned_session(self.session_id, self.user.pk)

    async def still_admitted(self) -> bool:
        """At each heartbeat, once the session was found visible: whether the login the socket was opened
        with still holds. If not, the socket is closed (1000) for the page to reconnect as who it is now."""
        if await login_still_holds(self.scope, self.user):
            return True
        self.refused = True
        await self.close(code=CLOSE_RECONNECT, reason="the login changed; reconnect")
        return False

    async def disconnect(self, code):
        self.stop_tasks()
        await self.stop_following_login()
        if self.group is not None:
            await self.leave_group(self.group)

    def stop_tasks(self) -> None:
        current = asyncio.current_task()  # a task that stops the others ends by itself, its close sent
        for task in (self._heartbeat_task, self._follow_task):
            if task is not None and task is not current:
                task.cancel()

    async def login_lost(self) -> None:
        """A logout or a password change ended the socket's login (`EndsWithItsLogin`)."""
        async with self._lock:
            if self.refused:
                return  # closed already, by the heartbeat
            self.refused = True
            self.stop_tasks()
            await self.close(code=CLOSE_RECONNECT, reason="the login changed; reconnect")

    async def receive(self, text_data=None, bytes_data=None):
        """The stream is one-way; whatever the client sends is ignored."""

    async def dag_deleted(self, event):
        """The session was deleted (`broadcast.DELETED_EVENT`): say so, and close with 4410."""
        async with self._lock:
            if self.refused:
                return
            self.refused = True
            self.stop_tasks()
            await self.send_json({"type": "deleted"})
            await self.close(code=CLOSE_DELETED, reason="the session was deleted")

    async def dag_shares_revoked(self, event):
        """The session's share links were revoked: nothing to the owner's stream (a shared page's closes)."""

    async def dispatch(self, message):
        # Channels closes stale database connections before every handler, by a hop to its sync
        # thread and back; a busy run's batches arrive tens of times a second per viewer. `dag_batch`
        # reads the database only to repair a gap or to check the owner on a change of the session
        # itself, through `database_sync_to_async`, which closes them itself, so its batches skip the hop.
        if message.get("type") == broadcast.BATCH_EVENT:
            await self.dag_batch(message)
        else:
            await super().dispatch(message)

    async def dag_batch(self, event):
        """A run of changes published by the broadcaster (revisions `first` to `last`, encoded and joined:
        see dag.live.broadcast): forward what is new, in rev order, without gaps."""
        async with self._lock:
            if self.rev is None or self.refused:
                return
            if "revs" in event:  # the former format (changes listed one by one), from a server not yet upgraded
                await self._forward_listed(event)
            else:
                await self._forward_run(event["first"], event["last"], event["items"])

    async def _forward_run(self, first: int, last: int, joined: str) -> bool:
        """Send what of a run comes after `self.rev`; False once nothing more may be sent (a gap was
        repaired from the database, or the stream was refused)."""
        if self.refused:
            return False
        if last <= self.rev:
            return True  # already in the snapshot or sent before
        if first > self.rev + 1:
            # Changes before it were lost or are not delivered yet: the database has them all.
            await self._send_changes(self.rev)
            return False
        fresh = run_after(first, joined, self.rev)
        # A session change may be an admin giving the session to someone else: asked before this run
        # (and what follows that change in it) goes out, not at the next heartbeat. Session changes are
        # rare (a run's start, budget and end; an admin's edit): a query only then.
        if run_changes_session(fresh) and not await self._still_owned():
            return False
        first, self.rev = max(first, self.rev + 1), last
        for frame in run_frames(first, last, fresh):
            await self.send(text_data=frame)
        return True

    async def _forward_listed(self, event) -> None:
        """Changes in the former layer format, `{"revs": [...], "items": [...]}`: the new ones forwarded
        as the runs they make (a rolling deploy has servers of both kinds for a while)."""
        for first, last, joined in runs_of(sorted(zip(event["revs"], event["items"]), key=lambda pair: pair[0])):
            if not await self._forward_run(first, last, joined):
                return

    async def _still_owned(self) -> bool:
        """Whether the viewer may still see the session; if not, the stream is closed (4404) and refused."""
        if await database_sync_to_async(self.visible_rev)() is not None:
            return True
        await self._refuse()
        return False

    async def _refuse(self) -> None:
        """Close with 4404 (`refused_code`), sending nothing more: changes of the session may still be on
        their way."""
        self.refused = True
        self.stop_tasks()
        await self.close(code=self.refused_code, reason=self.refused_reason)

    async def _send_changes(self, since_rev: int | None) -> bool:
        """Send the database's changes after `since_rev` as a snapshot; False if the session is gone (or
        the stream was refused).

        The session row is read first: every change up to its rev was committed with that rev bump,
        so the node reads that follow reflect at least all of them (later rows may be included too;
        clients keep the newest state of a node by its rev).
        """
        if self.refused:
            return False
        session = await database_sync_to_async(self.visible_record)()
        if session is None:  # gone, or given to someone else
            await self._refuse()
            return False
        rev = session["rev"]
        if since_rev is not None and since_rev > rev:
            since_rev = None  # the client knows a future that does not exist: start over
        self.rev = rev if self.rev is None else max(self.rev, rev)
        after_seq, head = -1, session
        while True:
            nodes = await database_sync_to_async(read_nodes)(self.session_id, since_rev, after_seq,
                                                             SNAPSHOT_CHUNK + 1)
            last = len(nodes) <= SNAPSHOT_CHUNK
            nodes = nodes[:SNAPSHOT_CHUNK]
            for frame in snapshot_frames(head, nodes, rev, since_rev, last=last, now=server_now()):
                await self.send(text_data=frame)
            if last:
                return True
            after_seq, head = nodes[-1]["seq"], None

    async def _beat(self):
        """Heartbeat; also the repair of a lost last message, which no later message would reveal, and
        the check that the stream may go on: connect() alone would let a page left open stream on after
        its user logged out or an admin gave the session to someone else."""
        interval = conf.WS_HEARTBEAT_S
        # A change committed just now may still be on its way through the layer; only one that the
        # previous beat already saw in the database and that has not arrived since counts as lost.
        seen_at_last_beat = 0
        try:
            while True:
                await asyncio.sleep(interval)
                async with self._lock:
                    if self.refused:
                        return  # closed already: its login ended
                    # Checked first: nothing more is sent to a viewer who may no longer see the session.
                    latest = await database_sync_to_async(self.visible_rev)()
                    if latest is None:
                        await self._refuse()
                        return
                    if not await self.still_admitted():
                        return
                    if self.rev < seen_at_last_beat and not await self._send_changes(self.rev):
                        return
                    seen_at_last_beat = latest
                    await self.renew_groups()
                    await self.send_json({"type": "heartbeat", "rev": self.rev, "now": server_now()})
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("heartbeat of session %s stopped", self.session_id)
            # Closed rather than left open unchecked: the page reconnects, and connect() checks again.
            self.refused = True
            await self.close(code=CLOSE_RECONNECT, reason="heartbeat failed; reconnect")

    async def _follow_other_process(self):
        """In-memory layer only: read the changes of a run in another process from the database."""
        me = worker_id()
        try:
            while True:
                await asyncio.sleep(REMOTE_POLL_S)
                state = await database_sync_to_async(run_state)(self.session_id)
                if state is None:
                    return  # gone: the heartbeat closes the stream
                rev, worker, status = state
                if worker == me:
                    return  # runs here: its changes come through the layer
                if not worker:  # not claimed (yet), or claimed without a lease: nothing to follow
                    if status in Session.TERMINAL:
                        return
                    continue
                if rev > self.rev:
                    async with self._lock:
                        if rev > self.rev and not await self._send_changes(self.rev):
                            return
                elif status in Session.TERMINAL:
                    return  # ended, and everything up to its end was sent
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("following session %s from the database stopped", self.session_id)


class NoSuchStreamConsumer(AsyncWebsocketConsumer):
    """Every websocket path that matches no stream: closed with 4404 instead of a router error (a 500)."""

    async def connect(self):
        await self.accept()  # as above: the close code reaches a browser only on an open socket
        await self.close(code=CLOSE_NOT_FOUND, reason="no such stream")
