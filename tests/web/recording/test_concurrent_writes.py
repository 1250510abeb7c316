"""Many threads recording into one session: seq stays gap-free and revisions stay unique and increasing."""
import threading

import pytest
from django.db import connections

from dag.live import broadcast
from dag.models import Node, Session
from dag.recording import write_path
from dag.recording.recorder import DjangoRecorder
from runtime import agentic_function, use_recorder

from ..dag_helpers import new_session

pytestmark = pytest.mark.django_db(transaction=True)

THREADS = 8
ROUNDS = 5
CHILDREN = 3


@pytest.fixture
def published():
    received = []  # list.append is atomic, so listeners on many threads may share it

    def listener(session_id, messages):
        received.extend((threading.get_ident(), message) for message in messages)

    broadcast.subscribe(listener)
    yield received
    broadcast.unsubscribe(listener)


def _in_threads(work, count=THREADS):
    """Run `work(index)` on `count` threads started together; re-raise the first failure."""
    start = threading.Barrier(count)
    failures = []

    def main(index):
        try:
            start.wait()
            work(index)
        except BaseException as exc:  # reported below, on the test's thread
            failures.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=main, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]


def _tree():
    @agentic_function
    def child(i: int) -> int:
        return i

    @agentic_function
    def parent(thread: int) -> int:
        return sum(child(i) for i in range(CHILDREN))

    return parent


def test_eight_threads_keep_seq_gap_free_and_revisions_unique_and_monotonic(published):
    session = new_session()
    recorder = DjangoRecorder(session)  # shared, as the threads of one run share it
    parent = _tree()

    def work(index):
        with use_recorder(recorder):
            for _ in range(ROUNDS):
                parent(index)

    _in_threads(work)
    recorder.flush()  # the writes are committed in batches; the test reads what a run would have flushed

    total = THREADS * ROUNDS * (1 + CHILDREN)
    nodes = list(Node.objects.filter(session=session).order_by("seq"))
    assert [n.seq for n in nodes] == list(range(total))
    assert all(n.status == "completed" for n in nodes)
    session.refresh_from_db()
    # An entry and an exit per call, or one change for a call that started and ended in one batch.
    assert session.node_count == total and total <= session.rev <= 2 * total

    revs = [message["rev"] for _, message in published]
    assert sorted(revs) == list(range(1, session.rev + 1))  # every revision once, none skipped
    for thread in {ident for ident, _ in published}:
        mine = [message["rev"] for ident, message in published if ident == thread]
        assert mine == sorted(mine), "a listener saw revisions go backwards"
    created = {m["node"]["id"]: m["rev"] for _, m in published if m["node"]["status"] == "running"}
    finished = {m["node"]["id"]: m["rev"] for _, m in published if m["node"]["status"] == "completed"}
    assert set(finished) == {n.id for n in nodes}
    assert all(created[node_id] < finished[node_id] for node_id in created)
    # seq follows creation order, and the revisions of nodes written running follow seq
    assert [created[n.id] for n in nodes if n.id in created] == sorted(created.values())
    children = [n for n in nodes if n.name == "child"]
    by_id = {n.id: n for n in nodes}
    assert all(by_id[c.parent_id].name == "parent" and c.seq > by_id[c.parent_id].seq for c in children)


def test_closing_open_nodes_while_threads_write_never_reopens_a_closed_node(published):
    session = new_session()

    @agentic_function
    def child(i: int, stopper: bool) -> int:
        if stopper and i == 1:  # a stop lands mid-run: it closes this very call and its caller too
            write_path.close_open_nodes(session.id, "cancelled", error="stop")
        return i

    @agentic_function
    def parent(thread: int) -> int:
        return sum(child(i, thread == 0) for i in range(CHILDREN))

    def work(index):
        with use_recorder(DjangoRecorder(session)):
            for _ in range(ROUNDS):
                parent(index)

    _in_threads(work)
    write_path.flush_session(session.id)

    nodes = Node.objects.filter(session=session)
    assert set(nodes.values_list("status", flat=True)) <= {"completed", "cancelled"}
    assert not nodes.filter(status="cancelled").exclude(error="stop").exists()
    assert nodes.filter(status="cancelled", name="parent").count() >= ROUNDS  # the stopper's own calls
    history = {}
    for message in sorted((m for _, m in published), key=lambda m: m["rev"]):
        history.setdefault(message["node"]["id"], []).append(message["node"]["status"])
    for statuses in history.values():
        # opened once and ended once, or written once already ended (both within one batch)
        assert statuses[-1] != "running" and statuses[:-1] in ([], ["running"]), statuses
    revs = [m["rev"] for _, m in published]
    assert sorted(revs) == list(range(1, len(revs) + 1))
    assert Session.objects.get(pk=session.pk).rev == len(revs)
    assert list(nodes.order_by("seq").values_list("seq", flat=True)) == list(range(nodes.count()))


def test_reserved_node_ids_are_never_given_twice_to_reserving_threads_or_the_orm():
    from dag.recording.write_path import sql
    from dag.recording.write_path.write_transaction import WriteTransaction

    session = new_session()
    blocks = [[] for _ in range(THREADS)]

    def work(index):
        for _ in range(ROUNDS):
            with WriteTransaction() as tx:
                blocks[index].append(sql.reserve_node_ids(tx, 7))
            # An ordinary insert between reservations takes its id from the same sequence.
            Node.objects.create(session=session, seq=1000 * index + len(blocks[index]), kind="code", name="orm")

    _in_threads(work)
    reserved = [pk for mine in blocks for block in mine for pk in block]
    assert all(len(block) == 7 and block == sorted(block) for mine in blocks for block in mine)
    assert all(later[0] > earlier[-1] for mine in blocks for earlier, later in zip(mine, mine[1:]))
    by_orm = list(Node.objects.filter(session=session).values_list("pk", flat=True))
    assert len(by_orm) == THREADS * ROUNDS
    assert len(set(reserved) | set(by_orm)) == len(reserved) + len(by_orm)
