"""Writes of run leases: the heartbeat that renews a worker's leases, and the end of an expired one.

A lease is `Session.worker` (set by `claim_session`) plus `Session.heartbeat_at`. Renewing it changes
nothing a viewer sees (`heartbeat_at` is not in `Session.as_dict`), so the heartbeat neither bumps the
revision nor publishes: it is one statement per process and interval, whatever the number of
sessions it runs. Ending an expired lease is a status change like any other: `finish_session_in`,
compare-and-set, its nodes closed with it.
"""
from __future__ import annotations

from datetime import datetime, timedelta
from typing import Iterable

from django.db import connection

from ...models import Session
from .revision import advance
from .sessions import finish_session_in
from .write_transaction import WriteTransaction


def renew_leases(worker: str, sessions: Iterable, now: datetime) -> int:
    """Stamp `now` as the heartbeat of those of `sessions` (the runs the process has going) that are
    running under `worker`'s lease; how many that is.

    Only those: a session left `running` under the worker's id by a run that is gone (its last write
    failed) must not be kept alive by the process's other runs, so the reaper writes it off. A count
    lower than `sessions` means some were written off (ended, reaped) or are held by another worker:
    those runs must stop.

    One statement. On PostgreSQL it locks the rows in id order first, the order the group writer locks
    the sessions of a batch in: a plain UPDATE locks them in the order it finds them, and with a batch
    holding one of them and waiting for another, PostgreSQL found a deadlock (and failed one of the
    two) under load.
    """
    keys = [Session._meta.pk.to_python(session_id) for session_id in sessions]
    if not keys:
        return 0
    running = Session.objects.filter(pk__in=keys, worker=worker, status=Session.Status.RUNNING)
    if connection.vendor != "postgresql":  # SQLite writes under one database lock: no order to keep
        return running.update(heartbeat_at=now)
    table, quote = Session._meta.db_table, connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {quote(table)} SET {quote('heartbeat_at')} = %s WHERE {quote('id')} IN ("
            f"SELECT {quote('id')} FROM {quote(table)} WHERE {quote('id')} = ANY(%s) AND {quote('worker')} = %s "
            f"AND {quote('status')} = %s ORDER BY {quote('id')} FOR UPDATE)",
            [now, keys, worker, Session.Status.RUNNING])
        return cursor.rowcount


def expired_lease_error(worker: str, heartbeat_at: datetime, now: datetime, lease_s: float) -> str:
    age = (now - heartbeat_at).total_seconds()
    return (f"worker {worker} stopped renewing its lease: last seen {heartbeat_at.isoformat(timespec='seconds')} "
            f"({age:.0f} s before the reaper ran; the lease lasts {lease_s:g} s). Its process died or "
            f"lost the database; the run was written off and its later writes are refused.")


def end_expired_lease(session_id, *, lease_s: float, now: datetime) -> bool:
    """Finish the session `interrupted` if its lease has expired at `now`; True if this call ended it.

    Checked again under the session's lock, so a worker that renewed its lease in the meantime (it was
    only slow) keeps its session, and a run that finished first keeps its status; a session deleted
    meanwhile is left gone (False).
    """
    cutoff = now - timedelta(seconds=lease_s)
    try:
        return _end_expired_lease(session_id, cutoff, lease_s, now)
    except Session.DoesNotExist:  # deleted since the reaper read it: nothing to end
        return False


def _end_expired_lease(session_id, cutoff: datetime, lease_s: float, now: datetime) -> bool:
    with WriteTransaction(lean=False) as tx:
        advance(tx, session_id, revs=0)
        row = (Session.objects.filter(pk=session_id, status=Session.Status.RUNNING, heartbeat_at__lt=cutoff)
               .values("worker", "heartbeat_at").first())
        if row is None:
            tx.discard()
            return False
        error = expired_lease_error(row["worker"] or "(unknown)", row["heartbeat_at"], now, lease_s)
        won = finish_session_in(tx, session_id, Session.Status.INTERRUPTED, error=error)
        if not won:
            tx.discard()
    return won
