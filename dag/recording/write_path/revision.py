"""The step every write begins and ends with: advance the session's revision, publish after the commit.

`advance` is the first statement of every write to a session or its nodes. It bumps `Session.rev` (and
`node_count`, which is also the next node's `seq`) in one UPDATE, and so takes the session row's write
lock (SQLite: the IMMEDIATE transaction; PostgreSQL: the row lock of the UPDATE): writers of one session
queue behind each other, `seq` stays gap-free, and revisions are committed in increasing order, so
"everything after revision R" never misses a change that a later revision already shows. Because every
write passes through it, it is also the one place where a write can be refused for a whole session (a
fence such as a run's lease goes in its WHERE clause).

The lease fence: a write made by a run passes `lease` (the worker id that claimed the session), and
`advance` then matches the session only while it has not ended and no other worker holds it. A refused
write raises `WriteRefused` inside its transaction, so nothing of it is kept; it is a runtime
`CancelledError`, so the run that made it stops where it is.
"""
from __future__ import annotations

from typing import Optional

from runtime import CancelledError

from ...live import broadcast
from ...live.frames import NodeItem
from ...models import Node, Session
from . import sql
from .write_transaction import WriteTransaction


class WriteRefused(CancelledError):
    """A run wrote to a session it no longer holds: the session has ended (a stop, the reaper) or its
    lease belongs to another worker. Nothing was written; the run is to stop."""


def advance(tx: WriteTransaction, session_id, *, revs: int = 1, nodes: int = 0,
            lease: Optional[str] = None) -> tuple[int, int]:
    """Add `revs` to the session's revision and `nodes` to its node count; return both new values.

    `revs=0` only locks the session (for a write that first reads what it will change). With `lease`
    (a run's worker id), the write is fenced: WriteRefused unless the run still holds the session.
    """
    advanced = sql.advance(tx, session_id, revs, nodes, lease)
    if advanced is None:
        raise refusal(tx, session_id, lease)
    return advanced


def refusal(tx: WriteTransaction, session_id, lease: Optional[str]) -> Exception:
    """Why an advance of the session matched nothing: `Session.DoesNotExist` for an unfenced write,
    else `WriteRefused` saying whether the session was deleted, has ended or another worker holds it."""
    if lease is None:
        return Session.DoesNotExist(f"session {session_id} does not exist (was it deleted?)")
    held = sql.lease_of(tx, session_id)
    if held is None:  # deleted under its run (an admin): the run stops, as when it is written off
        return WriteRefused(f"session {session_id} no longer belongs to this run ({lease}): it was deleted; "
                            f"the write was refused and the run stops")
    status, worker = held
    why = f"it has ended {status}" if status in Session.TERMINAL else f"worker {worker} holds its lease"
    return WriteRefused(f"session {session_id} no longer belongs to this run ({lease}): {why}; "
                        f"the write was refused and the run stops")


def node_message(node: Node) -> NodeItem:
    return NodeItem(type="node", rev=node.rev, node=node.as_dict())


def session_message(session: Session) -> dict:
    return {"type": "session", "rev": session.rev, "session": session.as_dict()}


def publish_after_commit(tx: WriteTransaction, session_id, messages: list[dict]) -> None:
    """Hand `messages` to `dag.live.broadcast` once `tx` commits (never if it rolls back)."""
    key = str(session_id)
    tx.after_commit(lambda: broadcast.publish(key, messages))
