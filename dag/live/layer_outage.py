"""Whether this process reaches its channel layer (Redis), said in the log once per outage.

While Redis is away every layer call fails: each flush of the broadcaster, each stream's receive loop,
each new stream's group join. Logging each one (with a traceback) wrote thousands of lines for an outage
of seconds. Instead the first failure logs one warning, and the first layer call that succeeds after it
logs one info with how long the outage lasted. Streams are told to reconnect meanwhile (the consumer
closes them with 4503, CLOSE_TRY_AGAIN_LATER) and resynchronise from the database by revision, so no state is
lost with the messages.
"""
from __future__ import annotations

import asyncio
import logging
import threading
import time

log = logging.getLogger(__name__)


def _unreachable_errors() -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = [OSError, asyncio.TimeoutError]
    try:
        from redis import exceptions
    except ImportError:  # no Redis client installed: only the in-memory layer can be in use
        return tuple(errors)
    return (*errors, exceptions.ConnectionError, exceptions.TimeoutError)


# The websocket close code for "the layer is unreachable for now, reconnect": 4503, the stream's own
# code in the style of its 4400 and 4404 (HTTP's 503 Service Unavailable). RFC 6455's 1013 (Try Again
# Later) would say the same, but Daphne's websocket library lets a server close only with 1000 or
# 3000-4999. The browser's stream reconnects on every code but its fatal ones, with a growing backoff.
CLOSE_TRY_AGAIN_LATER = 4503

# Seconds after the layer is back in which a failure still belongs to the outage that ended: a pooled
# connection the outage broke can fail once on its first use. Failures that go on past it are a new one.
SETTLE_S = 2.0

# What a layer call raises when the layer's server cannot be reached (refused, reset, timed out).
LAYER_UNREACHABLE = _unreachable_errors()
# How often an open socket joins its groups again (seconds): well inside the layers' default
# `group_expiry` of a day, at one layer call per group and hour for each socket.
GROUP_RENEW_S = 3600.0


class LayerOutage:
    """The state of this process's layer connection; thread-safe (the broadcaster may send from a
    thread of its own while the server's loop serves streams)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._down_since: float | None = None
        self._up_since = float("-inf")
        self._failures = 0

    def failed(self, doing: str, exc: BaseException) -> None:
        """A layer call failed with one of LAYER_UNREACHABLE while `doing` (e.g. "sending live changes")."""
        with self._lock:
            now = self.clock()
            if self._down_since is not None or now - self._up_since < SETTLE_S:
                self._failures += self._down_since is not None
                return  # the same outage: still on, or a connection it broke failing on its first use
            self._down_since, self._failures = now, 1
        log.warning("channel layer (Redis) unreachable: %s failed (%s: %s); live streams are closed with %d "
                    "and resync from the database when they reconnect; said once until it is back",
                    doing, type(exc).__name__, exc, CLOSE_TRY_AGAIN_LATER)

    @staticmethod
    def clock() -> float:
        """When a layer call starts, for `reached(started)`."""
        return time.monotonic()

    def reached(self, started: float) -> None:
        """A layer call that began at `started` (`clock()`) succeeded: if it began after the outage
        did, the layer is back. (One that began before may have got through just ahead of the cut.)"""
        if self._down_since is None:  # the usual case, read without the lock: no outage to end
            return
        with self._lock:
            if self._down_since is None or started < self._down_since:
                return
            self._up_since = self.clock()
            lasted, failures = self._up_since - self._down_since, self._failures
            self._down_since, self._failures = None, 0
        log.info("channel layer (Redis) reachable again after %.1f s (%d layer calls failed meanwhile)",
                 lasted, failures)


outage = LayerOutage()


class ClosesOnLayerOutage:
    """Mixin for a websocket consumer (put it first among the bases): a layer that cannot be reached
    (Redis away) ends the socket with 4503, so the client reconnects and resyncs, instead of with 1011
    and a traceback per socket; the outage is said once (`outage`), not per socket.

    Subclasses name what they use the layer for in `layer_use` (the warning quotes it), join their
    groups with `join_group`, leave them with `leave_group`, call `renew_groups` at every heartbeat,
    and stop what they run beside the socket in `stop_tasks`.
    """
    layer_use = "a live socket's layer call"
    _disconnected = False
    _groups: frozenset = frozenset()
    _groups_renewed_at = 0.0

    async def __call__(self, scope, receive, send):
        try:
            await super().__call__(scope, receive, send)
        except LAYER_UNREACHABLE as exc:
            outage.failed(self.layer_use, exc)
            self.stop_tasks()
            if not self._disconnected:
                await self.close(code=CLOSE_TRY_AGAIN_LATER, reason="live updates unavailable; reconnect")

    async def websocket_disconnect(self, message):
        self._disconnected = True  # the client is gone: nothing to close
        await super().websocket_disconnect(message)

    def stop_tasks(self) -> None:
        """Cancel the tasks the consumer runs beside its socket (none unless a subclass has some)."""

    async def join_group(self, group: str) -> None:
        joining = outage.clock()
        await self.channel_layer.group_add(group, self.channel_name)
        outage.reached(joining)
        self._groups |= {group}
        self._groups_renewed_at = self._groups_renewed_at or time.monotonic()

    async def renew_groups(self) -> None:
        """Join the socket's groups again once `GROUP_RENEW_S` has passed since they were last joined:
        a layer forgets a membership older than its `group_expiry` (a day, in both the in-memory layer
        and channels_redis), and a page may stay open longer than that. A layer that cannot be reached
        is tried again at the next heartbeat."""
        if time.monotonic() - self._groups_renewed_at < GROUP_RENEW_S:
            return
        try:
            for group in self._groups:
                await self.channel_layer.group_add(group, self.channel_name)
        except LAYER_UNREACHABLE as exc:
            outage.failed(self.layer_use, exc)
            return
        self._groups_renewed_at = time.monotonic()

    async def leave_group(self, group: str) -> None:
        self._groups -= {group}
        try:
            await self.channel_layer.group_discard(group, self.channel_name)
        except LAYER_UNREACHABLE as exc:  # the membership expires in Redis by itself
            outage.failed("leaving a live group", exc)
