"""Group commit: the node writes of every run in this process, committed together by one writer thread.

A run's entry and exit only queue their node write (`GroupWriter.submit`) and go on; the node's id was
reserved up front (`run_writes.RunWrites`), so the caller knows it at once. The writer takes what is
queued, at most `OPENPROGRAM_WRITE_BATCH_MS` after the first write of a batch and at most
`OPENPROGRAM_WRITE_BATCH_ROWS` rows, and commits it in one transaction (`batch_writer.BatchWriter`); then
it publishes each session's changes (`dag.live.broadcast.publish`, one call per session and batch).
`writer_process.ProcessWriter` is this writer with the batches written by a process of its own.

What stays as it was with one transaction per write:
- `seq` gap-free per session and `rev` strictly increasing: the batch advances each session's counters
  once (`revision.advance`, which locks the session's row) and numbers its rows in queue order;
- the lease fence: that same `advance` carries the run's lease, inside the batch's transaction. A
  refused session's part of the batch is dropped whole (nothing of it is written), later writes of it
  still queued are dropped too, and its run learns it at its next write: `submit` (or `flush`) raises
  the `WriteRefused`;
- a terminal node status is final: an exit whose node has ended meanwhile (a stop closed it) is
  dropped, and so is its revision;
- a session's terminal status comes after its nodes: the session writes in `sessions` call
  `process_writer.flush_session` first.

A call that ends while its entry is still queued is written once, already ended (one row write, one
revision): its exit is applied to the queued node (`finish_queued`) rather than queued after it; so is
a node created and ended within one batch.
How a batch becomes rows is `batch_writes`: on PostgreSQL the rows' numbers are given by the statements
themselves (`numbered_sql`), so a batch and its COMMIT are one round trip, and while the server works
on it the writer takes the next batch (if it is ready) and stages it (`batch_writes.prestage`, from
`BatchWriter`), so that only its sending is left; a staged batch is staged again if the batch before
it failed or refused a session's writes. Elsewhere the counters are read first.
Back-pressure: a full queue makes `submit` wait; nothing is ever dropped for room. A batch taken to be
staged still counts against the queue's room until it is written. A crash of the process loses what
was queued and not yet committed: the batch in flight and what arrived during its commit (queued, or
staged), i.e. about one batch window of writes and never more than two batches; the nodes it had
committed `running` are closed `interrupted` with their session by the lease reaper or the restart.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Optional

from django.db import DEFAULT_DB_ALIAS, connections

from ...conf import conf
from ...live import broadcast
from ...models import Session
from ...thread_names import name_native_thread
from .batch_writer import BatchWriter
from .batch_writes import NodeCreate, NumberedBatch, Outcome, apply

log = logging.getLogger(__name__)

# An idle writer gives its database connection back this long after its last batch (closed, or to the
# process's pool, which closes what stays idle): PostgreSQL keeps no idle connection of a quiet process
# (nor one that stops a test database from being dropped).
IDLE_LINGER_S = 0.05
# Writes per batch when OPENPROGRAM_WRITE_BATCH_ROWS is 0 (its default), by database. A backlogged
# writer takes full batches, so a write waits about two batch times to be committed and published:
# batches are as small as the database's cost per batch lets them be at thousands of calls a second.
# On SQLite a commit costs little; a PostgreSQL batch is one round trip (`numbered_sql`), so its cost
# is per row, and larger batches buy no rate. 100 and 200 writes keep a change's trip to a viewer
# near 50 and 70 ms at about 5,000 calls a second (500 on PostgreSQL: about 150 ms, at the same rate).
BATCH_ROWS_BY_VENDOR = {"sqlite": 100, "postgresql": 200}
OTHER_BATCH_ROWS = 500
# Queued writes, in batches, before `submit` waits (back-pressure), unless given: one batch waits
# while one commits. A deeper queue adds nothing to the rate (the writer is what limits it), only
# delay between a write and its commit, and to what a crash loses.
QUEUE_BATCHES = 1


@dataclass(slots=True)
class _Barrier:
    """A flush: set once every write queued before it has committed (or failed)."""
    done: threading.Event = field(default_factory=threading.Event)


class GroupWriter:
    """A bounded queue of node writes and the thread that commits them in batches (see the module).

    `gate`: a test's handle on the writer. When given, each batch, its statements executed, waits for
    the event before it commits: a cleared event holds the writer (and its open transaction) still,
    and `holding` is set while it does.
    """

    def __init__(self, *, batch_ms: Optional[float] = None, batch_rows: Optional[int] = None,
                 capacity: Optional[int] = None, gate: Optional[threading.Event] = None):
        self.batch_s = (conf.WRITE_BATCH_MS if batch_ms is None else batch_ms) / 1000
        self.batch_rows = (batch_rows or conf.WRITE_BATCH_ROWS
                           or BATCH_ROWS_BY_VENDOR.get(connections[DEFAULT_DB_ALIAS].vendor, OTHER_BATCH_ROWS))
        self.capacity = capacity or QUEUE_BATCHES * self.batch_rows
        self.holding = threading.Event()
        self._lock = threading.Lock()
        self._not_empty = threading.Condition(self._lock)
        self._not_full = threading.Condition(self._lock)
        self._queue: deque = deque()
        self._first_at = 0.0  # when the oldest queued write arrived: its batch closes a window later
        self._barriers = 0
        self._waiting = 0
        self._pending: dict[Any, int] = {}  # writes queued or in flight, by session
        self._failures: dict[Any, BaseException] = {}  # why a session's writes are refused, by session
        self._batches = BatchWriter(self._failures, gate=gate, holding=self.holding)  # the writer thread's
        self._thread: Optional[threading.Thread] = None
        self._stopping = False
        # The writes of the next batch, taken (and on PostgreSQL staged) while the current one was on the
        # server: they still count against the queue's room until they are written.
        self._held = 0
        self._lingered = False  # idle since the last batch, its connection given back (writer thread)

    # -- the callers' side -------------------------------------------------------------------------

    @property
    def waiting_for_room(self) -> int:
        """How many `submit` calls wait for room in a full queue right now (back-pressure at work)."""
        with self._lock:
            return self._waiting

    def submit(self, entry) -> None:
        """Queue one write; waits while the queue is full. Raises the session's recorded failure
        (e.g. `WriteRefused`) instead, once a batch has refused or failed one of its writes."""
        with self._lock:
            failure = self._failures.get(entry.session_id)
            if failure is not None:
                raise failure
            while len(self._queue) + self._held >= self.capacity:
                self._waiting += 1
                try:
                    self._not_full.wait()
                finally:
                    self._waiting -= 1
            self._queue.append(entry)
            self._pending[entry.session_id] = self._pending.get(entry.session_id, 0) + 1
            if len(self._queue) == 1:
                self._first_at = time.monotonic()
                self._not_empty.notify()
            elif len(self._queue) == self.batch_rows:
                self._not_empty.notify()  # a full batch need not wait out its window
            self._ensure_thread()

    def finish_queued(self, create: NodeCreate, fields: dict) -> bool:
        """End the node of `create`, a write queued here, with a backfill's `fields` if no batch has
        taken it yet: it is then written once, already ended. False (nothing done) if it was taken: the
        caller queues the backfill. Raises the session's recorded failure, as `submit` does."""
        with self._lock:
            failure = self._failures.get(create.session_id)
            if failure is not None:
                raise failure
            if create.taken:
                return False
            apply(create.node, fields)
            return True

    def flush(self, session_id: Any = None) -> Optional[BaseException]:
        """Wait until the writes of `session_id` (of every session, if None) queued before this call have
        committed; the failure recorded for that session, if any (not raised: callers decide)."""
        if threading.current_thread() is self._thread:
            return None  # a listener called from the writer itself: everything before it is committed
        if session_id is not None:
            session_id = session_key(session_id)
        with self._lock:
            waiting = self._pending.get(session_id, 0) if session_id is not None else len(self._pending)
            if not waiting:
                return self._failures.get(session_id)
            barrier = _Barrier()
            self._queue.append(barrier)  # a flush may pass a full queue: it adds no row
            self._barriers += 1
            self._not_empty.notify()
            self._ensure_thread()
        barrier.done.wait()
        return self._failures.get(session_id)

    def forget(self, session_id: Any) -> None:
        """Drop what the writer keeps about a session that has ended (its failure, its open nodes)."""
        key = session_key(session_id)
        with self._lock:
            self._failures.pop(key, None)
            self._batches.forget(key)

    def stop(self) -> None:
        """Commit what is queued, then end the thread (it closes its database connection)."""
        self.flush()
        with self._lock:
            self._stopping = True
            self._not_empty.notify()
            thread = self._thread
        if thread is not None:
            thread.join()

    def _ensure_thread(self) -> None:  # called with the lock held
        # The thread clears `_thread` (under the lock) as it decides to end, so no write is queued for
        # a thread that has ended; asking `is_alive()` on every write cost more than queueing it.
        if self._thread is None:
            self._stopping = False
            self._thread = threading.Thread(target=self._run, name="dag-group-commit", daemon=True)
            self._thread.start()

    # -- the writer thread -------------------------------------------------------------------------

    def _run(self) -> None:
        name_native_thread()
        try:
            while True:
                upcoming = self._batches.take_upcoming()
                batch = upcoming.token if upcoming is not None else self._take()
                if batch is None:
                    return
                if batch:
                    self._write(batch, upcoming.staged if upcoming is not None else None)
                else:
                    connections[DEFAULT_DB_ALIAS].close()  # idle: hold no connection
        finally:
            with self._lock:
                upcoming = self._batches.take_upcoming()
                if upcoming is not None:  # ended by surprise with a batch taken: it goes back, first
                    self._queue.extendleft(reversed(upcoming.token))
                    self._barriers += sum(isinstance(entry, _Barrier) for entry in upcoming.token)
                    self._held = 0
                if self._thread is threading.current_thread():
                    self._thread = None  # ended by surprise: the next write starts another
            connections.close_all()

    def _take(self) -> Optional[list]:
        """The next batch (flushes included); [] once, after an idle linger (the caller lets go of its
        connection), then it waits without a timeout; None when stopping."""
        with self._lock:
            while not self._queue:
                if self._stopping:
                    self._thread = None
                    return None
                if self._lingered:
                    self._not_empty.wait()
                elif not self._not_empty.wait(IDLE_LINGER_S):
                    self._lingered = True
                    return []
            self._lingered = False
            deadline = self._first_at + self.batch_s
            while not self._batch_ready(deadline):
                self._not_empty.wait(deadline - time.monotonic())
            return self._pop_batch()

    def _take_ready(self) -> Optional[tuple[list, list]]:
        """The next batch (and its writes) if it is ready now (full, flushed, or its window over), else
        None; its writes are `_held` until written."""
        with self._lock:
            if not self._queue or not self._batch_ready(self._first_at + self.batch_s):
                return None
            batch = self._pop_batch()
            writes = [entry for entry in batch if not isinstance(entry, _Barrier)]
            self._held = len(writes)
            return batch, writes

    def _batch_ready(self, deadline: float) -> bool:  # called with the lock held
        return (bool(self._barriers) or len(self._queue) >= self.batch_rows or self._stopping
                or time.monotonic() >= deadline)

    def _pop_batch(self) -> list:  # called with the lock held, the queue not empty
        batch, rows = [], 0
        while self._queue and rows < self.batch_rows:
            entry = self._queue.popleft()
            batch.append(entry)
            if isinstance(entry, _Barrier):
                self._barriers -= 1
            else:
                entry.taken = True  # from here on, the call's exit is queued, not applied (finish_queued)
                rows += 1
        if self._queue:
            self._first_at = time.monotonic()
        self._not_full.notify_all()
        return batch

    def _write(self, batch: list, staged: Optional[NumberedBatch] = None) -> None:
        """Write `batch` (`staged`: its parts, already staged while the batch before was on the server)."""
        writes = [entry for entry in batch if not isinstance(entry, _Barrier)]
        with self._lock:
            if self._held:  # the batch's writes leave the queue's count now that they are written
                self._held = 0
                self._not_full.notify_all()
        try:
            self._after_commit(self._batches.write(writes, self._take_ready, staged))
        except Exception:  # never leave a flush waiting on a writer that died
            log.exception("the group-commit writer failed on a batch of %d writes", len(writes))
        finally:
            self._settle(batch)

    def _after_commit(self, outcomes: dict[tuple, Outcome]) -> None:
        for (session_id, _), outcome in outcomes.items():
            if outcome.failure is not None:
                with self._lock:
                    self._failures[session_id] = outcome.failure
            else:
                broadcast.publish(str(session_id), outcome.messages)

    def _settle(self, batch: list) -> None:
        """Count the batch's writes as done and release the flushes waiting on it."""
        with self._lock:
            for entry in batch:
                if isinstance(entry, _Barrier):
                    entry.done.set()
                    continue
                left = self._pending[entry.session_id] - 1
                if left:
                    self._pending[entry.session_id] = left
                else:
                    del self._pending[entry.session_id]


def session_key(session_id) -> str:
    """How the writer knows a session (queued writes carry it): its id as text. A UUID's hash is
    computed in Python, and the writer hashes a write's session several times on its way."""
    return str(Session._meta.pk.to_python(session_id))
