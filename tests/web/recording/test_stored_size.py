"""A session's stored size (`Session.stored_bytes`): measured by the write path when the session ends,
so the per-user storage limit adds up sessions instead of reading every node its owner ever recorded.
It is measured once the end has committed: these tests commit, as a run does."""
import importlib
import logging
from datetime import timedelta

import pytest
from django.apps import apps
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from dag.live import broadcast
from dag.models import Node, Session
from dag.recording import write_path
from dag.recording.export import export_session, import_session
from dag.runs import quotas
from dag.stored_size import session_bytes

from ..dag_helpers import new_session

pytestmark = pytest.mark.django_db(transaction=True)

NODE_TABLE = Node._meta.db_table


def recorded(owner=None, *, nodes: int = 3, end: str | None = Session.Status.COMPLETED) -> Session:
    """A session with `nodes` finished nodes, written through the write path; ended `end` unless None."""
    fields = {"function": "entry", "args": {"topic": "t" * 100}}
    session = (Session.objects.create(owner=owner, **fields) if owner is not None else new_session(**fields))
    write_path.set_session_status(session.pk, Session.Status.RUNNING)
    for index in range(nodes):
        node = write_path.create_node(session.pk, kind="code", name="step", input={"i": index, "note": "n" * 50})
        write_path.finish_node(node, status=Node.Status.COMPLETED, output="o" * 200)
    if end is not None:
        write_path.finish_session(session.pk, end, result={"summary": "s" * 300})
    return Session.objects.get(pk=session.pk)


def node_queries(captured) -> list[dict]:
    return [query for query in captured.captured_queries if NODE_TABLE in query["sql"]]


def test_a_session_is_measured_when_it_ends_and_not_before():
    running = recorded(end=None)
    assert running.stored_bytes is None
    write_path.finish_session(running.pk, Session.Status.COMPLETED, result={"summary": "s" * 300})
    ended = Session.objects.get(pk=running.pk)
    # Three nodes of a 50-character note and a 200-character output, 100 + 300 characters of its own.
    assert ended.stored_bytes == session_bytes(ended.pk)
    assert 3 * 250 + 400 <= ended.stored_bytes < 3 * 250 + 400 + 120


def test_a_run_s_end_is_committed_and_published_before_its_nodes_are_read_for_its_size(monkeypatch):
    # Measuring reads every node of the session: the end of a long run must not wait for it, nor hold
    # the session's lock meanwhile.
    session = recorded(end=None)
    seen: list[tuple[str, object]] = []

    def listener(session_id, messages):
        seen.extend(("published", message["session"]["status"]) for message in messages
                    if message["type"] == "session")

    def measured(session_id):
        seen.append(("measured", Session.objects.get(pk=session_id).status))  # read from another snapshot
        return session_bytes(session_id)

    monkeypatch.setattr("dag.recording.write_path.sessions.session_bytes", measured)
    broadcast.subscribe(listener)
    try:
        write_path.finish_session(session.pk, Session.Status.COMPLETED)
    finally:
        broadcast.unsubscribe(listener)
    assert seen == [("published", "completed"), ("measured", "completed")]
    assert Session.objects.get(pk=session.pk).stored_bytes == session_bytes(session.pk)


def test_a_size_that_cannot_be_measured_leaves_the_end_standing_and_the_limit_measures_it(monkeypatch, caplog):
    session = recorded(end=None)

    def failing(session_id):
        raise RuntimeError("the database went away")

    monkeypatch.setattr("dag.recording.write_path.sessions.session_bytes", failing)
    with caplog.at_level(logging.WARNING, logger="dag.recording.write_path.sessions"):
        assert write_path.finish_session(session.pk, Session.Status.COMPLETED) is True
    ended = Session.objects.get(pk=session.pk)
    assert ended.status == Session.Status.COMPLETED and ended.stored_bytes is None
    assert f"session {session.pk} could not be measured" in caplog.text
    assert quotas.stored_bytes(ended.owner) == session_bytes(session.pk) > 3 * 250


def test_error_texts_count_as_what_a_session_holds():
    # An exception's message is kept whole: a run raising megabytes of text must not go uncounted.
    session = recorded(nodes=1, end=None)
    before = session_bytes(session.pk)
    node = write_path.create_node(session.pk, kind="code", name="failing")
    write_path.finish_node(node, status=Node.Status.ERROR, error="e" * 5_000)
    write_path.finish_session(session.pk, Session.Status.ERROR, error="E" * 7_000)
    assert session_bytes(session.pk) == before + 12_000
    assert Session.objects.get(pk=session.pk).stored_bytes == before + 12_000


def test_the_storage_check_reads_the_nodes_of_unfinished_sessions_only():
    ended = recorded(nodes=20)
    running = recorded(ended.owner, nodes=2, end=None)
    with CaptureQueriesContext(connection) as captured:
        total = quotas.stored_bytes(ended.owner)
    assert total == ended.stored_bytes + session_bytes(running.pk)
    [query] = node_queries(captured)  # one read of nodes, of the running session's
    assert running.pk.hex in query["sql"].replace("-", "") and ended.pk.hex not in query["sql"].replace("-", "")

    write_path.finish_session(running.pk, Session.Status.CANCELLED)
    with CaptureQueriesContext(connection) as captured:
        total = quotas.stored_bytes(ended.owner)
    assert total == ended.stored_bytes + Session.objects.get(pk=running.pk).stored_bytes
    assert node_queries(captured) == []  # every session ended: no node is read at all


def test_an_edit_of_an_ended_session_measures_it_again():
    session = recorded()
    write_path.update_session(session.pk, result="r" * 5_000)
    edited = Session.objects.get(pk=session.pk)
    assert edited.stored_bytes == session_bytes(session.pk) > session.stored_bytes + 4_000
    write_path.update_session(session.pk, budget_spend={"llm_calls": 1})  # not a measured field
    assert Session.objects.get(pk=session.pk).stored_bytes == edited.stored_bytes


def test_a_session_written_off_by_the_reaper_is_measured_with_its_closed_nodes():
    now = timezone.now() + timedelta(days=365)
    session = new_session(args={"n": 1})
    write_path.claim_session(session.pk, worker="host-a:1", now=now)
    write_path.create_node(session.pk, kind="code", name="step", input={"text": "x" * 1_000})
    assert write_path.end_expired_lease(session.pk, lease_s=15, now=now + timedelta(seconds=16))
    ended = Session.objects.get(pk=session.pk)
    assert ended.status == Session.Status.INTERRUPTED
    assert ended.stored_bytes == session_bytes(session.pk) > 1_000


def test_an_imported_session_is_measured():
    original = recorded()
    copy = import_session(export_session(original), new_session().owner)
    assert copy.stored_bytes == session_bytes(copy.pk) == original.stored_bytes


def test_the_migration_measures_the_sessions_that_had_ended():
    migration = importlib.import_module("dag.migrations.0007_session_stored_bytes")
    ended, running = recorded(), recorded(end=None)
    empty = new_session(status=Session.Status.ERROR, args={"a": 1})
    Session.objects.filter(pk__in=[ended.pk, running.pk, empty.pk]).update(stored_bytes=None)  # as before it
    migration.measure_ended_sessions(apps, None)
    sizes = dict(Session.objects.filter(pk__in=[ended.pk, running.pk, empty.pk]).values_list("pk", "stored_bytes"))
    assert sizes == {ended.pk: session_bytes(ended.pk), running.pk: None, empty.pk: session_bytes(empty.pk)}
    assert sizes[empty.pk] > 0  # a session without nodes counts its own arguments
