"""Shared by the lease tests: sessions claimed under a named worker at a time of the test's choosing.

The tests drive the clock: they pass `now` to the claim, the heartbeat and the reaper. Their clock runs
a year ahead of the real one, so a reaper on the real clock (that of a server or worker another test
started on the same database) never finds these leases expired before the test's own call does.
"""
from __future__ import annotations

from datetime import datetime, timedelta

from django.utils import timezone

from dag.models import Session
from dag.recording import write_path

from ..dag_helpers import new_session

T0: datetime = timezone.now() + timedelta(days=365)
WORKER = "host-a:101"
LEASE_S = 15.0


def at(seconds: float) -> datetime:
    """The test clock, `seconds` after T0."""
    return T0 + timedelta(seconds=seconds)


def claimed(worker: str = WORKER, now: datetime = T0, **fields) -> Session:
    """A new session claimed (running) by `worker` with its first heartbeat at `now`."""
    session = new_session(function=fields.pop("function", "entry"), **fields)
    claimed_session = write_path.claim_session(session.pk, worker=worker, now=now)
    assert claimed_session is not None
    return claimed_session
