"""The step every write begins and ends with: advance the session's revision, publish after the commit.

`advance` is the first statement of every write to a session or its nodes. It bumps `Session.rev` (and
`node_count`, which is also the next node's `seq`) in one UPDATE, and so takes the session row's write
lock (SQLite: the IMMEDIATE transaction; PostgreSQL: the row lock of the UPDATE): writers of one session
queue behind each other, `seq` stays gap-free, and revisions are committed in increasing order, so
"everything after revision R" never misses a change that a later revision already shows. Because every
write passes through it, it is also the one place where a write can be refused for a whole session (a
fence such as a run's lease goes in its WHERE clause).
"""
from __future__ import annotations

from ...live import broadcast
from ...models import Node, Session
from . import sql
from .write_transaction import WriteTransaction


def advance(tx: WriteTransaction, session_id, *, revs: int = 1, nodes: int = 0) -> tuple[int, int]:
    """Add `revs` to the session's revision and `nodes` to its node count; return both new values.

    `revs=0` only locks the session (for a write that first reads what it will change).
    """
    advanced = sql.advance(tx, session_id, revs, nodes)
    if advanced is None:
        raise Session.DoesNotExist(f"session {session_id} does not exist (was it deleted?)")
    return advanced


def node_message(node: Node) -> dict:
    return {"type": "node", "rev": node.rev, "node": node.as_dict()}


def session_message(session: Session) -> dict:
    return {"type": "session", "rev": session.rev, "session": session.as_dict()}


def publish_after_commit(tx: WriteTransaction, session_id, messages: list[dict]) -> None:
    """Hand `messages` to `dag.live.broadcast` once `tx` commits (never if it rolls back)."""
    key = str(session_id)
    tx.after_commit(lambda: broadcast.publish(key, messages))
