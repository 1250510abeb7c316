"""A run's use of the database: a connection borrowed for one operation, and an outage waited out.

An agent run spends nearly all its life waiting (on a model, a tool, a person), so a run's thread holds no
database connection between its operations. `borrowed(what, operation)` runs one of them (a claim, a read
of a model call's context, an id reservation, its end), then gives the thread's connection back: to the
process's pool on PostgreSQL, where taking it again costs nothing. At most `run_slots()` run threads use
the database at once, which leaves `UPKEEP_CONNECTIONS` of the pool to the process's upkeep (heartbeat,
reaper, stop watcher, a writer thread): however many runs a worker has, they cannot starve it.

A connection lost or refused (a failover, a restart, a network cut) is waited out: the operation is tried
again with backoff for up to `OPENPROGRAM_DB_OUTAGE_S` seconds, then `DatabaseUnreachable` names it and
the wait. So an operation given to `borrowed` must be safe to repeat when its first try may have
committed (a compare-and-set that knows its own earlier success, a read, an idempotent write).
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Optional, TypeVar

import psycopg
from django.db import DEFAULT_DB_ALIAS, InterfaceError, OperationalError, connections

from ...conf import conf

log = logging.getLogger(__name__)

T = TypeVar("T")

# Pooled connections kept for the process's own upkeep: the heartbeat, the reaper, the stop watcher, and
# the group-commit writer when it is a thread. Runs share the rest of the pool.
UPKEEP_CONNECTIONS = 4
# The first wait after a failed try, doubled after each one up to the longest.
FIRST_WAIT_S = 0.05
LONGEST_WAIT_S = 1.0


class DatabaseUnreachable(OperationalError):
    """The database could not be reached for `OPENPROGRAM_DB_OUTAGE_S` seconds."""


# PostgreSQL's classes of errors that a later try may get past: a connection lost or refused (08), too
# many connections or no room (53), the server shutting down or starting (57), a deadlock or a
# serialization failure (40).
TRANSIENT_SQLSTATE_CLASSES = frozenset({"08", "53", "57", "40"})


def transient(error: BaseException) -> bool:
    """Whether `error` is the database being away (a lost, refused or timed-out connection, a pool with no
    connection to give), which a later try on a new connection may get past, rather than something wrong
    with the statement. On SQLite, which has no connection to lose, only a lock held past the busy timeout."""
    if isinstance(error, DatabaseUnreachable):
        return False
    if connections[DEFAULT_DB_ALIAS].vendor == "sqlite":
        return isinstance(error, OperationalError) and "locked" in str(error)
    # Django wraps the driver's error (its cause); the pool's wait for a connection raises psycopg's own.
    cause = error if isinstance(error, psycopg.Error) else error.__cause__
    if isinstance(cause, (psycopg.OperationalError, psycopg.InterfaceError)):
        return cause.sqlstate is None or cause.sqlstate[:2] in TRANSIENT_SQLSTATE_CLASSES
    return isinstance(error, InterfaceError) and cause is None  # Django's own: a connection already closed


def waited_out(what: str, operation: Callable[[], T], *, outage_s: Optional[float] = None,
               sleep: Callable[[float], None] = time.sleep) -> T:
    """`operation()`, tried again while the database is away, up to `outage_s` (default
    `OPENPROGRAM_DB_OUTAGE_S`) seconds from the first failure. Inside a transaction it is tried once: the
    transaction is lost with its connection, and only its owner can start it again."""
    connection = connections[DEFAULT_DB_ALIAS]
    limit = conf.DB_OUTAGE_S if outage_s is None else outage_s
    first_failure: Optional[float] = None
    wait = FIRST_WAIT_S
    while True:
        try:
            return operation()
        except Exception as error:
            if not transient(error) or connection.in_atomic_block:
                raise
            now = time.monotonic()
            if first_failure is None:
                first_failure = now
                log.warning("%s: the database cannot be reached (%s: %s); trying again for up to %g s "
                            "(OPENPROGRAM_DB_OUTAGE_S)", what, type(error).__name__, error, limit)
            connection.close()  # broken: a new one next time, never this one again
            left = first_failure + limit - now
            if left <= 0:
                raise DatabaseUnreachable(
                    f"{what}: the database could not be reached for {limit:g} s (OPENPROGRAM_DB_OUTAGE_S); "
                    f"last error {type(error).__name__}: {error}") from error
            sleep(min(wait, left))
            wait = min(wait * 2, LONGEST_WAIT_S)


class _Slots:
    """How many run threads may hold a database connection at once in this process."""

    def __init__(self):
        self._lock = threading.Lock()
        self._size: Optional[int] = None
        self._semaphore: Optional[threading.Semaphore] = None

    def semaphore(self) -> Optional[threading.Semaphore]:
        size = run_slots()
        with self._lock:
            if size != self._size:  # settings changed (a test's): a new gate for the runs from now on
                self._size = size
                self._semaphore = threading.BoundedSemaphore(size) if size else None
            return self._semaphore


def _pool_options() -> dict:
    options = connections[DEFAULT_DB_ALIAS].settings_dict.get("OPTIONS") or {}
    pool = options.get("pool")
    return pool if isinstance(pool, dict) else {}


def pool_size() -> int:
    """The most connections this process's pool opens (OPENPROGRAM_DB_POOL_SIZE); 0 with no pool."""
    return int(_pool_options().get("max_size", 0))


def pool_timeout_s() -> float:
    """How long a thread waits for a connection of the pool (OPENPROGRAM_DB_POOL_TIMEOUT_S)."""
    return float(_pool_options().get("timeout", 30.0))


def run_slots() -> int:
    """How many run threads may use the database at once: the pool less what upkeep keeps (at least one);
    0, no limit, without a pool (SQLite, or PostgreSQL with OPENPROGRAM_DB_POOL_SIZE=0)."""
    size = pool_size()
    return max(size - UPKEEP_CONNECTIONS, 1) if size else 0


_slots = _Slots()


def borrowed(what: str, operation: Callable[[], T]) -> T:
    """`operation()` on a connection taken for it and given back after, an outage waited out (see the
    module). Inside a transaction (a test's, or the run's own code's) the connection is the transaction's
    and is kept."""
    connection = connections[DEFAULT_DB_ALIAS]
    if connection.in_atomic_block:
        return operation()
    gate = _slots.semaphore()
    if gate is not None:
        gate.acquire()
    try:
        return waited_out(what, operation)
    finally:
        if not connection.in_atomic_block:
            connection.close()  # to the pool: a waiting run holds none
        if gate is not None:
            gate.release()
