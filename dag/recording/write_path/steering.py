"""Writes of steering a live run (`dag.runs.steering`): a person's answer to an approval request, a pause
or resume asked for, and the run's own side of them: the call waiting for approval (its node
`awaiting_approval`), that call's end or start, and what the session shows the run waits for
(`Session.waiting_for`: "awaiting_approval" while any call waits, else "paused" while paused, else "").

A person's writes change only the session's request fields (`approval_answers`, `pause_requested`);
the run reads them (database first, then a wake-up) and writes its nodes and `waiting_for` itself,
fenced by its lease like every other write of the run.
"""
from __future__ import annotations

from typing import Any, Optional

from django.utils import timezone

from ...models import Node, Session
from . import sql
from .revision import advance, node_message, publish_after_commit
from .sessions import update_session, update_session_in
from .write_transaction import WriteTransaction

AWAITING = Node.Status.AWAITING_APPROVAL
DENIED = "denied"


class NoSuchRequest(LookupError):
    """The session has no call waiting for approval at that seq."""


class AlreadyAnswered(Exception):
    """The approval request at that seq was answered already (by a person, or by its timeout)."""


def answer_approval(session_id, seq: int, approve: bool, reason: str = "") -> dict:
    """Store a person's answer to the call waiting at node `seq`; the answer as stored. NoSuchRequest if
    no call waits there, AlreadyAnswered if it was answered. Under the session's lock, so of two answers
    at once the second is refused."""
    with WriteTransaction(lean=False) as tx:
        advance(tx, session_id, revs=0)
        node = Node.objects.filter(session_id=session_id, seq=seq, kind=Node.Kind.CODE).only(
            "id", "status", "refusal").first()
        answers = dict(Session.objects.values_list("approval_answers", flat=True).get(pk=session_id) or {})
        if node is None:
            raise NoSuchRequest(seq)
        if str(node.pk) in answers or node.refusal == DENIED:
            raise AlreadyAnswered(seq)
        if node.status != AWAITING:
            raise NoSuchRequest(seq)
        answer = {"approve": approve, "reason": reason}
        answers[str(node.pk)] = answer
        if update_session_in(tx, session_id, unless_terminal=True, approval_answers=answers) is None:
            raise NoSuchRequest(seq)  # the run has ended: nothing waits any more
    return answer


def request_pause(session_id, paused: bool) -> Optional[Session]:
    """Ask the run to pause at its next boundary (or to go on); the session as stored, None once ended."""
    return update_session(session_id, unless_terminal=True, pause_requested=paused)


def create_awaiting_node(session_id, *, lease: Optional[str] = None, **fields: Any) -> Node:
    """Insert the node of a call waiting for approval and show the session waiting, in one transaction."""
    with WriteTransaction(lean=False) as tx:
        rev, count = advance(tx, session_id, nodes=1, lease=lease)
        node = sql.new_node(session_id=session_id, seq=count - 1, rev=rev, status=AWAITING, **fields)
        sql.insert_node(tx, node)
        publish_after_commit(tx, session_id, [node_message(node)])
        _settle_waiting_in(tx, session_id)
    return node


def end_awaiting_node(node: Node, *, lease: Optional[str] = None, **fields: Any) -> bool:
    """Move the waiting call's node on (to `running` when approved, else to its end) and settle what the
    session waits for; False, changing nothing, if it no longer waits (a stop closed it)."""
    if fields.get("status") in Node.TERMINAL:
        fields.setdefault("finished_at", timezone.now())
    with WriteTransaction(lean=False) as tx:
        rev, _ = advance(tx, node.session_id, lease=lease)
        if not Node.objects.filter(pk=node.pk, status=AWAITING).update(rev=rev, **fields):
            tx.discard()
            return False
        for name, value in {**fields, "rev": rev}.items():
            setattr(node, name, value)
        publish_after_commit(tx, node.session_id, [node_message(node)])
        _settle_waiting_in(tx, node.session_id)
    return True


def set_paused(session_id, paused: bool, *, lease: Optional[str] = None) -> None:
    """The run stopped at a boundary (`paused`) or went on: what the session shows it waits for."""
    with WriteTransaction(lean=False) as tx:
        advance(tx, session_id, revs=0, lease=lease)
        _settle_waiting_in(tx, session_id, paused)


def _settle_waiting_in(tx: WriteTransaction, session_id, paused: Optional[bool] = None) -> None:
    """Set `waiting_for` from the nodes that wait and the pause (None: as it was), if it changed."""
    current = Session.objects.values_list("waiting_for", flat=True).get(pk=session_id)
    if paused is None:
        paused = current == Session.Waiting.PAUSED
    if Node.objects.filter(session_id=session_id, status=AWAITING).exists():
        waiting = Session.Waiting.AWAITING_APPROVAL
    else:
        waiting = Session.Waiting.PAUSED if paused else ""
    if waiting != current:
        update_session_in(tx, session_id, unless_terminal=True, waiting_for=waiting)
