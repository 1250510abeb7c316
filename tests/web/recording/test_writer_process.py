"""A writer process: a serving process's batches written by a process of its own (write_path.writer_process),
with what a writer thread guarantees kept across the pipe: every write committed in order and published,
flushes, the fence, a session's failure its own, and a crash of either process."""
from __future__ import annotations

import multiprocessing
import os
import pickle
import select
import signal
import sqlite3
import subprocess
import sys
import threading
from datetime import datetime, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import psycopg
import pytest
from django.core.checks import run_checks
from django.db import connection

from dag.conf import conf
from dag.models import Node, Session
from dag.recording import write_path
from dag.recording.write_path import (batch_writer, group_commit, process_writer, sql, writer_process,
                                      writer_process_main, writer_wire)
from dag.recording.write_path.batch_writes import NodeCreate, NodeFinish
from dag.recording.write_path.write_transaction import WriteTransaction
from dag.recording.write_path.writer_process import ProcessWriter, WriterProcessLost
from tests.database_url import database_url

from ..dag_helpers import (answer_from_a_fork, claimed_by, new_session, parent, recording,
                           written_off_beside_another)
from ..launch_helpers import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[3]
FOREVER_MS = 600_000  # a batch goes when it is full or flushed, never by its window


@pytest.fixture
def writer():
    with process_writer.use_writer(ProcessWriter(batch_rows=25)) as writer:
        yield writer


def created_flushed_and_stored(count: int) -> tuple[list[int], list[int]]:
    """`count` nodes created by one run and flushed: their ids as created, and as stored, by seq."""
    session = claimed_by("host:1")
    writes = write_path.RunWrites(session.pk, lease="host:1")
    created = [writes.create(kind="code", name=f"n{index}").pk for index in range(count)]
    writes.flush()
    return created, list(Node.objects.filter(session=session).order_by("seq").values_list("id", flat=True))


@pytest.mark.parametrize("moment", [datetime(2026, 12, 6, 17, 0, 0, 999999, tzinfo=timezone.utc),
                                    datetime(2106, 2, 7, 6, 28, 15, 1, tzinfo=timezone.utc),
                                    datetime(2026, 12, 6, 18, 0, 0, 5, tzinfo=ZoneInfo("Europe/Paris")),
                                    datetime(2026, 12, 6, 17, 0), None])
def test_a_write_crosses_the_pipe_whole(moment):
    node = sql.new_node(id=7, session_id="8c4bd3a0-8f2e-4a41-9a53-5fd0c5a2f3b1", parent_id=5, kind="code", name="step",
                        status="completed", input={"i": [1, 2.5, None]}, output=1.5, render_range={"callers": 2},
                        depth=2, started_at=moment, finished_at=moment)
    create = writer_wire.from_wire(pickle.loads(pickle.dumps(writer_wire.to_wire(
        NodeCreate("s", "host:1", node)))))
    assert (create.session_id, create.lease) == ("s", "host:1")
    assert {name: getattr(create.node, name) for name in writer_wire._NODE_ATTNAMES} == {
        name: getattr(node, name) for name in writer_wire._NODE_ATTNAMES}
    assert create.node.started_at is None or create.node.started_at.utcoffset() == moment.utcoffset()
    fields = {"status": "completed", "output": 2.5, "error": "", "finished_at": moment}  # a float stays one
    finish = writer_wire.from_wire(pickle.loads(pickle.dumps(writer_wire.to_wire(
        NodeFinish("s", None, 7, fields)))))
    assert (finish.session_id, finish.lease, finish.pk, finish.fields) == ("s", None, 7, fields)


def test_a_run_recorded_through_a_writer_process_is_written_whole_in_order_and_published(writer, published):
    session = claimed_by("host:1")
    writer.start()
    started = writer._child.process.pid
    with recording(session):
        parent(300)
    session.refresh_from_db()
    nodes = list(Node.objects.filter(session=session).order_by("seq"))
    assert [node.seq for node in nodes] == list(range(301)) == list(range(session.node_count))
    assert [node.output for node in nodes[1:]] == list(range(300))
    assert {node.status for node in nodes} == {"completed"}
    revs = [message["rev"] for key, message in published if key == str(session.pk)]
    assert revs == list(range(1, session.rev + 1))  # every change published once, in order
    last = {message["node"]["id"]: message["node"] for key, message in published
            if key == str(session.pk) and message["type"] == "node"}
    assert {node.id: (node.seq, node.rev, node.status) for node in nodes} == {
        pk: (record["seq"], record["rev"], record["status"]) for pk, record in last.items()}
    assert writer._child.process.pid == started  # one writer process for all of it


def test_a_flush_returns_once_the_writer_process_has_committed(writer):
    created, stored = created_flushed_and_stored(7)
    assert stored == created


def test_a_fenced_runs_writes_are_refused_and_it_learns_why_at_its_next_write(writer):
    fenced, fenced_writes, other, other_writes, survivor = written_off_beside_another()
    with pytest.raises(write_path.WriteRefused, match="it has ended interrupted"):
        fenced_writes.flush()  # the refusal crossed the pipe as what it is: the run stops, cancelled
    with pytest.raises(write_path.WriteRefused):
        fenced_writes.create(kind="code", name="later")
    other_writes.flush()
    assert not Node.objects.filter(session=fenced).exists()
    assert Node.objects.get(pk=survivor.pk).name == "survivor"


def test_one_sessions_failed_write_costs_no_other_session_its_writes(writer):
    bad, good = claimed_by("host-a:1"), claimed_by("host-b:2")
    bad_writes = write_path.RunWrites(bad.pk, lease="host-a:1")
    good_writes = write_path.RunWrites(good.pk, lease="host-b:2")
    bad_writes.create(kind="code", name="orphan", parent_id=10**12)  # no such parent: the database refuses it
    kept = good_writes.create(kind="code", name="kept")
    with pytest.raises(Exception, match="(?i)foreign key"):
        bad_writes.flush()
    good_writes.flush()
    assert Node.objects.get(pk=kept.pk).name == "kept"
    assert not Node.objects.filter(session=bad).exists()


def _database_held():
    """A transaction of the test's own that holds what a batch's transaction must take first (SQLite: the
    write lock; PostgreSQL: every session row), until closed."""
    settings = connection.settings_dict
    if connection.vendor == "sqlite":
        held = sqlite3.connect(settings["NAME"], isolation_level=None)
        held.execute("BEGIN IMMEDIATE")
        return held
    held = psycopg.connect(database_url(settings))
    held.execute(f"SELECT 1 FROM {Session._meta.db_table} FOR UPDATE")
    return held


def test_a_killed_writer_process_fails_the_sessions_it_had_in_flight_and_a_new_one_takes_over(writer):
    lost, later = claimed_by("host-a:1"), claimed_by("host-b:2")
    writes = write_path.RunWrites(lost.pk, lease="host-a:1")
    writes.create(kind="code", name="before")  # its first ids reserved, before the database is held
    writes.flush()
    first = writer._child.process
    held = _database_held()
    try:
        writes.create(kind="code", name="in flight")
        wait_for(lambda: writer._in_flight, 60, "the batch to be sent to the writer process")
        first.send_signal(signal.SIGKILL)  # the batch is in flight: its transaction waits for the lock
        with pytest.raises(WriterProcessLost, match="whether they were committed is not known"):
            writes.flush()
    finally:
        held.close()
    first.wait(60)
    with pytest.raises(WriterProcessLost):
        writes.create(kind="code", name="after")  # the run stops at its next write
    later_writes = write_path.RunWrites(later.pk, lease="host-b:2")
    node = later_writes.create(kind="code", name="on a new writer process")
    later_writes.flush()
    assert Node.objects.get(pk=node.pk).name == "on a new writer process"
    assert writer._child.process.pid != first.pid


def _writer_process_holds_a_connection(writer) -> bool:
    """Whether the writer process has a database connection open (SQLite: the database file among its
    open files; PostgreSQL: a backend whose client is one of its sockets)."""
    pid = writer._child.process.pid
    targets = {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
    if connection.vendor == "sqlite":
        return connection.settings_dict["NAME"] in targets
    sockets = {target[len("socket:["):-1] for target in targets if target.startswith("socket:[")}
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as lines:
            for line in list(lines)[1:]:
                fields = line.split()
                if fields[9] in sockets:
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    with connection.cursor() as cursor:
        cursor.execute("SELECT client_port FROM pg_stat_activity WHERE datname = current_database()")
        return bool(ports & {port for (port,) in cursor.fetchall()})


@pytest.mark.skipif(str(connection.settings_dict.get("HOST") or "").startswith("/"),
                    reason="a PostgreSQL reached by a Unix socket: no client port to match")
def test_an_idle_writer_process_gives_its_database_connection_back(writer):
    session = claimed_by("host:1")
    writes = write_path.RunWrites(session.pk, lease="host:1")
    writes.create(kind="code", name="n0")
    writes.flush()
    wait_for(lambda: not _writer_process_holds_a_connection(writer), 60, "the idle writer process to let go")
    writes.create(kind="code", name="n1")  # and it connects again for the next batch
    writes.flush()
    assert Node.objects.filter(session=session).count() == 2


def test_writes_queued_behind_a_lost_writer_process_are_not_made_for_the_sessions_it_failed():
    with process_writer.use_writer(ProcessWriter(batch_rows=1, capacity=10)) as writer:
        lost, other = claimed_by("host-a:1"), claimed_by("host-b:2")
        writes = write_path.RunWrites(lost.pk, lease="host-a:1")
        writes.create(kind="code", name="before")
        writes.flush()
        first = writer._child.process
        held = _database_held()
        try:
            for name in ("a", "b", "c", "d"):  # a batch each: two in flight, two queued behind them
                writes.create(kind="code", name=name)
            wait_for(lambda: len(writer._in_flight) == writer_process.IN_FLIGHT, 60, "two batches in flight")
            first.send_signal(signal.SIGKILL)
            with pytest.raises(WriterProcessLost):
                writes.flush()
        finally:
            held.close()
        other_writes = write_path.RunWrites(other.pk, lease="host-b:2")
        other_writes.create(kind="code", name="after")
        other_writes.flush()  # the next writer process has had everything queued before it
    # What was in flight may or may not have been committed (on PostgreSQL a batch sent with its COMMIT
    # goes on without its client); what was still queued is not written.
    names = set(Node.objects.filter(session=lost).values_list("name", flat=True))
    assert "before" in names and not names & {"c", "d"} and names <= {"before", "a", "b"}
    assert list(Node.objects.filter(session=other).values_list("name", flat=True)) == ["after"]


def test_a_full_queue_makes_writers_wait_and_drops_nothing():
    with process_writer.use_writer(ProcessWriter(batch_ms=FOREVER_MS, batch_rows=3, capacity=3)):
        created, stored = created_flushed_and_stored(40)
    assert stored == created


def _pid_ended(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"  # ended; its parent has not reaped it
    except FileNotFoundError:
        return True


def test_a_writer_process_ends_with_the_serving_process_and_its_session_is_recovered(tmp_path):
    session = new_session()  # the child claims it, under its own lease
    env = {**os.environ, "DATABASE_URL": database_url(connection.settings_dict), "PYTHONUNBUFFERED": "1",
           "DJANGO_SETTINGS_MODULE": "openprogram_web.settings", "OPENPROGRAM_VAR_DIR": str(tmp_path / "var"),
           "LOG_LEVEL": "WARNING"}
    env.pop("REDIS_URL", None)
    child = subprocess.Popen([sys.executable, "-m", "tests.web.recording.recording_child", str(session.pk), "10", "10",
                              "writer-process"],
                             cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=open(tmp_path / "child.log", "w"),
                             text=True)
    try:
        line = child.stdout.readline()
        assert line.startswith("WRITER "), (tmp_path / "child.log").read_text()
        writer_pid = int(line.split()[1])
        child.send_signal(signal.SIGKILL)
        child.wait(60)
    finally:
        if child.poll() is None:
            child.kill()
    wait_for(lambda: _pid_ended(writer_pid), 60, "the writer process to end with its serving process")
    from dag.runs import lifecycle
    assert lifecycle.recover_at_start(in_process=True) >= 1
    session.refresh_from_db()
    nodes = list(Node.objects.filter(session=session).order_by("seq"))
    assert session.status == "interrupted"
    assert not [node for node in nodes if node.status == "running"]
    assert [(node.name, node.status) for node in nodes[:11]] == [("outer", "interrupted")] + [("step", "completed")] * 10


def test_auto_means_a_writer_process_for_serving_processes_only(settings, monkeypatch):
    monkeypatch.setattr(process_writer, "_writer", None)
    monkeypatch.setattr(process_writer, "_serving", False)
    settings.OPENPROGRAM_WRITER = "auto"
    assert not process_writer.writes_in_a_process()
    monkeypatch.setattr(process_writer, "_serving", True)
    assert process_writer.writes_in_a_process()
    settings.OPENPROGRAM_WRITER = "thread"
    assert not process_writer.writes_in_a_process()
    monkeypatch.setattr(process_writer, "_serving", False)
    settings.OPENPROGRAM_WRITER = "process"
    assert process_writer.writes_in_a_process()
    assert type(process_writer.process_writer()) is ProcessWriter
    process_writer._writer.stop()
    settings.OPENPROGRAM_WRITER = "thread"
    monkeypatch.setattr(process_writer, "_writer", None)
    assert type(process_writer.process_writer()) is group_commit.GroupWriter


def test_an_unknown_writer_is_named_at_start_up(settings):
    settings.OPENPROGRAM_WRITER = "threads"
    errors = [error for error in run_checks() if error.id == "dag.E003"]
    assert [error.msg for error in errors] == [
        "OPENPROGRAM_WRITER must be \"auto\", \"thread\" or \"process\"; got 'threads'"]
    settings.OPENPROGRAM_WRITER = "process"
    assert conf.WRITER == "process"


def test_a_writer_process_that_cannot_start_is_not_started_again_for_every_batch(monkeypatch):
    # A program that ends at once, as one whose settings cannot load would.
    monkeypatch.setattr(writer_process, "CHILD_MAIN", "import sys; sys.exit(3)")
    monkeypatch.setattr(writer_process, "RESTART_AFTER_S", 600)
    waits = []
    monkeypatch.setattr(writer_process, "_sleep", waits.append)  # the wait is recorded, not slept
    with process_writer.use_writer(ProcessWriter(batch_rows=1)):
        first, second = claimed_by("host-a:1"), claimed_by("host-b:2")
        writes = write_path.RunWrites(first.pk, lease="host-a:1")
        writes.create(kind="code", name="lost")
        with pytest.raises(WriterProcessLost):
            writes.flush()
        later = write_path.RunWrites(second.pk, lease="host-b:2")
        later.create(kind="code", name="waits for the next start")
        with pytest.raises(WriterProcessLost):
            later.flush()
    # Before the second writer process, the sending thread waited out the rest of the time since the
    # first one started.
    assert waits and 0 < waits[0] <= 600


@pytest.mark.skipif(connection.vendor != "sqlite", reason="an in-memory database is SQLite's")
def test_a_database_in_this_processs_memory_is_written_by_a_thread(settings, monkeypatch):
    settings.OPENPROGRAM_WRITER = "process"
    assert process_writer.writes_in_a_process()
    monkeypatch.setitem(connection.settings_dict, "NAME", ":memory:")
    assert not process_writer.writes_in_a_process()


def test_changes_that_cannot_be_encoded_are_answered_as_none_and_logged(monkeypatch, caplog):
    from dag.live import frames

    def broken(messages):
        raise ValueError("not encodable")

    monkeypatch.setattr(frames, "encoded_runs", broken)
    assert writer_process_main._encoded("s", [{"type": "node", "rev": 1, "node": {}}]) == ([], [])
    assert "could not be encoded" in caplog.text  # viewers find the gap and read the database


class AnswersSeen:
    """Stands in for the pipe to the serving process: notes each answer in `events`."""

    def __init__(self, events: list):
        self.events = events

    def send_bytes(self, message: bytes) -> None:
        _, number, results = pickle.loads(message)
        self.events.append(("answered", number, [failure for _, failure, _, _ in results]))


def batch_of_new_nodes(session: Session, lease: str, count: int) -> list:
    with WriteTransaction() as tx:
        ids = sql.reserve_node_ids(tx, count, alone=True)
    return [writer_wire.to_wire(NodeCreate(group_commit.session_key(session.pk), lease, sql.new_node(
        id=pk, session_id=session.pk, kind="code", name=f"n{pk}", status="completed"))) for pk in ids]


def batches_written_in_one_go(monkeypatch, batches: list[list]) -> list:
    """`write_batches` given `batches`, all waiting in its pipe before it starts (so each is taken while
    the one before it is on the server); what it did, in order: ("on the server", k) while batch k's
    statements were, ("committed", k), and ("answered", number, failures)."""
    events, round_trips = [], []
    fetch_all = WriteTransaction.fetch_all

    def watched(tx, statements, *, commit=False, meanwhile=None):
        round_trips.append(len(round_trips) + 1)
        batch = round_trips[-1]

        def on_the_server():
            events.append(("on the server", batch))
            if meanwhile is not None:
                meanwhile()
        results = fetch_all(tx, statements, commit=commit, meanwhile=on_the_server)
        events.append(("committed", batch))
        return results

    monkeypatch.setattr(WriteTransaction, "fetch_all", watched)
    receiving, to_writer = multiprocessing.Pipe(duplex=False)
    for number, writes in enumerate(batches, 1):
        to_writer.send_bytes(writer_wire.encode(("batch", number, writes)))
    to_writer.close()  # the serving process's end: the writer answers what it was sent, then returns
    writer_process_main.write_batches(receiving, AnswersSeen(events))
    return events


@pytest.mark.skipif(connection.vendor != "postgresql", reason="statements are sent ahead on PostgreSQL")
def test_a_batchs_answer_goes_while_the_server_works_on_the_next_batch(monkeypatch):
    # The database need not wait for the encoding and the sending of what a batch changed.
    session = claimed_by("host:1")
    events = batches_written_in_one_go(monkeypatch, [batch_of_new_nodes(session, "host:1", 3),
                                                     batch_of_new_nodes(session, "host:1", 2)])
    assert events == [("on the server", 1), ("committed", 1),
                      ("on the server", 2), ("answered", 1, [None]), ("committed", 2),
                      ("answered", 2, [None])]
    assert list(Node.objects.filter(session=session).order_by("seq").values_list("seq", "rev")) == [
        (0, 2), (1, 3), (2, 4), (3, 5), (4, 6)]  # the claim took revision 1


@pytest.mark.skipif(connection.vendor != "postgresql", reason="statements are sent ahead on PostgreSQL")
def test_a_refused_batch_is_answered_before_the_next_batch_is_written(monkeypatch):
    # The refusal must be known to the serving process in batch order; the next batch is staged again
    # without the refused session's writes.
    fenced, _, other, other_writes, _ = written_off_beside_another()
    other_writes.flush()  # its "survivor" node
    events = batches_written_in_one_go(monkeypatch, [batch_of_new_nodes(fenced, "host-a:1", 1),
                                                     batch_of_new_nodes(other, "host-b:2", 1)])
    [first, second] = [event for event in events if event[0] == "answered"]
    assert first[1] == 1 and isinstance(first[2][0], write_path.WriteRefused)
    assert second == ("answered", 2, [None])
    assert events.index(first) < events.index(second)
    assert Node.objects.filter(session=other).count() == 2 and not Node.objects.filter(session=fenced).exists()


@pytest.mark.skipif(connection.vendor != "postgresql", reason="statements are sent ahead on PostgreSQL")
def test_a_batch_arriving_while_the_one_before_is_on_the_server_is_staged_before_that_ones_results(monkeypatch):
    # The serving process sends a batch once it has the answer to the one before: staged at once, its
    # staging is not left for the database to wait on after the batch before it.
    session = claimed_by("host:1")
    first, second = batch_of_new_nodes(session, "host:1", 2), batch_of_new_nodes(session, "host:1", 2)
    events, awaiting = [], threading.Event()
    prestage, real_select = batch_writer.prestage, select.select

    def watched_prestage(*args, **kwargs):
        events.append("staged ahead")
        return prestage(*args, **kwargs)

    def watched_select(readable, *args):
        if receiving.fileno() in readable:
            awaiting.set()
        return real_select(readable, *args)

    fetch_all = WriteTransaction.fetch_all

    def watched_fetch_all(tx, statements, *, commit=False, meanwhile=None):
        results = fetch_all(tx, statements, commit=commit, meanwhile=meanwhile)
        events.append("committed")
        return results

    monkeypatch.setattr(batch_writer, "prestage", watched_prestage)
    monkeypatch.setattr(select, "select", watched_select)
    monkeypatch.setattr(writer_process_main, "AWAIT_LIMIT_S", None)  # however slowly this test goes on
    monkeypatch.setattr(WriteTransaction, "fetch_all", watched_fetch_all)
    receiving, to_writer = multiprocessing.Pipe(duplex=False)
    writing = threading.Thread(target=written_then_closed, args=(receiving,), daemon=True)
    try:
        with psycopg.connect(database_url(connection.settings_dict)) as holder:
            # The first batch's advance waits for this lock: it stays on the server until the test says.
            holder.execute("SELECT 1 FROM dag_session WHERE id = %s FOR UPDATE", [session.pk])
            to_writer.send_bytes(writer_wire.encode(("batch", 1, first)))
            writing.start()
            assert awaiting.wait(60), "the writer did not wait for a batch while the first was on the server"
            to_writer.send_bytes(writer_wire.encode(("batch", 2, second)))
            wait_for(lambda: "staged ahead" in events, 60, "the second batch to be staged")
        # The lock released: the first batch commits, then the second.
    finally:
        to_writer.close()  # the writer ends once it has written what it was sent
        writing.join(60)
    assert events == ["staged ahead", "committed", "committed"]
    assert Node.objects.filter(session=session).count() == 4


def written_then_closed(receiving) -> None:
    try:
        writer_process_main.write_batches(receiving, AnswersSeen([]))
    finally:
        connection.close()


def test_an_answer_the_serving_process_can_no_longer_take_fails_the_next_batch_not_the_one_on_the_server():
    class Gone:
        def send_bytes(self, message: bytes) -> None:
            raise BrokenPipeError("the serving process ended")

    answers = writer_process_main._Answers(Gone())
    answers.owe(1, {})
    answers.send_due()  # inside the next batch's round trip: that batch must not look failed
    with pytest.raises(BrokenPipeError):
        answers.owe(2, {})


def test_a_ctrl_c_to_the_process_group_leaves_the_writer_process_writing(writer):
    session = claimed_by("host:1")
    writes = write_path.RunWrites(session.pk, lease="host:1")
    writes.create(kind="code", name="before")
    writes.flush()  # answered: the writer process has started and set its signals
    pid = writer._child.process.pid
    os.kill(pid, signal.SIGINT)
    os.kill(pid, signal.SIGTERM)
    writes.create(kind="code", name="after")
    writes.flush()
    assert writer._child.process.pid == pid and writer._child.process.poll() is None
    assert list(Node.objects.filter(session=session).order_by("seq").values_list("name", flat=True)) == [
        "before", "after"]


def test_a_forked_child_of_the_serving_process_lets_go_of_the_writer_processs_pipes(writer):
    writer.start()
    ends = (writer._child.sending, writer._child.receiving)
    # In the child, the fork handler has run.
    assert answer_from_a_fork(lambda: b"closed" if all(end.closed for end in ends) else b"open") == b"closed"
    assert not any(end.closed for end in ends)  # the serving process's own are untouched
