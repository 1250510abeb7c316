"""Revoking a session's read-only share links (`dag.share_links`): all of them at once."""
from __future__ import annotations

from django.db.models import F

from ...live import broadcast
from ...models import Session
from .revision import advance
from .write_transaction import WriteTransaction


def revoke_shares(session_id) -> None:
    """Make every share link of the session made so far stop working, and close the shared pages open on
    it (after the commit). No revision: nothing its viewers see changes. `Session.DoesNotExist` if gone."""
    with WriteTransaction(lean=False) as tx:
        advance(tx, session_id, revs=0)  # its row lock, as every write of a session takes
        Session.objects.filter(pk=session_id).update(share_generation=F("share_generation") + 1)
        key = str(session_id)
        tx.after_commit(lambda: broadcast.tell_viewers(key, broadcast.SHARES_REVOKED_EVENT))
