"""The reaper: writes off sessions whose run stopped renewing its lease, as `interrupted`.

A running session whose heartbeat is older than `OPENPROGRAM_LEASE_S` belongs to a process that died,
hung or lost the database. `reap()` ends each such session `interrupted` through the write path
(`end_expired_lease`: compare-and-set, its open nodes closed in the same transaction, the error naming
the worker and when it was last seen); from then on that run's writes are refused by the lease fence.

Every process that runs sessions or serves runs one reaper thread, every LEASE_S / 2 seconds: it starts
with the process's first lease (`dag.runs.leases`) and with the web server (`openprogram_web.serve`,
or at the first connection of an application imported from `openprogram_web.asgi`), never in management
commands such as `migrate`. Several reapers are
harmless: the compare-and-set makes exactly one of them end a session. Sessions running with no
heartbeat (claimed without a lease) are not the reaper's; `bin/prepare-run` handles them.

With the Celery executor the reaper also sends again each session still queued
`OPENPROGRAM_QUEUED_RESEND_S` after it was last sent (`resend_queued`): a broker can lose a message
(Redis restarted without persistence, a queue flushed, a web process that died between its commit and
the send), and such a session would otherwise wait for ever and count against its owner's active runs.
Re-sending is safe: the task id is the session id and the claim a compare-and-set, so a duplicate runs
nothing twice, and `write_path.claim_resend` lets only one reaper send a session again per interval.
Tests call `reap(now=...)` and `resend_queued(now=...)` directly.
"""
from __future__ import annotations

import logging
import time
from datetime import datetime, timedelta
from typing import Optional

from django.db import connection
from django.utils import timezone

from ..conf import conf
from ..models import Session
from ..recording import retention, write_path
from . import stop
from .daemon import DaemonThread
from .executor_setting import executor_class, get_executor

log = logging.getLogger(__name__)


def expired(now: datetime, lease_s: float) -> list:
    """Ids of running sessions whose lease has expired at `now`."""
    cutoff = now - timedelta(seconds=lease_s)
    return list(Session.objects.filter(status=Session.Status.RUNNING, heartbeat_at__lt=cutoff)
                .order_by("heartbeat_at").values_list("pk", flat=True))


def reap(now: Optional[datetime] = None, lease_s: Optional[float] = None) -> list:
    """End every session whose lease expired at `now` as `interrupted`; the ids this call ended."""
    now = now or timezone.now()
    lease_s = conf.LEASE_S if lease_s is None else lease_s
    ended = [pk for pk in expired(now, lease_s) if write_path.end_expired_lease(pk, lease_s=lease_s, now=now)]
    for pk in ended:
        log.warning("session %s: its lease expired; marked interrupted", pk)
    return ended


# Sessions one reaper pass sends again at most: the pass also writes off dead workers' runs and enforces
# stop deadlines, and must not spend minutes publishing to a broker that is slow or down.
RESEND_PER_PASS = 50


def resend_queued(now: Optional[datetime] = None, after_s: Optional[float] = None) -> list:
    """With the Celery executor, send again every session still queued `after_s` seconds after it was
    last sent (default `QUEUED_RESEND_S`); the ids this call sent. Nothing with another executor."""
    # Told from the configured class: the in-process pool is not built just to ask.
    if not executor_class(conf.EXECUTOR).supports_resend:
        return []
    executor = get_executor()
    now = now or timezone.now()
    after_s = conf.QUEUED_RESEND_S if after_s is None else after_s
    sent = write_path.claim_resend(cutoff=now - timedelta(seconds=after_s), now=now, limit=RESEND_PER_PASS)
    if sent:
        log.warning("%d session(s) still queued %g s or more after they were last sent to the Celery broker, "
                    "which may have lost their messages: sent again", len(sent), after_s)
        executor.resend(sent)
    return sent


def start() -> None:
    """Start this process's reaper thread unless it runs already (idempotent, cheap)."""
    _thread.ensure()


class Reachability:
    """Since when this process has reached the database without a failure (monotonic seconds; None while
    it cannot). A lease is written off only once the database has been reachable for a whole lease: after
    an outage that every process saw (a failover), the runs' heartbeats renew their leases first, so a
    run that waited the outage out is not written off for the heartbeats the outage kept back."""

    def __init__(self):
        self.since: Optional[float] = None

    def reached(self, now: float) -> None:
        if self.since is None:
            self.since = now

    def lost(self) -> None:
        self.since = None

    def for_a_lease(self, now: float, lease_s: float) -> bool:
        return self.since is not None and now - self.since >= lease_s


def one_pass(reachability: Reachability, now: Optional[float] = None) -> None:
    """One round of the reaper's work, begun at `now` (monotonic seconds; default: now)."""
    now = time.monotonic() if now is None else now
    if reachability.for_a_lease(now, conf.pause_s("LEASE_S")):
        reap()
    stop.finish_overdue_cancellations()  # the other kind of session no run will finish
    resend_queued()  # and the sessions no worker will start, their message lost
    retention.prune_expired()  # and the ended sessions kept past OPENPROGRAM_RETENTION_DAYS
    reachability.reached(now)


def _run() -> None:
    reachability = Reachability()
    while True:
        time.sleep(max(conf.pause_s("LEASE_S") / 2, 0.1))
        try:
            one_pass(reachability)
        except Exception:  # a database hiccup must not end the reaper; the next pass reconnects
            reachability.lost()
            log.exception("reaper pass failed")
        finally:
            connection.close()  # not held between passes (it would keep a test database from being dropped)


_thread = DaemonThread("openprogram-reaper", _run)
