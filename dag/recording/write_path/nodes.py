"""Writes of nodes: a call's node created on entry, backfilled on exit, and closed when its run ends.

Terminal statuses are final here, not by convention in callers: a backfill that arrives after its node
ended (a stop or a crash closed it first) is dropped and reported as `False`.
"""
from __future__ import annotations

from typing import Any, Optional

from django.utils import timezone

from ...models import Node, Session
from . import sql
from .process_writer import flush_session
from .revision import advance, node_message, publish_after_commit
from .write_transaction import WriteTransaction


def create_node(session_id, *, lease: Optional[str] = None, **fields: Any) -> Node:
    """Insert a node at the session's next `seq`, stamped with a new revision, and publish it.

    `lease`: the worker id of the run that writes (fenced: WriteRefused once it no longer holds the session).
    """
    with WriteTransaction() as tx:
        rev, count = advance(tx, session_id, nodes=1, lease=lease)
        node = sql.new_node(session_id=session_id, seq=count - 1, rev=rev, **fields)
        sql.insert_node(tx, node)
        publish_after_commit(tx, session_id, [node_message(node)])
    return node


def finish_node(node: Node, *, lease: Optional[str] = None, **fields: Any) -> bool:
    """Backfill `node` (status, output, error, finished_at...) unless it has ended already.

    `node` is the caller's in-memory copy, updated in place on success, so no read is needed.
    Returns False, changing nothing, when the node is no longer running: a late exit never turns
    `cancelled` into `completed`. `lease` fences the write as in `create_node`.
    """
    fields.setdefault("finished_at", timezone.now())
    with WriteTransaction() as tx:
        rev, _ = advance(tx, node.session_id, lease=lease)
        if not sql.update_running_node(tx, node.pk, {**fields, "rev": rev}):
            tx.discard()  # give the revision back: nothing changed
            return False
        for name, value in fields.items():
            setattr(node, name, value)
        node.rev = rev
        publish_after_commit(tx, node.session_id, [node_message(node)])
    return True


def close_open_nodes(session_id, status: str = Node.Status.INTERRUPTED, error: str = "") -> int:
    """End every node of the session still `running` (or waiting for approval) with `status`; return how
    many were closed.

    The session's queued node writes commit first, so a node created just before is closed too."""
    flush_session(session_id)
    with WriteTransaction(lean=False) as tx:  # the ORM works inside it too
        return close_open_nodes_in(tx, session_id, status, error)


def running_nodes(session_id):
    """The session's nodes stored `running`, by `seq`: read through the index of running nodes
    (`node_running_per_session`), not the session's every node."""
    return Node.objects.filter(session_id=session_id, status=Node.Status.RUNNING).order_by("seq")


def awaiting_nodes(session_id) -> list[Node]:
    """The session's calls still waiting for approval: none once their run has ended them, but a run that
    died while one waited leaves it so. Looked for only when the session shows a call waiting (no index
    holds them, and a session's end must not read all its nodes)."""
    if not Session.objects.filter(pk=session_id, waiting_for=Session.Waiting.AWAITING_APPROVAL).exists():
        return []
    return list(Node.objects.filter(session_id=session_id, status=Node.Status.AWAITING_APPROVAL).order_by("seq"))


def close_open_nodes_in(tx: WriteTransaction, session_id, status: str, error: str) -> int:
    """`close_open_nodes` as part of a larger write in `tx` (ending a session closes its nodes).

    For stops and crashes: no node stays running after its call ended. Each closed node gets its own
    revision, so a viewer that ignores already-seen revisions still applies all of them.
    """
    if status not in Node.TERMINAL:
        raise ValueError(f"status must be a final node status ({', '.join(sorted(Node.TERMINAL))}); "
                         f"got {status!r}")
    now = timezone.now()
    advance(tx, session_id, revs=0)  # lock the session first, like every other writer
    open_nodes = list(running_nodes(session_id)) + awaiting_nodes(session_id)
    if not open_nodes:
        return 0
    last_rev, _ = advance(tx, session_id, revs=len(open_nodes))
    first_rev = last_rev - len(open_nodes) + 1
    for offset, node in enumerate(open_nodes):
        node.status, node.finished_at, node.rev = status, now, first_rev + offset
        node.error = node.error or error
    Node.objects.bulk_update(open_nodes, ["status", "finished_at", "error", "rev"])
    publish_after_commit(tx, session_id, [node_message(node) for node in open_nodes])
    return len(open_nodes)
