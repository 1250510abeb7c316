"""Whether an open socket's login still holds.

A websocket is authenticated once, by the Django session its handshake's cookie names (channels'
AuthMiddlewareStack). A live page may stay open for hours, so the consumers ask again at every heartbeat:
after a logout (the session is deleted from the store), a password change (the session's auth hash no
longer matches the user's), an expiry, or the user's deactivation, the socket is closed instead of
streaming on. The answer is the one Django's `get_user` gives an HTTP request with that session.

Such a socket is closed with `CLOSE_RECONNECT`, not as refused: the login it was opened with has ended,
but the browser may hold another by now (a password change in another of its tabs gives its session a
new key), and only a new handshake carries the browser's current cookie. Its `connect()` decides: after
a logout it refuses, for good.
"""
from __future__ import annotations

from importlib import import_module
from types import SimpleNamespace

from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth import get_user

# A normal close, which the pages answer by reconnecting (their final codes are 4400, 4401 and 4404).
CLOSE_RECONNECT = 1000


class _SessionCopy(dict):
    """A stored session's data, for `get_user`, which flushes a session whose auth hash no longer matches
    and re-keys one signed with a fallback secret. Those are writes for the browser's next request: a
    socket only asks, and a session it re-keyed would leave the browser's cookie naming nothing."""

    def flush(self) -> None:
        self.clear()

    def cycle_key(self) -> None:
        pass


def still_logged_in(session_key: str | None, user_id) -> bool:
    """Whether the stored session `session_key` still authenticates the user `user_id`. Reads the session
    store and the user: call it through `database_sync_to_async`."""
    stored = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
    # A session that is gone (logged out) or expired reads as empty: no user.
    user = get_user(SimpleNamespace(session=_SessionCopy(stored.items())))
    return user.is_authenticated and user.pk == user_id


async def login_still_holds(scope, user) -> bool:
    """Whether the socket of `scope`, opened by `user`, is still logged in as that user."""
    if "session" not in scope:
        return True  # its user came without a session (a test's scope): there is no login that can end
    return await database_sync_to_async(still_logged_in)(scope["session"].session_key, user.pk)
