"""A group-commit batch on PostgreSQL: statements that number their rows themselves, so the whole batch
and its COMMIT are one round trip; and rows written that way read back as the ORM writes them (on SQLite
the same checks hold for its multi-row INSERTs)."""
from __future__ import annotations

import os
import tempfile
import threading
from datetime import datetime, timezone

import pytest
from django.db import connection

from dag.models import Node, Session
from dag.recording import write_path
from dag.recording.write_path import batch_writer, group_commit, run_writes
from dag.recording.write_path.write_transaction import WriteTransaction, placeholders

from ..dag_helpers import new_session

pytestmark = pytest.mark.django_db(transaction=True)

# A window no test outlasts: a batch commits only when a flush asks for it.
FOREVER_MS = 600_000
ON_POSTGRESQL = pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's round trips")


def _claimed(worker: str):
    return write_path.claim_session(new_session().pk, worker=worker)


class _TracedTransaction(WriteTransaction):
    """A WriteTransaction whose messages to the server libpq writes to `trace_path` while `tracing`."""
    tracing = threading.Event()
    trace_path = ""

    def __enter__(self):
        tx = super().__enter__()
        if self.tracing.is_set():
            from psycopg import pq
            self._trace = open(self.trace_path, "a")
            pgconn = self.connection.connection.pgconn
            pgconn.trace(self._trace.fileno())
            pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS)
        return tx

    def __exit__(self, *exc):
        try:
            return super().__exit__(*exc)
        finally:
            if getattr(self, "_trace", None) is not None:
                self.connection.connection.pgconn.untrace()
                self._trace.close()


def _syncs(trace_path: str) -> int:
    """Client Sync messages in a libpq trace: one per round trip (a pipeline's end, or a lone query)."""
    with open(trace_path) as trace:
        return sum(1 for line in trace if line.split("\t")[:1] == ["F"] and "\tSync" in line)


@ON_POSTGRESQL
def test_a_batch_of_several_sessions_with_new_nodes_and_backfills_is_one_round_trip(monkeypatch):
    monkeypatch.setattr(batch_writer, "WriteTransaction", _TracedTransaction)
    handle, _TracedTransaction.trace_path = tempfile.mkstemp(suffix=".trace")
    os.close(handle)
    writer = group_commit.GroupWriter(batch_ms=FOREVER_MS, batch_rows=10_000)
    sessions = [_claimed(f"host:{index}") for index in range(3)]
    runs = [write_path.RunWrites(session.pk, lease=session.worker, writer=writer) for session in sessions]
    before = {session.pk: Session.objects.get(pk=session.pk).rev for session in sessions}
    try:
        parents = [writes.create(kind="code", name="parent", started_at=datetime.now(timezone.utc)) for writes in runs]
        writer.flush()  # the parents are written running: the next batch backfills them
        for writes, parent in zip(runs, parents):
            child = writes.create(kind="code", name="child", parent_id=parent.pk)
            writes.finish(child, status="completed", output={"ok": True})
            writes.finish(parent, status="completed", output=3)
        _TracedTransaction.tracing.set()
        writer.flush()
        _TracedTransaction.tracing.clear()
    finally:
        writer.stop()
        _TracedTransaction.tracing.clear()
    try:
        assert _syncs(_TracedTransaction.trace_path) == 1
    finally:
        os.unlink(_TracedTransaction.trace_path)
    for session in sessions:
        nodes = list(Node.objects.filter(session=session).order_by("seq"))
        assert [(node.name, node.status, node.seq) for node in nodes] == [("parent", "completed", 0),
                                                                          ("child", "completed", 1)]
        session.refresh_from_db()
        # parent written, child written ended, parent backfilled: three revisions, in queue order
        first = before[session.pk] + 1
        assert sorted(node.rev for node in nodes) == [first + 1, first + 2] and session.rev == first + 2


@ON_POSTGRESQL
def test_a_runs_reservation_of_node_ids_is_one_round_trip(monkeypatch):
    monkeypatch.setattr(run_writes, "WriteTransaction", _TracedTransaction)
    handle, _TracedTransaction.trace_path = tempfile.mkstemp(suffix=".trace")
    os.close(handle)
    writes = write_path.RunWrites(_claimed("host:1").pk, lease="host:1")
    _TracedTransaction.tracing.set()
    try:
        writes._next_id()  # the first block: reserved, and its transaction committed with it
    finally:
        _TracedTransaction.tracing.clear()
    try:
        assert _syncs(_TracedTransaction.trace_path) == 1
    finally:
        os.unlink(_TracedTransaction.trace_path)
    # Committed, and the connection given back (write_path.borrowed): the run goes on holding none.
    assert connection.connection is None


TRICKY = dict(
    name='quote " backslash \\ and ünïcödé ✓',
    doc='Line one.\n\tLine two with "quotes", a \\ and \u2028 a separator; {"seq":7,"rev":9}',
    input={"nested": {"list": [1, 2.5, -3, None, True, "s"]}, "big": 2 ** 62, "text": '"rev":1,'},
    render_range={"callers": 3},
    error="",
    model="gpt-ish",
    depth=3, name_depth=2, expose="io",
)
FINISHES = [
    {"status": "completed", "output": "a JSON string, not text"},
    {"status": "completed", "output": None},
    {"status": "error", "output": {"partial": [1]}, "error": "ValueError: bad\nline two",
     "usage": {"input_tokens": 12, "output_tokens": 3}},
]


@pytest.mark.parametrize("finish", FINISHES, ids=["string-output", "no-output", "error-with-usage"])
@pytest.mark.parametrize("merged", [True, False], ids=["written-ended", "backfilled"])
def test_rows_written_in_a_batch_read_back_as_the_orm_writes_them(finish, merged):
    session = _claimed("host:orm")
    started = datetime(2026, 12, 1, 18, 0, 0, 123456, tzinfo=timezone.utc)
    finished = datetime(2026, 12, 1, 18, 0, 1, tzinfo=timezone.utc)  # no fraction: a different text
    writer = group_commit.GroupWriter(batch_ms=FOREVER_MS, batch_rows=10_000)
    writes = write_path.RunWrites(session.pk, lease=session.worker, writer=writer)
    before = Session.objects.get(pk=session.pk).rev
    try:
        node = writes.create(kind="code", started_at=started, **TRICKY)
        if not merged:
            writer.flush()
        writes.finish(node, finished_at=finished, **finish)
        writer.flush()
    finally:
        writer.stop()
    written = Node.objects.get(pk=node.pk)
    by_orm = Node.objects.create(session=new_session(), seq=0, kind="code", started_at=started,
                                 finished_at=finished, **{**TRICKY, **finish})
    by_orm.refresh_from_db()
    names = [field.attname for field in Node._meta.concrete_fields
             if field.attname not in ("id", "session_id", "seq", "rev")]
    assert {name: getattr(written, name) for name in names} == {name: getattr(by_orm, name) for name in names}
    assert (written.seq, written.rev) == (0, before + (1 if merged else 2))


def test_fetch_all_returns_each_statements_rows_and_none_for_a_statement_without(db):
    vendor = connection.vendor
    with WriteTransaction() as tx:
        results = tx.fetch_all([(placeholders("SELECT %s + 1", vendor), [1]),
                                (placeholders("SELECT 1 WHERE 1 = %s", vendor), [2]),
                                ("CREATE TEMPORARY TABLE fetch_all_probe (x integer)", []),
                                (placeholders("SELECT %s, %s", vendor), ["a", "b"])], commit=True)
    assert results == [[(2,)], [], [], [("a", "b")]]
