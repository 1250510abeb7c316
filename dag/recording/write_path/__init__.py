"""The one path every change to a session or its nodes goes through: write, bump `rev`, publish on commit.

Each change runs in one transaction that first advances `Session.rev` (and `node_count`, which is also
the next node's `seq`) and stamps the changed row with the new revision. Advancing the counter takes
the session row's write lock (SQLite: the IMMEDIATE transaction; PostgreSQL: the row lock of the
UPDATE), so writers of one session queue behind each other: `seq` stays gap-free, revisions are
committed in increasing order, and "everything after revision R" is never missing a change that a
later revision already shows. After the commit, the change is handed to `dag.live.broadcast.publish`.

Terminal statuses are final here, not by convention in callers: a backfill or status change that
arrives after a node or session ended is dropped and reported as `False`.
"""
from __future__ import annotations

from typing import Any, Optional

from django.db import transaction
from django.db.models import F
from django.db.models.functions import Coalesce
from django.utils import timezone

from ...live import broadcast
from ...models import Node, Session
from ..values import json_safe
from . import sql as write_sql
from .write_transaction import WriteTransaction

_UNSET = object()


def node_message(node: Node) -> dict:
    return {"type": "node", "rev": node.rev, "node": node.as_dict()}


def session_message(session: Session) -> dict:
    return {"type": "session", "rev": session.rev, "session": session.as_dict()}


def _publish_on_commit(session_id, messages: list[dict], tx: Optional[WriteTransaction] = None) -> None:
    key = str(session_id)
    publish = lambda: broadcast.publish(key, messages)  # noqa: E731
    if tx is not None:
        tx.after_commit(publish)
    else:
        transaction.on_commit(publish)


def _advance(tx: WriteTransaction, session_id, *, revs: int = 1, nodes: int = 0) -> tuple[int, int]:
    """Add `revs` to the session's revision and `nodes` to its node count; return both new values."""
    advanced = write_sql.advance(tx, session_id, revs, nodes)
    if advanced is None:
        raise Session.DoesNotExist(f"session {session_id} does not exist (was it deleted?)")
    return advanced


# --- nodes ---------------------------------------------------------------------------------------

def create_node(session_id, **fields: Any) -> Node:
    """Insert a node at the session's next `seq`, stamped with a new revision, and publish it."""
    with WriteTransaction() as tx:
        rev, count = _advance(tx, session_id, nodes=1)
        node = write_sql.new_node(session_id=session_id, seq=count - 1, rev=rev, **fields)
        write_sql.insert_node(tx, node)
        _publish_on_commit(session_id, [node_message(node)], tx)
    return node


def finish_node(node: Node, **fields: Any) -> bool:
    """Backfill `node` (status, output, error, finished_at...) unless it has ended already.

    `node` is the caller's in-memory copy, updated in place on success, so no read is needed.
    Returns False, changing nothing, when the node is no longer running (e.g. a stop or a crash
    closed it first): a late exit never turns `cancelled` into `completed`.
    """
    fields.setdefault("finished_at", timezone.now())
    with WriteTransaction() as tx:
        rev, _ = _advance(tx, node.session_id)
        if not write_sql.update_running_node(tx, node.pk, {**fields, "rev": rev}):
            tx.discard()  # give the revision back: nothing changed
            return False
        for name, value in fields.items():
            setattr(node, name, value)
        node.rev = rev
        _publish_on_commit(node.session_id, [node_message(node)], tx)
    return True


def close_open_nodes(session_id, status: str = Node.Status.INTERRUPTED, error: str = "") -> int:
    """End every node of the session still `running` with `status`; return how many were closed.

    For stops and crashes: no node stays running after its call ended. Each closed node gets its own
    revision, so a viewer that ignores already-seen revisions still applies all of them.
    """
    if status not in Node.TERMINAL:
        raise ValueError(f"status must be a final node status ({', '.join(sorted(Node.TERMINAL))}); "
                         f"got {status!r}")
    now = timezone.now()
    with WriteTransaction(lean=False) as tx:  # the ORM works inside it too
        _advance(tx, session_id, revs=0)  # lock the session first, like every other writer
        open_nodes = list(Node.objects.filter(session_id=session_id, status=Node.Status.RUNNING)
                          .order_by("seq"))
        if not open_nodes:
            return 0
        last_rev, _ = _advance(tx, session_id, revs=len(open_nodes))
        first_rev = last_rev - len(open_nodes) + 1
        for offset, node in enumerate(open_nodes):
            node.status, node.finished_at, node.rev = status, now, first_rev + offset
            node.error = node.error or error
        Node.objects.bulk_update(open_nodes, ["status", "finished_at", "error", "rev"])
        _publish_on_commit(session_id, [node_message(node) for node in open_nodes], tx)
    return len(open_nodes)


# --- sessions ------------------------------------------------------------------------------------

def update_session(session_id, *, unless_terminal: bool = False, **fields: Any) -> Optional[Session]:
    """Change session fields with a new revision and publish it; the session as stored, or None.

    With `unless_terminal`, a session that has already ended is left alone (None is returned).
    JSON fields are made JSON-safe here, so callers may pass whatever a function returned.
    """
    for name in ("result", "args", "budget", "budget_spend"):
        if name in fields:
            fields[name] = json_safe(fields[name])
    with transaction.atomic():
        rows = Session.objects.filter(pk=session_id)
        if unless_terminal:
            rows = rows.exclude(status__in=Session.TERMINAL)
        if not rows.update(rev=F("rev") + 1, **fields):
            return None
        # The UPDATE holds the row lock, so this read sees exactly the revision written above.
        session = Session.objects.get(pk=session_id)
        _publish_on_commit(session_id, [session_message(session)])
    return session


def set_session_status(session_id, status: str, *, result: Any = _UNSET,
                       error: Optional[str] = None) -> bool:
    """Move a session to `status` (stamping started/finished times); False if it had already ended.

    A terminal status is final: a late "completed" after a stop's "cancelled" changes nothing.
    """
    if status not in Session.Status.values:
        raise ValueError(f"status must be one of {', '.join(Session.Status.values)}; got {status!r}")
    fields: dict[str, Any] = {"status": status}
    if status == Session.Status.RUNNING:
        fields["started_at"] = Coalesce(F("started_at"), timezone.now())
    if status in Session.TERMINAL:
        fields["finished_at"] = timezone.now()
    if result is not _UNSET:
        fields["result"] = result
    if error is not None:
        fields["error"] = str(error)
    return update_session(session_id, unless_terminal=True, **fields) is not None

