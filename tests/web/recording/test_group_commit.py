"""Group commit: node writes of all a process's runs committed in batches by one writer, with the guarantees
of one transaction per write kept (order, gap-free seq, the fence, read-your-writes, what a crash loses)."""
from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import OperationalError, connection
from django.utils import timezone

from dag.conf import conf
from dag.models import Node, Session
from dag.recording import write_path
from dag.recording.recorder import DjangoRecorder
from dag.recording.write_path import batch_writer, group_commit, process_writer, sql
from dag.runs import lifecycle, reaper
from runtime import CancelledError, agentic_function, use_recorder
from tests.database_url import database_url

from ..dag_helpers import (answer_from_a_fork, claimed_by, new_session, parent, recording, visible_context,
                           write_waiting_for_room, written_off_beside_another)

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[3]
# A window no test outlasts: a batch then commits only when a flush (or a full batch) asks for it.
FOREVER_MS = 600_000


def test_many_concurrent_sessions_keep_seq_gap_free_and_revisions_in_order(published):
    sessions, rounds, calls = 12, 4, 5
    # Small batches, so every batch mixes sessions and every session spans many batches.
    with process_writer.use_writer(group_commit.GroupWriter(batch_ms=2, batch_rows=7)):
        runs = [claimed_by(f"host:{index}") for index in range(sessions)]
        start, failures = threading.Barrier(sessions), []

        def run(session: Session) -> None:
            try:
                recorder = DjangoRecorder(session, lease=session.worker)
                start.wait()
                with use_recorder(recorder):
                    for _ in range(rounds):
                        parent(calls)
                recorder.close()
            except BaseException as exc:  # reported on the test's thread
                failures.append(exc)
            finally:
                connection.close()

        threads = [threading.Thread(target=run, args=(session,)) for session in runs]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert not failures, failures

    per_session = rounds * (1 + calls)
    for session in runs:
        session.refresh_from_db()
        nodes = list(Node.objects.filter(session=session).order_by("seq"))
        assert [node.seq for node in nodes] == list(range(per_session)) == list(range(session.node_count))
        assert {node.status for node in nodes} == {"completed"}
        by_id = {node.id: node for node in nodes}
        assert all(by_id[node.parent_id].seq < node.seq for node in nodes if node.parent_id)
        revs = [message["rev"] for key, message in published if key == str(session.pk)]
        assert revs == sorted(revs) == list(range(1, session.rev + 1))  # published in order, none skipped
        assert sorted(node.rev for node in nodes) == sorted(set(node.rev for node in nodes))
        assert max(node.rev for node in nodes) == session.rev


def test_a_full_queue_makes_writers_wait_and_drops_nothing():
    gate = threading.Event()
    writer = group_commit.GroupWriter(batch_ms=0, batch_rows=1, capacity=2, gate=gate)
    session = new_session()
    writes = write_path.RunWrites(session.pk, writer=writer)
    try:
        first = writes.create(kind="code", name="n0")
        assert writer.holding.wait(60)  # the writer holds n0's batch uncommitted; the queue is empty
        writes.finish(first, status="completed")
        writes.create(kind="code", name="n1")  # the queue is full now (2)
        late = write_waiting_for_room(writer, writes, "n2")  # it waits while the queue is full...
    finally:
        gate.set()
    late.join(60)
    assert not late.is_alive()  # ...and goes in once there is room
    writes.flush()
    writer.stop()
    rows = list(Node.objects.filter(session=session).order_by("seq").values_list("seq", "name", "status"))
    assert rows == [(0, "n0", "completed"), (1, "n1", "running"), (2, "n2", "running")]


def test_a_fenced_runs_part_of_a_batch_is_refused_whole_and_it_learns_at_its_next_write(published):
    with process_writer.use_writer(group_commit.GroupWriter(batch_ms=FOREVER_MS)) as writer:
        fenced, other = claimed_by("host-a:1"), claimed_by("host-b:2")
        fenced_writes = write_path.RunWrites(fenced.pk, lease="host-a:1")
        other_writes = write_path.RunWrites(other.pk, lease="host-b:2")
        kept = fenced_writes.create(kind="code", name="kept")
        fenced_writes.flush()
        write_path.finish_session(fenced.pk, "interrupted", error="written off")  # e.g. by the reaper
        # One batch: the flush below is the only thing that closes its window.
        for name in ("late-1", "late-2"):
            node = fenced_writes.create(kind="code", name=name)
            fenced_writes.finish(node, status="completed")
        fenced_writes.finish(kept, status="completed")
        survivor = other_writes.create(kind="code", name="survivor")
        other_writes.finish(survivor, status="completed")
        with pytest.raises(write_path.WriteRefused, match="has ended interrupted"):
            fenced_writes.flush()
        with pytest.raises(CancelledError):  # and at its next write, as a run stops
            fenced_writes.create(kind="code", name="after")
        assert writer.flush(other.pk) is None

    assert list(Node.objects.filter(session=fenced).values_list("name", "status")) == [("kept", "interrupted")]
    assert list(Node.objects.filter(session=other).values_list("name", "status")) == [("survivor", "completed")]
    assert Session.objects.get(pk=fenced.pk).status == "interrupted"
    assert not [m for key, m in published if key == str(fenced.pk) and m.get("node", {}).get("name", "").startswith("late")]


def test_when_why_a_part_was_refused_cannot_be_read_the_rest_of_the_batch_is_still_published(published,
                                                                                              monkeypatch):
    def unreadable(tx, session_id, lease):
        raise OperationalError("database is locked")
    monkeypatch.setattr(batch_writer, "refusal", unreadable)
    with process_writer.use_writer(group_commit.GroupWriter(batch_ms=FOREVER_MS)) as writer:
        fenced, fenced_writes, other, other_writes, survivor = written_off_beside_another()
        with pytest.raises(write_path.WriteRefused, match="why could not be read"):
            fenced_writes.flush()  # the run still learns it was refused, and stops
        assert writer.flush(other.pk) is None
    assert [m["node"]["name"] for key, m in published if key == str(other.pk) and "node" in m] == ["survivor"]
    assert Node.objects.get(pk=survivor.pk).name == "survivor"


def test_a_model_calls_context_and_the_api_see_every_node_written_before_them(api, user):
    session = new_session(username=user.username)
    seen = {}

    @agentic_function(register_globally=False, expose="io")
    def shown(i: int) -> int:
        return i

    @agentic_function(register_globally=False)
    def reader() -> None:
        for i in range(3):
            shown(i)
        # Nothing commits on its own within this test: only the reads' flushes make the writes durable.
        seen["context"] = visible_context()
        shown(3)
        response = api.get(f"/api/sessions/{session.pk}/nodes/")
        seen["api"] = [node["name"] for node in response.json()]

    with process_writer.use_writer(group_commit.GroupWriter(batch_ms=FOREVER_MS)), recording(session):
        reader()
    assert all(f"shown(i={i})" in seen["context"] for i in range(3)), seen["context"]
    assert seen["api"] == ["reader", "shown", "shown", "shown", "shown"]


def test_a_terminal_status_is_written_after_every_node_of_the_run():
    with process_writer.use_writer(group_commit.GroupWriter(batch_ms=FOREVER_MS)):
        session = claimed_by("host-a:1")
        with use_recorder(DjangoRecorder(session, lease="host-a:1")):
            parent(3)
        assert write_path.finish_session(session.pk, "completed", lease="host-a:1")
    session.refresh_from_db()
    assert (session.status, session.node_count) == ("completed", 4)
    assert set(Node.objects.filter(session=session).values_list("status", flat=True)) == {"completed"}


# --- a crash: SIGKILL of a process with a batch in flight --------------------------------------------

def _holding_child(session: Session, durable: int, held: int, tmp_path: Path) -> subprocess.Popen:
    env = {**os.environ, "DATABASE_URL": database_url(connection.settings_dict), "PYTHONUNBUFFERED": "1",
           "DJANGO_SETTINGS_MODULE": "openprogram_web.settings", "OPENPROGRAM_VAR_DIR": str(tmp_path / "var"),
           "LOG_LEVEL": "WARNING"}
    env.pop("REDIS_URL", None)  # the child publishes to nobody
    return subprocess.Popen([sys.executable, "-m", "tests.web.recording.recording_child", str(session.pk),
                             str(durable), str(held)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=open(tmp_path / "child.log", "w"), text=True)


def _read_line(child: subprocess.Popen, timeout: float) -> str:
    with selectors.DefaultSelector() as selector:
        selector.register(child.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if selector.select(timeout=1):
                return child.stdout.readline()
    return ""


@pytest.mark.parametrize("recovery", ["restart", "reaper"])
def test_a_killed_process_loses_only_its_batch_in_flight_and_its_session_ends_interrupted(tmp_path, recovery):
    durable, held = 6, 5
    session = new_session()
    child_process = _holding_child(session, durable, held, tmp_path)
    try:
        line = _read_line(child_process, 120)
        assert line.strip() == "HOLDING", (tmp_path / "child.log").read_text()
        child_process.send_signal(signal.SIGKILL)
        child_process.wait(60)
    finally:
        if child_process.poll() is None:
            child_process.kill()

    if recovery == "restart":  # `make run` after the crash: this host's dead process's sessions end
        assert lifecycle.recover_at_start(in_process=True) >= 1
    else:  # another process's reaper, once the lease has expired
        assert reaper.reap(now=timezone.now() + timedelta(seconds=conf.LEASE_S + 60))
    session.refresh_from_db()
    nodes = list(Node.objects.filter(session=session).order_by("seq"))
    assert session.status == "interrupted"
    assert not [node for node in nodes if node.status == "running"]
    # The flushed calls are all there; the batch in flight is gone whole, none of its rows half-kept.
    assert [(node.name, node.status) for node in nodes] == (
        [("outer", "interrupted")] + [("step", "completed")] * durable)
    assert [node.input["i"] for node in nodes[1:]] == list(range(durable))
    assert [node.seq for node in nodes] == list(range(session.node_count))


def test_a_forked_child_makes_a_writer_of_its_own():
    parent = process_writer.process_writer()

    def whose() -> bytes:
        mine = process_writer.process_writer()
        return b"own" if mine is not parent and process_writer.process_writer() is mine else b"parent's"

    assert answer_from_a_fork(whose) == b"own"
    assert process_writer.process_writer() is parent


def test_a_call_that_ends_while_its_entry_is_queued_is_written_once_already_ended(published):
    gate = threading.Event()
    writer = group_commit.GroupWriter(batch_ms=0, batch_rows=1, capacity=4, gate=gate)
    session = new_session()
    writes = write_path.RunWrites(session.pk, writer=writer)
    try:
        writes.create(kind="code", name="held")
        assert writer.holding.wait(60)  # the writer holds the first batch: what follows stays queued
        leaf = writes.create(kind="code", name="leaf")
        writes.finish(leaf, status="completed")
        with writer._lock:
            assert len(writer._queue) == 1  # the exit went into the queued entry, not after it
    finally:
        gate.set()
    writes.flush()
    writer.stop()
    leaf_messages = [message["node"]["status"] for key, message in published
                     if key == str(session.pk) and message["node"]["name"] == "leaf"]
    assert leaf_messages == ["completed"]  # one insert, already ended: never published running
    assert Node.objects.get(session=session, name="leaf").status == "completed"


def test_a_batch_larger_than_one_insert_statement_is_written_whole_and_in_order(monkeypatch):
    # Seven rows per INSERT, as a SQLite build with a small parameter limit would allow, so a batch of
    # 40 calls spans several statements and a shorter last one.
    monkeypatch.setattr(sql, "_rows_per_insert", lambda connection: 7)
    monkeypatch.setattr(sql, "ROWS_PER_INSERT", 7)
    with process_writer.use_writer(group_commit.GroupWriter(batch_ms=FOREVER_MS, batch_rows=1000)):
        session = claimed_by("host:1")
        with recording(session) as recorder:
            parent(40)
            recorder.flush()
    rows = list(Node.objects.filter(session=session).order_by("seq").values_list("seq", "name", "status"))
    assert rows == [(0, "parent", "completed")] + [(i, "child", "completed") for i in range(1, 41)]
    assert [node.input for node in Node.objects.filter(session=session, name="child").order_by("seq")] == [
        {"i": i} for i in range(40)]


def test_batches_default_to_the_size_for_the_database_and_the_setting_overrides_it(settings):
    default = group_commit.BATCH_ROWS_BY_VENDOR[connection.vendor]
    assert group_commit.GroupWriter().batch_rows == default
    settings.OPENPROGRAM_WRITE_BATCH_ROWS = "37"
    assert group_commit.GroupWriter().batch_rows == 37
    assert group_commit.GroupWriter(batch_rows=5).batch_rows == 5


@pytest.mark.django_db(transaction=True)
def test_an_idle_writer_lets_go_of_its_connection_once_then_sleeps_until_a_write():
    class NotedCondition(threading.Condition):
        timeouts: list = []

        def wait(self, timeout=None):
            self.timeouts.append(timeout)
            return super().wait(timeout)

    writer = group_commit.GroupWriter(batch_ms=0)
    writer._not_empty = NotedCondition(writer._lock)
    with process_writer.use_writer(writer):
        session = new_session()
        writes = write_path.RunWrites(session.pk)
        writes.create(kind="code", name="step", status="running")
        writes.flush()
        deadline = time.monotonic() + 30  # a bound on a slow machine, not a measure
        while None not in NotedCondition.timeouts and time.monotonic() < deadline:
            time.sleep(0.01)
        # It lingered (a wait with a timeout), gave its connection back, and now waits for a write alone.
        assert None in NotedCondition.timeouts
        assert NotedCondition.timeouts.index(None) > 0 and NotedCondition.timeouts[0] is not None
        writes.create(kind="code", name="woken", status="running")
        writes.flush()  # the sleeping writer is woken by the write
    assert list(Node.objects.filter(session=session).values_list("name", flat=True).order_by("seq")) == ["step", "woken"]
