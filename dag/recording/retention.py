"""Retention: ended sessions are deleted, with their nodes, once they are older than a cut-off.

`OPENPROGRAM_RETENTION_DAYS` (default 0: keep everything) is applied by the process that already reaps
(`prune_expired`, one call in each reaper pass: no daemon of its own), and `manage.py prune_sessions
--older-than 30d [--dry-run]` applies any cut-off by hand. A session's age counts from its end (from
its creation for one that never recorded an end, such as an old import). Only ended sessions go: a
run still queued or running is never deleted under it.

Deleting goes through the write path (`write_path.deletes`) in batches of BATCH sessions, each its own
short transaction, so that neither a lock nor a transaction's undo grows with a backlog of years.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Optional

from django.db.models import Q, Sum
from django.utils import timezone

from ..conf import conf
from ..models import Session
from ..stored_size import sessions_bytes
from . import write_path

log = logging.getLogger(__name__)

BATCH = 100
# Sessions one reaper pass deletes at most: the pass also writes off dead runs and enforces stop
# deadlines, and must not spend minutes on a first pass over a long history (the next pass goes on).
PER_PASS = 1000


@dataclass
class Pruned:
    """What a prune deleted (or, in a dry run, would delete)."""

    sessions: int = 0
    nodes: int = 0
    bytes: int = 0

    def add(self, other: "Pruned") -> None:
        self.sessions += other.sessions
        self.nodes += other.nodes
        self.bytes += other.bytes


def due(cutoff: datetime):
    """The ended sessions that ended (or, without an end, were created) before `cutoff`."""
    return Session.objects.filter(Q(finished_at__lt=cutoff) | Q(finished_at__isnull=True, created_at__lt=cutoff),
                                  status__in=Session.TERMINAL)


def measure(sessions) -> Pruned:
    """How many sessions, nodes and bytes (as the storage limit counts them) the queryset holds."""
    return Pruned(sessions=sessions.count(), nodes=sessions.aggregate(nodes=Sum("node_count"))["nodes"] or 0,
                  bytes=sessions_bytes(sessions))


def prune(cutoff: datetime, *, dry_run: bool = False, limit: Optional[int] = None) -> Pruned:
    """Delete the sessions `due` at `cutoff`, BATCH at a time, at most `limit` (None: all); what went.
    With `dry_run`, only what would go."""
    if dry_run:
        return measure(due(cutoff))
    pruned = Pruned()
    while limit is None or pruned.sessions < limit:
        size = BATCH if limit is None else min(BATCH, limit - pruned.sessions)
        ids = list(due(cutoff).order_by("created_at").values_list("pk", flat=True)[:size])
        if not ids:
            break
        batch = measure(Session.objects.filter(pk__in=ids))
        batch.sessions = write_path.delete_ended_sessions(ids)
        if not batch.sessions:
            break  # deleted by someone else meanwhile: the next read finds the rest
        pruned.add(batch)
    return pruned


def prune_expired(now: Optional[datetime] = None) -> Pruned:
    """The reaper's pass: delete up to PER_PASS sessions older than OPENPROGRAM_RETENTION_DAYS (none at 0)."""
    days = conf.RETENTION_DAYS
    if not days:
        return Pruned()
    pruned = prune((now or timezone.now()) - timedelta(days=days), limit=PER_PASS)
    if pruned.sessions:
        log.info("retention: deleted %d session(s) that ended over %g days ago (%d nodes, %d bytes; "
                 "OPENPROGRAM_RETENTION_DAYS)", pruned.sessions, days, pruned.nodes, pruned.bytes)
    return pruned
