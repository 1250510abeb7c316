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

A logout is also told at once to the user's open sockets, through the channel layer (every process's,
with Redis): each socket follows its user's `login_group` (`EndsWithItsLogin`), and the logout names
the session that ended (by a digest of its key: the key itself never enters the layer), whose sockets
close. The telling is best effort: when the layer cannot be reached, the next heartbeat closes them.
A password change is left to the heartbeat: in the browser that changed it, a socket closed at once
could reconnect before the response that gives the browser its new session key, and be refused.
"""
from __future__ import annotations

import hashlib
import logging
from importlib import import_module
from types import SimpleNamespace

from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.contrib.auth import get_user
from django.contrib.auth.signals import user_logged_out
from django.dispatch import receiver

log = logging.getLogger(__name__)

# A normal close, which the pages answer by reconnecting (their final codes are 4400, 4401 and 4404).
CLOSE_RECONNECT = 1000
LOGIN_EVENT = "login.ended"  # handled by `EndsWithItsLogin.login_ended`


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


def login_group(user_id) -> str:
    """The channel-layer group of every open live socket of the user `user_id`."""
    return f"logins.{user_id}"


def _digest(session_key: str) -> str:
    return hashlib.sha256(session_key.encode()).hexdigest()


def tell_open_sockets(user_id, ended_session_key: str) -> None:
    """Tell the user's open sockets that their login of `ended_session_key` ended: those opened with it
    close. Best effort: a layer that cannot be reached is logged, and the sockets' heartbeat closes
    them instead."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(login_group(user_id), {"type": LOGIN_EVENT,
                                                               "ended": _digest(ended_session_key)})
    except Exception:  # a logout must not fail for the live view's sake
        log.warning("telling the open live sockets of user %s that a login ended failed", user_id, exc_info=True)


@receiver(user_logged_out, dispatch_uid="dag.live.login_check.on_logout")
def on_logout(sender, request, user, **kwargs):
    """The sockets opened with the session that logs out close now, not at their next heartbeat. They
    are told by the session's key, which `logout` deletes only after this signal: a socket asking
    whether its login holds could still find it."""
    session = getattr(request, "session", None)
    if user is not None and session is not None and session.session_key:
        tell_open_sockets(user.pk, session.session_key)


class EndsWithItsLogin:
    """For a live consumer (a `ClosesOnLayerOutage`, which has `join_group` and `leave_group`): follow
    the user's `login_group` once the socket is let in, and call `login_lost()` (the consumer's own
    close) when a logout ends the login the socket was opened with."""

    _login_group: str | None = None

    async def follow_login(self, user) -> None:
        self._login_group = login_group(user.pk)
        await self.join_group(self._login_group)

    async def stop_following_login(self) -> None:
        group, self._login_group = self._login_group, None
        if group is not None:
            await self.leave_group(group)

    async def login_ended(self, event) -> None:
        session = self.scope.get("session")
        key = session.session_key if session is not None else None
        if key is not None and _digest(key) == event.get("ended"):
            await self.login_lost()

    async def login_lost(self) -> None:
        raise NotImplementedError
