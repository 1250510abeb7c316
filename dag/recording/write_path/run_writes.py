"""`RunWrites`: one run's node writes, queued for the process's group-commit writer.

A call's node id must be known at entry (its children name it as their parent, the runtime keeps it
on the frame) while its row is written later, in a batch. The ids come from blocks reserved in the
database (`sql.reserve_node_ids`: the table's own sequence), so they never collide with another
process's, another run's or the ORM's, and stay ordinary increasing integers for the API and the
browser. A client-side scheme (UUIDs, process-tagged numbers) would have changed the id's type and
made ids useless as an order. Blocks grow fourfold from `FIRST_BLOCK` to `LARGEST_BLOCK` ids as a run
writes more, so a short run reserves few and a long one one query per sixteen thousand calls (a
reservation waits its turn behind the writer's batch for SQLite's write lock, and takes the database
a millisecond for a thousand ids on PostgreSQL); ids left in a block when the run ends are never used.
`seq` and `rev` are given by the writer, under the session's lock.

Inside a transaction around the run (a test's), writes are made at once, in it, as one transaction
each (`nodes.create_node`, `nodes.finish_node`): the writer's connection could not see that
transaction's rows, and a rollback must take the writes with it. Inside an `atomic` block the run's own
code opens (a tool saving the app's rows), the calls it makes still happened whatever becomes of the
block:
- on PostgreSQL they are written in the block, at once, after the run's queued writes (their parents,
  which the block's foreign keys must find) have been committed;
- on SQLite the block holds the database's write lock from its start (IMMEDIATE), so nothing could be
  committed before it ends: its calls are queued as usual and the writer commits them once the block
  has. A block that makes more calls than the queue holds (a batch, 100) waits for room that the
  writer cannot make until the busy timeout ends it, and the run fails with "database is locked".
"""
from __future__ import annotations

import threading
from collections import deque
from typing import Any, Optional

from django.db import DEFAULT_DB_ALIAS, connections

from ...models import Node, Session
from .. import clock
from . import sql
from .batch_writes import NodeCreate, NodeFinish
from .borrowing import borrowed
from .group_commit import GroupWriter, session_key
from .process_writer import process_writer, running_writer
from .nodes import create_node, finish_node
from .write_transaction import DRIVER_VENDORS, WriteTransaction

FIRST_BLOCK = 32
LARGEST_BLOCK = 16384
BLOCK_GROWTH = 4


class RunWrites:
    """Creates and backfills the nodes of one session (`lease`: the run's worker id, fencing each write).

    `writer`: the group writer to queue on (default: the process's).
    """

    def __init__(self, session_id, lease: Optional[str] = None, writer: Optional[GroupWriter] = None):
        self.session_id = Session._meta.pk.to_python(session_id)
        self._key = session_key(self.session_id)
        self.lease = lease
        self._writer = writer
        self._ids: deque[int] = deque()
        self._block = FIRST_BLOCK
        self._ids_lock = threading.Lock()
        # The entries this run queued, by node id, with the writer they went to, until the call's exit.
        self._queued: dict[int, tuple[GroupWriter, NodeCreate]] = {}
        self._local = threading.local()
        # Made inside a transaction (a test's): the run's writes never went to the writer, nothing to
        # commit first when they are made in it.
        self._enclosed = connections[DEFAULT_DB_ALIAS].in_atomic_block

    def create(self, **fields: Any) -> Node:
        """A new node of the session, its id set, its write queued (or made, inside a transaction).

        The returned node belongs to the writer once queued: read its `seq` only after `flush()`.
        """
        writer = self._grouped()
        if writer is None:
            return create_node(self.session_id, lease=self.lease, **fields)
        fields["id"], fields["session_id"] = self._next_id(), self.session_id
        node = sql.node_from(fields)
        entry = NodeCreate(self._key, self.lease, node)
        writer.submit(entry)
        self._queued[node.id] = (writer, entry)
        return node

    def finish(self, node: Node, **fields: Any) -> None:
        """Backfill `node` (status, output, error, ...; `finished_at` now unless given). An exit that
        arrives after the node ended (a stop closed it) changes nothing: a terminal status is final.
        A node whose entry is still queued is ended in the queue, and written once."""
        fields.setdefault("finished_at", clock.now())
        queued = self._queued.pop(node.id, None)
        writer = self._grouped()
        if writer is None:
            finish_node(node, lease=self.lease, **fields)
        elif queued is None or queued[0] is not writer or not writer.finish_queued(queued[1], fields):
            writer.submit(NodeFinish(self._key, self.lease, node.id, fields))

    def flush(self, *, raise_failure: bool = True) -> Optional[BaseException]:
        """Wait until this run's queued writes have committed (read-your-writes). A refused or failed
        write is raised here (`WriteRefused`, ...), or returned if `raise_failure` is False."""
        writer = self._writer or running_writer()
        if writer is None or self._connection().in_atomic_block:
            return None
        failure = writer.flush(self.session_id)
        if failure is not None and raise_failure:
            raise failure
        return failure

    def _grouped(self) -> Optional[GroupWriter]:
        """The writer to queue on; None: write at once, in this thread's transaction (see the module)."""
        connection = self._connection()
        if connection.vendor not in DRIVER_VENDORS:
            return None
        if connection.in_atomic_block and (self._enclosed or connection.vendor != "sqlite"):
            self._commit_queued_first()
            return None
        return self._writer or process_writer()

    def _commit_queued_first(self) -> None:
        """Before a write inside a transaction the run opened (not on SQLite): commit the run's queued
        writes, the parents of what the transaction writes (its foreign keys would find none at its
        commit)."""
        writer = self._writer or running_writer()
        if self._enclosed or writer is None:
            return
        failure = writer.flush(self.session_id)
        if failure is not None:
            raise failure

    def _connection(self):
        """This thread's default connection. `connections[alias]` goes through asgiref's context-aware
        Local on every lookup, a cost on each entry and exit; a thread's connection object stays the same
        one for the thread's life (closing it only closes its driver connection), so it is kept here."""
        try:
            return self._local.connection
        except AttributeError:
            self._local.connection = connection = connections[DEFAULT_DB_ALIAS]
            return connection

    def _next_id(self) -> int:
        try:
            return self._ids.popleft()  # a deque's popleft is atomic: only a refill needs the lock
        except IndexError:
            pass
        with self._ids_lock:
            if not self._ids:
                self._ids.extend(borrowed(f"session {self.session_id}'s node ids", self._reserve))
                self._block = min(self._block * BLOCK_GROWTH, LARGEST_BLOCK)
            return self._ids.popleft()

    def _reserve(self) -> list[int]:
        with WriteTransaction() as tx:
            return list(sql.reserve_node_ids(tx, self._block, alone=True))
