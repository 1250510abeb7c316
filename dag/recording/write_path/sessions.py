"""Writes of sessions: queued at launch, claimed by a run, stopped, finished, edited (deleted: `deletes`).

Each public function is one transaction (a `WriteTransaction`, the ORM working inside it) that starts
by locking the session through `advance` and publishes after its commit. Composite changes (a claim
that finds a stop, a finish that closes the open nodes) are made by the `*_in(tx, ...)` helpers inside
the caller's transaction, so they commit or roll back as one.

A terminal status is final: a status change that arrives after the session ended changes nothing
and reports False (or None), so a stop's `cancelled` is never overwritten by a late `completed`.
"""
from __future__ import annotations

import logging
from datetime import datetime
from typing import Any, Callable, Iterable, Optional

from django.db.models import F, Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from ...live.broadcast import list_notifier
from ...models import Node, Session
from ...stored_size import session_bytes
from ..values import clean_text, json_safe
from .process_writer import flush_session, session_ended
from .nodes import close_open_nodes_in
from .revision import WriteRefused, advance, publish_after_commit, session_message
from .write_transaction import WriteTransaction

log = logging.getLogger(__name__)

STOPPED_BEFORE_START = "stopped before it started"
# Session fields stored as JSON: made JSON-safe here, so callers may pass whatever a function returned.
JSON_FIELDS = ("args", "result", "budget", "budget_spend", "launch_budget")
# The status given to nodes still open when their session ends: a child outlived its caller (e.g. an
# abandoned thread), or the run was stopped or died around it.
NODE_STATUS_AT_END = {
    Session.Status.COMPLETED: Node.Status.INTERRUPTED,
    Session.Status.ERROR: Node.Status.ERROR,
    Session.Status.CANCELLED: Node.Status.CANCELLED,
    Session.Status.INTERRUPTED: Node.Status.INTERRUPTED,
}
# Changing any of these on an ended session (its end, or an admin's edit after) measures its size again.
SIZED_FIELDS = frozenset({"status", "args", "result"})
_UNSET = object()


def _json_safe_fields(fields: dict) -> dict:
    return {name: json_safe(value) if name in JSON_FIELDS else value for name, value in fields.items()}


def queue_session(owner, *, admit: Optional[Callable[[], None]] = None, **fields: Any) -> Session:
    """A new queued session owned by `owner` (function, args, model, ...).

    `admit`, if given, runs first in the same transaction: a check that may lock rows and raise to
    refuse the launch (a per-user limit), so the check and the insert commit or roll back together.

    Nothing is published to the session's own stream: no one can be watching a session before it exists
    (its viewers start from a snapshot). Its owner's open session lists are told once it commits, so the
    run shows at the top of their first page while it waits for a worker.
    """
    with WriteTransaction(lean=False) as tx:
        if admit is not None:
            admit()
        session = Session.objects.create(owner=owner, status=Session.Status.QUEUED, **_json_safe_fields(fields))
        tx.after_commit(lambda: list_notifier.announce(session.owner_id, str(session.pk)))
    return session


def update_session(session_id, *, unless_terminal: bool = False, lease: Optional[str] = None,
                   **fields: Any) -> Optional[Session]:
    """Change session fields with a new revision and publish it; the session as stored, or None.

    With `unless_terminal`, a session that has already ended is left alone (None is returned). With
    `lease` (a run's worker id), the write is fenced: WriteRefused once the run no longer holds it.
    The session's queued node writes commit first, so revisions follow the order of the calls.
    """
    flush_session(session_id)
    with WriteTransaction(lean=False) as tx:
        if lease is not None:
            advance(tx, session_id, revs=0, lease=lease)
        session = update_session_in(tx, session_id, unless_terminal=unless_terminal, **fields)
        if session is None:
            tx.discard()  # give the revision back: nothing changed
    return session


def update_session_in(tx: WriteTransaction, session_id, *, unless_terminal: bool = False,
                      **fields: Any) -> Optional[Session]:
    """`update_session` inside `tx`; on None the caller discards `tx` (its revision was taken)."""
    rev, _ = advance(tx, session_id)
    rows = Session.objects.filter(pk=session_id)
    if unless_terminal:
        rows = rows.exclude(status__in=Session.TERMINAL)
    if not rows.update(rev=rev, **_json_safe_fields(fields)):
        return None
    session = Session.objects.get(pk=session_id)  # the expressions' values (e.g. started_at) as stored
    publish_after_commit(tx, session_id, [session_message(session)])
    if session.is_terminal and not SIZED_FIELDS.isdisjoint(fields):
        # After the change is committed and published: measuring reads every node of the session
        # (8 ms for 10,000 on PostgreSQL), which the end of a run need not wait for, under its lock.
        tx.after_commit(lambda: _store_size(session))
    return session


def _store_size(session: Session) -> None:
    """Measure the ended `session` into `stored_bytes`: it holds all it will (a run's writes after its
    end are refused), and the storage limit reads this instead of its nodes (`dag.stored_size`).

    Its own transaction, under the session's lock: of two measurements (an end, then an edit of its
    arguments), the later one counts every change committed before it. A session left unmeasured (it
    was deleted meanwhile, or the measurement failed) is measured from its nodes when it is counted."""
    try:
        with WriteTransaction(lean=False) as tx:
            advance(tx, session.pk, revs=0)
            session.stored_bytes = session_bytes(session.pk)
            Session.objects.filter(pk=session.pk).update(stored_bytes=session.stored_bytes)
    except Session.DoesNotExist:
        pass
    except Exception:  # the change it follows is committed: it must not look failed
        log.warning("session %s could not be measured; the storage limit measures it from its nodes",
                    session.pk, exc_info=True)


def _status_fields(status: str, result: Any = _UNSET, error: Optional[str] = None) -> dict:
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
        fields["error"] = clean_text(str(error))  # a message quoting binary data must not fail the write
    return fields


def set_session_status(session_id, status: str, *, result: Any = _UNSET, error: Optional[str] = None) -> bool:
    """Move a session to `status` (stamping started/finished times); False if it had already ended.

    A terminal status goes through `finish_session`, which also closes the session's open nodes.
    """
    if status in Session.TERMINAL:
        return finish_session(session_id, status, result=None if result is _UNSET else result, error=error or "")
    return update_session(session_id, unless_terminal=True, **_status_fields(status, result, error)) is not None


def finish_session(session_id, status: str, *, result: Any = None, error: str = "",
                   lease: Optional[str] = None) -> bool:
    """Give the session terminal `status` and close its open nodes, in one transaction.

    Compare-and-set: it wins (True) only if the session had not ended yet; otherwise nothing changes
    (False), and only the winner closes nodes. With `lease` (the run finishing itself), it also loses
    when another worker holds the session. A session deleted meanwhile is not finished either (False).

    The session's queued node writes commit first: a terminal status is written only once every node
    the run wrote before it is durable (and no later write of a fenced run can land after it).
    """
    flush_session(session_id)
    try:
        with WriteTransaction(lean=False) as tx:
            won = finish_session_in(tx, session_id, status, result=result, error=error, lease=lease)
            if not won:
                tx.discard()
    except (WriteRefused, Session.DoesNotExist):
        return False
    finally:
        # Ended, by this call or before it (or held by another worker: this run's last write): the
        # writer keeps nothing more of it, a refusal it recorded included.
        session_ended(session_id)
    return won


def finish_session_in(tx: WriteTransaction, session_id, status: str, *, result: Any = None,
                      error: str = "", lease: Optional[str] = None) -> bool:
    if status not in Session.TERMINAL:
        raise ValueError(f"status must be a terminal session status ({', '.join(sorted(Session.TERMINAL))}); "
                         f"got {status!r}")
    advance(tx, session_id, revs=0, lease=lease)  # hold the session's lock from the check to the change
    if Session.objects.filter(pk=session_id, status__in=Session.TERMINAL).exists():
        return False
    fields = _status_fields(status, result, error)
    close_open_nodes_in(tx, session_id, NODE_STATUS_AT_END[status], fields["error"])
    return update_session_in(tx, session_id, unless_terminal=True, **fields) is not None


def claim_session(session_id, *, worker: str = "", now=None) -> Optional[Session]:
    """Move a queued session to `running` under `worker`'s lease and return it; None if it must not run.

    The lease is the worker id ("hostname:pid") and a first heartbeat at `now`; without a worker the
    session is claimed without a lease (no heartbeat, nothing for the reaper). A session that is gone,
    already claimed or ended is left alone; one whose stop was persisted while it was queued is finished
    `cancelled` instead (it never starts).

    Tried again with the same `worker` and `now` (its commit unseen, the connection lost meanwhile), a
    claim finds its own: the session running under that lease since that very heartbeat is returned.
    """
    now = now or timezone.now()
    with WriteTransaction(lean=False) as tx:
        try:
            advance(tx, session_id, revs=0)
        except Session.DoesNotExist:
            return None
        session = Session.objects.get(pk=session_id)
        if worker and session.status == Session.Status.RUNNING and (session.worker, session.heartbeat_at) == (
                worker, now):
            tx.discard()
            return session
        if session.status != Session.Status.QUEUED:
            return None
        if session.cancel_requested:
            finish_session_in(tx, session_id, Session.Status.CANCELLED, error=STOPPED_BEFORE_START)
            return None
        lease = {"worker": worker, "heartbeat_at": now} if worker else {}
        return update_session_in(tx, session_id, unless_terminal=True, **_status_fields(Session.Status.RUNNING),
                                 **lease)


def mark_sent(session_ids: Iterable, now: datetime) -> int:
    """Stamp `now` as the time the queued ones of `session_ids` were sent to the broker; how many.

    One statement, no revision and nothing published: `sent_at` is not part of what a viewer sees
    (`Session.as_dict`), as a heartbeat is not.
    """
    keys = [Session._meta.pk.to_python(session_id) for session_id in session_ids]
    return Session.objects.filter(pk__in=keys, status=Session.Status.QUEUED).update(sent_at=now) if keys else 0


def claim_resend(cutoff: datetime, now: datetime, *, limit: int) -> list:
    """The ids of at most `limit` sessions still queued that are due to be sent again, stamped sent at `now`.

    Due: last sent before `cutoff`, and at least as long ago as the session had been waiting when it was
    last sent. So the waits between sends double (a session waiting behind a long backlog is sent a few
    times in an hour, not every interval), while one whose message was lost is sent again after the
    first interval. A session never stamped (its web process died before sending it, or it was queued
    before `sent_at` existed) counts from its `created_at`. The stamp is a compare-and-set, so of two
    reapers in two processes only one re-sends a session: on PostgreSQL the rows are locked, skipping
    those another transaction holds (a reaper's or a claim's; a row skipped now is due at the next pass),
    and the other reaper's read, after its commit, finds them sent; SQLite writes under one database
    lock, taken at BEGIN.
    """
    due = Q(sent_at__lt=cutoff) | Q(sent_at__isnull=True, created_at__lt=cutoff)
    with WriteTransaction(lean=False):
        candidates = (Session.objects.filter(due, status=Session.Status.QUEUED).order_by("pk")
                      .select_for_update(skip_locked=True).values_list("pk", "created_at", "sent_at"))
        ids = [pk for pk, created_at, sent_at in candidates
               if sent_at is None or now - sent_at >= sent_at - created_at][:limit]
        if ids:
            Session.objects.filter(pk__in=ids).update(sent_at=now)
    return ids


def record_stop_request(session_id) -> Session:
    """Persist a stop for the session (idempotent, a no-op once it ended); the session as stored after.

    A session that has not started yet is cancelled on the spot: its run, when a worker picks it up,
    finds it ended and does nothing. A running one is only flagged: its run stops at its next function
    entry or model call and finishes itself.
    """
    # A plain read first: a stop that finds the session ended or its stop persisted has nothing to write,
    # so it returns at once instead of queueing on the row lock behind every other stop.
    current = Session.objects.get(pk=session_id)
    if current.is_terminal or current.cancel_requested:
        return current
    with WriteTransaction(lean=False) as tx:
        advance(tx, session_id, revs=0)
        session = Session.objects.get(pk=session_id)
        if session.is_terminal or session.cancel_requested:
            return session
        update_session_in(tx, session_id, unless_terminal=True, cancel_requested=True,
                          cancel_requested_at=timezone.now())
        if session.status == Session.Status.QUEUED:
            finish_session_in(tx, session_id, Session.Status.CANCELLED, error=STOPPED_BEFORE_START)
        return Session.objects.get(pk=session_id)
