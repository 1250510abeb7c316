"""The live stream of a shared session page: `ws/shared/{id}/{token}/?since_rev=R`, for anyone who holds
a share link (`dag.share_links`), logged in or not.

The protocol is the owner's stream's (`consumers.SessionConsumer`): the same frames, so a hidden input's
value, never recorded, is never in them either. Only who may watch differs: the holder of a link of the
session's current share generation, until it expires. The stream closes with 4403 when the link is not
one (forged, another session's), has expired (checked at every heartbeat) or was revoked (told at once:
`broadcast.SHARES_REVOKED_EVENT`). Each link has its own cap of open sockets
(`OPENPROGRAM_MAX_LIVE_SOCKETS_PER_USER`, counted per link), so one leaked link cannot hold the server's
memory for every other viewer; the origin check is every websocket's (`openprogram_web.websocket_origin`).
"""
from __future__ import annotations

import uuid

from channels.db import database_sync_to_async

from .. import share_links
from ..models import Session
from .consumers import SessionConsumer
from .socket_limit import CLOSE_TOO_MANY_SOCKETS, TOO_MANY_SOCKETS_REASON

CLOSE_LINK_REFUSED = 4403
LINK_REFUSED_REASON = "this share link is not one, has expired or was revoked"


def read_shared_session(session_id: uuid.UUID, generation: int) -> dict | None:
    """The session's record while links of `generation` open it, else None."""
    session = Session.objects.filter(pk=session_id, share_generation=generation).first()
    return session.as_dict() if session is not None else None


class SharedSessionConsumer(SessionConsumer):
    refused_code, refused_reason = CLOSE_LINK_REFUSED, LINK_REFUSED_REASON
    token = ""
    generation: int | None = None

    async def admit(self, session_id: uuid.UUID) -> bool:
        token = self.scope["url_route"]["kwargs"].get("token", "")
        generation = share_links.generation_of(session_id, token)
        if generation is None:
            await self.close(code=CLOSE_LINK_REFUSED, reason=LINK_REFUSED_REASON)
            return False
        # Keyed by the token, not the session: a leaked link at its cap leaves the session's other links open.
        if not self.take_socket_slot_as(("share", str(session_id), token)):
            await self.close(code=CLOSE_TOO_MANY_SOCKETS, reason=TOO_MANY_SOCKETS_REASON)
            return False
        if await database_sync_to_async(share_links.shared_rev)(session_id, generation) is None:
            await self.close(code=CLOSE_LINK_REFUSED, reason=LINK_REFUSED_REASON)
            return False
        self.token, self.generation = token, generation
        return True

    def visible_rev(self) -> int | None:
        return share_links.shared_rev(self.session_id, self.generation)

    def visible_record(self) -> dict | None:
        return read_shared_session(self.session_id, self.generation)

    async def still_admitted(self) -> bool:
        """At each heartbeat: whether the link has not expired meanwhile (its revocation is found with the
        session's revision); if it has, the stream is closed with 4403."""
        if share_links.generation_of(self.session_id, self.token) == self.generation:
            return True
        await self._refuse()
        return False

    async def dag_shares_revoked(self, event):
        """The session's share links were revoked: close at once."""
        async with self._lock:
            if not self.refused:
                await self._refuse()
