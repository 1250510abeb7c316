"""PostgreSQL: the writer stages its next batch while the server works on the current one.

Each test holds the writer at the moment it would stage (until the next batch is queued, or until the
test lets it go), so what is staged, and when, does not depend on the threads' timing.
"""
from __future__ import annotations

import threading

import pytest
from django.db import connection

from dag.models import Node
from dag.recording import write_path
from dag.recording.write_path import batch_writer, group_commit, process_writer
from dag.recording.write_path.write_transaction import WriteTransaction

from ..dag_helpers import claimed_by, parent, recording, write_waiting_for_room
from ..launch_helpers import wait_for

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.skipif(connection.vendor != "postgresql", reason="batches are staged on PostgreSQL")]

FOREVER_MS = 600_000  # a batch goes when it is full or flushed, never by its window


class StagingWatch:
    """Wraps the writer's staging: before staging, wait until a full batch is queued (until the test
    sets `all_queued`); after it, `staged` is set and the writer waits for `go`. Counts the batches
    taken while another was on the server, and those written as they were staged then."""

    def __init__(self, monkeypatch, writer: group_commit.GroupWriter, go: threading.Event, *,
                 before_sending: bool = False):
        self.staged, self.all_queued = threading.Event(), threading.Event()
        self.took = self.written_staged = 0
        batches = writer._batches
        stage_next, write_parts = batches._stage_next, batch_writer.write_parts

        def watched_stage_next(tx, take_next, first, in_flight) -> None:
            wait_for(lambda: len(writer._queue) >= writer.batch_rows or self.all_queued.is_set(), 60,
                     "the next batch to be queued")
            stage_next(tx, take_next, first, in_flight)
            self.took += batches.upcoming is not None
            self.staged.set()
            assert go.wait(60)

        def counted_write_parts(*args, staged=None, **kwargs):
            self.written_staged += staged is not None
            return write_parts(*args, staged=staged, **kwargs)

        monkeypatch.setattr(batches, "_stage_next", watched_stage_next)
        monkeypatch.setattr(batch_writer, "write_parts", counted_write_parts)
        if before_sending:
            # Stage before the statements go: a batch that fails can fail as they are sent (the server
            # says so at once), before the staging would have had its turn.
            fetch_all = WriteTransaction.fetch_all

            def staging_first(tx, statements, *, commit=False, meanwhile=None):
                if meanwhile is not None:
                    meanwhile()
                return fetch_all(tx, statements, commit=commit)

            monkeypatch.setattr(WriteTransaction, "fetch_all", staging_first)


def test_batches_staged_ahead_keep_a_runs_rows_whole_and_in_order(monkeypatch, published):
    writer = group_commit.GroupWriter(batch_ms=FOREVER_MS, batch_rows=10)
    go = threading.Event()
    go.set()
    watch = StagingWatch(monkeypatch, writer, go)
    session = claimed_by("host:1")
    with process_writer.use_writer(writer), recording(session) as recorder:
        parent(60)
        watch.all_queued.set()
        recorder.flush()
    assert watch.written_staged >= 1  # batches went as they were staged, not staged again
    session.refresh_from_db()
    nodes = list(Node.objects.filter(session=session).order_by("seq"))
    assert [node.seq for node in nodes] == list(range(61)) == list(range(session.node_count))
    assert {node.status for node in nodes} == {"completed"}
    assert [node.output for node in nodes[1:]] == list(range(60))
    revs = [message["rev"] for key, message in published if key == str(session.pk)]
    assert revs == list(range(1, session.rev + 1))  # published in order, none skipped
    assert sorted(node.rev for node in nodes) == sorted(set(node.rev for node in nodes))
    last = {message["node"]["id"]: message["node"] for key, message in published
            if key == str(session.pk) and message["type"] == "node"}
    assert {node.id: (node.seq, node.rev, node.status) for node in nodes} == {
        pk: (record["seq"], record["rev"], record["status"]) for pk, record in last.items()}


def test_a_batch_staged_before_its_sessions_write_failed_is_staged_again_without_it(monkeypatch, published):
    # Batch 1 holds a node whose name PostgreSQL refuses (varchar(200)): session A's part fails, B's
    # goes (written again alone). Batch 2 was staged during batch 1 with A's next write in it and the
    # exit of B's b2, which batch 1 creates. A's writes after its failure must not be written, so
    # batch 2 is staged again without them; and b2 goes in as batch 1 wrote it, running, then ends.
    writer = group_commit.GroupWriter(batch_ms=FOREVER_MS, batch_rows=3)
    go = threading.Event()
    go.set()
    watch = StagingWatch(monkeypatch, writer, go, before_sending=True)
    bad, good = claimed_by("host:a"), claimed_by("host:b")
    a = write_path.RunWrites(bad.pk, lease="host:a", writer=writer)
    b = write_path.RunWrites(good.pk, lease="host:b", writer=writer)
    a.create(kind="code", name="x" * 300)  # batch 1
    b1 = b.create(kind="code", name="b1")
    b.finish(b1, status="completed")  # while b1 is queued: it goes in once, already ended
    b2 = b.create(kind="code", name="b2")
    wait_for(lambda: not writer._queue, 60, "batch 1 to be taken")  # so b2's exit is a write of its own
    a.create(kind="code", name="a2")  # batch 2, queued while batch 1 is on the server
    b.finish(b2, status="completed", output="two")
    b3 = b.create(kind="code", name="b3")
    assert watch.staged.wait(60)  # batch 2 taken and staged: b3's exit is a write of its own too
    b.finish(b3, status="completed")
    watch.all_queued.set()
    b.flush()
    writer.stop()
    assert watch.took >= 1  # batch 2 was taken (and staged) while batch 1 was on the server
    assert not Node.objects.filter(session=bad).exists()
    rows = list(Node.objects.filter(session=good).order_by("seq").values_list("seq", "name", "status", "output"))
    assert rows == [(0, "b1", "completed", None), (1, "b2", "completed", "two"), (2, "b3", "completed", None)]
    assert [message["node"]["status"] for key, message in published
            if key == str(good.pk) and message["type"] == "node" and message["node"]["name"] == "b2"] == [
        "running", "completed"]
    with pytest.raises(Exception, match="value too long"):
        a.create(kind="code", name="a3")  # the run learns of its failed write at its next one


def test_a_batch_staged_before_its_sessions_part_was_refused_is_staged_again_without_it(monkeypatch):
    # Session A's lease is another worker's when batch 1 goes, so its part is refused; while batch 2
    # (with A's next write) waits staged, A's lease is cleared, which the fence alone would let pass.
    writer = group_commit.GroupWriter(batch_ms=FOREVER_MS, batch_rows=2)
    go = threading.Event()
    watch = StagingWatch(monkeypatch, writer, go)
    taken, other = claimed_by("host:a"), claimed_by("host:b")
    write_path.update_session(taken.pk, worker="host:elsewhere")
    a = write_path.RunWrites(taken.pk, lease="host:a", writer=writer)
    b = write_path.RunWrites(other.pk, lease="host:b", writer=writer)
    try:
        a.create(kind="code", name="a1")  # batch 1
        b.create(kind="code", name="b1")
        a.create(kind="code", name="a2")  # batch 2
        b.create(kind="code", name="b2")
        assert watch.staged.wait(60)
        # Batch 1's statements are sent, not yet done: once its row of B is there, it has committed
        # (its refusal of A included).
        wait_for(lambda: Node.objects.filter(session=other, name="b1").exists(), 60, "batch 1 to commit")
        write_path.update_session(taken.pk, worker="")
    finally:
        go.set()
    watch.all_queued.set()
    b.flush()
    writer.stop()
    assert watch.took >= 1
    assert not Node.objects.filter(session=taken).exists()
    assert list(Node.objects.filter(session=other).order_by("seq").values_list("name", flat=True)) == ["b1", "b2"]
    with pytest.raises(write_path.WriteRefused):
        a.create(kind="code", name="a3")


def test_a_staged_batch_still_counts_against_the_queues_room(monkeypatch):
    """While batch 2 waits staged beside batch 1 on the server, the queue has no room: a crash loses at
    most those two batches, as without staging."""
    writer = group_commit.GroupWriter(batch_ms=FOREVER_MS, batch_rows=2, capacity=2)
    go = threading.Event()
    watch = StagingWatch(monkeypatch, writer, go)
    session = claimed_by("host:1")
    writes = write_path.RunWrites(session.pk, lease="host:1", writer=writer)
    try:
        for name in ("n0", "n1", "n2", "n3"):  # batch 1, then batch 2
            writes.create(kind="code", name=name)
        assert watch.staged.wait(60)  # batch 2 is staged; the queue itself is empty
        late = write_waiting_for_room(writer, writes, "n4")
    finally:
        go.set()
    late.join(60)
    assert not late.is_alive()
    watch.all_queued.set()
    writes.flush()
    writer.stop()
    assert list(Node.objects.filter(session=session).order_by("seq").values_list("name", flat=True)) == [
        "n0", "n1", "n2", "n3", "n4"]
