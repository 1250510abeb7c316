"""A cap on the live sockets one user holds open in one server process (`OPENPROGRAM_MAX_LIVE_SOCKETS_PER_USER`).

Daphne never makes a consumer wait for its client to read: every frame sent goes into the connection's
write buffer, which has no bound. A client that opens a session's stream and reads nothing makes the
server hold that session's whole snapshot (tens of megabytes for a large session) until the socket
closes. Capping the sockets per user bounds what one login can make the server hold; the session
streams and the session lists count together.

The count is per process (each Daphne process holds its own sockets' buffers, which is what is bounded)
and lives in memory: a process that dies takes its sockets with it.
"""
from __future__ import annotations

import threading
from collections import Counter

from ..conf import conf

# The close code of a socket over the cap (HTTP's 429 Too Many Requests, in the style of the streams'
# 4400 and 4404). The pages reconnect on it with their growing backoff: once another of the user's
# tabs closes, the next attempt is let in.
CLOSE_TOO_MANY_SOCKETS = 4429
TOO_MANY_SOCKETS_REASON = "too many live views open; close some tabs"


class OpenSockets:
    """How many live sockets each user holds open. Thread-safe, so that it assumes nothing about the
    thread or event loop a consumer runs on (Daphne runs them all on one loop; other servers need not)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._open: Counter = Counter()

    def take(self, user_id, limit: int) -> bool:
        """Count one more socket of `user_id` and return True, unless `limit` (0: none) are open already."""
        with self._lock:
            if limit and self._open[user_id] >= limit:
                return False
            self._open[user_id] += 1
            return True

    def give_back(self, user_id) -> None:
        with self._lock:
            self._open[user_id] -= 1
            if self._open[user_id] <= 0:
                del self._open[user_id]

    def held_by(self, user_id) -> int:
        with self._lock:
            return self._open[user_id]


open_sockets = OpenSockets()


class LimitedPerUser:
    """Mixin for a live consumer (put it first among the bases): `take_socket_slot(user)` in `connect()`
    counts the socket against its user's cap, and the count is given back however the consumer ends
    (a disconnect, a close the server sent, an exception, a cancellation), since the consumer's whole
    run is wrapped here."""

    _slot_holder = None  # the user id the socket is counted against, once counted

    async def __call__(self, scope, receive, send):
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.give_back_socket_slot()

    def take_socket_slot(self, user) -> bool:
        """Count this socket against `user`'s cap; False (nothing counted) if the user is at it."""
        return self.take_socket_slot_as(user.pk)

    def take_socket_slot_as(self, holder) -> bool:
        """Count this socket against `holder`'s cap (a user id; a share link's key, which has a cap of its
        own, the same number); False (nothing counted) if `holder` is at it."""
        if self._slot_holder is None:
            if not open_sockets.take(holder, conf.MAX_LIVE_SOCKETS_PER_USER):
                return False
            self._slot_holder = holder
        return True

    def give_back_socket_slot(self) -> None:
        holder, self._slot_holder = self._slot_holder, None
        if holder is not None:
            open_sockets.give_back(holder)
