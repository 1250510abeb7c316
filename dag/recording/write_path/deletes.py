"""Deleting sessions with their nodes: by their owner (the API and the pages), by retention, by an admin.

A deletion cannot be undone, and a run is not fenced against it the way its writes are against a stop,
so an owner deletes only a session that has ended: one still queued or running is refused
(`SessionStillActive`), and its owner stops it first. Retention deletes only ended sessions too; an
administrator may delete any (`delete_sessions`).

Each deletion tells the session's open streams after its commit (`broadcast.tell_viewers`): their pages
show "deleted" at once, instead of a heartbeat finding the session gone.
"""
from __future__ import annotations

from typing import Iterable

from ...live import broadcast
from ...models import Node, Session
from .revision import advance
from .write_transaction import WriteTransaction


class SessionStillActive(Exception):
    """The session is queued or running: it can be deleted once it has ended (stop it first)."""

    def __init__(self, session_id, status: str):
        super().__init__(f"session {session_id} is {status}: stop it first (POST /api/sessions/{session_id}/stop/ "
                         f"or its Stop button), then delete it once it has ended")
        self.status = status


def delete_owned_session(owner, session_id) -> None:
    """Delete `owner`'s ended session `session_id` with its nodes. `Session.DoesNotExist` if there is no
    such session of `owner`; `SessionStillActive` if it has not ended (nothing is deleted then)."""
    with WriteTransaction(lean=False) as tx:
        advance(tx, session_id, revs=0)  # its row lock: no run's end or stop slips between check and delete
        status = Session.objects.filter(pk=session_id, owner=owner).values_list("status", flat=True).first()
        if status is None:
            raise Session.DoesNotExist(f"no session {session_id} of {owner}")
        if status not in Session.TERMINAL:
            raise SessionStillActive(session_id, status)
        _delete_rows(tx, [session_id])


def delete_sessions(session_ids: Iterable) -> int:
    """Delete sessions with their nodes, whatever their status (an administrator's); how many went. A
    run still going has its later writes refused (its session is gone), and stops."""
    with WriteTransaction(lean=False) as tx:
        return _delete_rows(tx, list(session_ids))


def delete_ended_sessions(session_ids: Iterable) -> int:
    """Delete those of `session_ids` that have ended, with their nodes (retention); how many were deleted.
    No lock is needed for the check: a terminal status is final, so a session found ended stays ended."""
    with WriteTransaction(lean=False) as tx:
        ended = list(Session.objects.filter(pk__in=list(session_ids), status__in=Session.TERMINAL)
                     .values_list("pk", flat=True))
        return _delete_rows(tx, ended)


def _delete_rows(tx: WriteTransaction, session_ids: list) -> int:
    """Delete the sessions and their nodes inside `tx`, and tell their viewers after the commit.

    The nodes go first, in one statement: Django's cascade would read every node into memory before
    deleting it (a node's children cascade from it, so its delete is not a "fast" one), thousands per
    session. The parent foreign key is checked at the commit (Django's constraints are deferred). The
    sessions go through the ORM, which clears what refers to them (a replay's or fork's source)."""
    if not session_ids:
        return 0
    Node.objects.filter(session_id__in=session_ids)._raw_delete(tx.connection.alias)
    _, deleted = Session.objects.filter(pk__in=session_ids).delete()
    keys = [str(session_id) for session_id in session_ids]
    tx.after_commit(lambda: [broadcast.tell_viewers(key, broadcast.DELETED_EVENT) for key in keys])
    return deleted.get(Session._meta.label, 0)
