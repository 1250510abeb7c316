"""Session and Node, and dag.recording.write_path: the one path that writes them, bumps `rev` and publishes."""
from datetime import timedelta

import pytest
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from dag.models import Node, Session
from dag.recording import write_path
from dag.recording.write_path import nodes as write_nodes
from dag.recording.write_path import sql as write_sql

from ..dag_helpers import new_session

pytestmark = pytest.mark.django_db

SESSION_KEYS = {"id", "function", "args", "status", "phase", "result", "error", "cancel_requested", "attended",
                "pause_requested", "budget", "budget_spend", "launch_budget", "model", "rev", "node_count", "created_at", "started_at",
                "finished_at", "worker", "replay_of", "forked_from"}
NODE_KEYS = {"id", "seq", "parent", "kind", "name", "status", "depth", "name_depth", "expose", "render_range",
             "doc", "input", "output", "error", "traceback", "refusal", "model", "usage", "rev", "replayed",
             "started_at", "finished_at", "duration_ms"}



def test_as_dict_shapes_are_the_ones_the_api_and_stream_use():
    session = new_session(args={"topic": "cats"})
    node = write_path.create_node(session.id, kind="code", name="f")
    assert set(session.as_dict()) == SESSION_KEYS
    assert set(node.as_dict()) == NODE_KEYS
    assert session.as_dict()["id"] == str(session.id) and session.as_dict()["args"] == {"topic": "cats"}


def test_the_phase_is_cancelling_only_between_a_stop_request_and_the_end():
    assert [Session(status=status, cancel_requested=asked).as_dict()["phase"]
            for status, asked in [("queued", False), ("running", True), ("cancelled", True), ("completed", True)]
            ] == ["queued", "cancelling", "cancelled", "completed"]


def test_duration_is_known_once_a_node_has_finished():
    start = timezone.now()
    node = Node(started_at=start)
    assert node.duration_ms is None
    node.finished_at = start + timedelta(milliseconds=1500)
    assert node.duration_ms == 1500


def test_create_node_allocates_gap_free_seq_and_a_new_revision_each(django_capture_on_commit_callbacks,
                                                                    published):
    session = new_session()
    with django_capture_on_commit_callbacks(execute=True):
        nodes = [write_path.create_node(session.id, kind="code", name=f"f{i}") for i in range(4)]
    assert [(n.seq, n.rev) for n in nodes] == [(0, 1), (1, 2), (2, 3), (3, 4)]
    session.refresh_from_db()
    assert (session.node_count, session.rev) == (4, 4)
    assert [(sid, m["type"], m["rev"], m["node"]["seq"]) for sid, m in published] == [
        (str(session.id), "node", rev, rev - 1) for rev in range(1, 5)]


def test_messages_are_published_only_after_the_commit(django_capture_on_commit_callbacks, published):
    session = new_session()
    with django_capture_on_commit_callbacks() as callbacks:
        write_path.create_node(session.id, kind="code", name="f")
        assert published == []
    assert len(callbacks) == 1
    callbacks[0]()
    assert published[0][1]["node"]["name"] == "f"


def test_seq_is_unique_per_session():
    session = new_session()
    node = write_path.create_node(session.id, kind="code", name="f")
    with pytest.raises(IntegrityError), transaction.atomic():
        Node.objects.create(session=session, seq=node.seq, kind="code", name="copy")
    other = new_session()
    assert write_path.create_node(other.id, kind="code", name="g").seq == 0


def test_finish_node_backfills_in_memory_and_in_the_database():
    session = new_session()
    node = write_path.create_node(session.id, kind="code", name="f")
    assert write_path.finish_node(node, status="completed", output={"answer": 42}) is True
    stored = Node.objects.get(pk=node.pk)
    assert (stored.status, stored.output, stored.rev) == ("completed", {"answer": 42}, 2)
    assert (node.status, node.rev, node.finished_at) == ("completed", 2, stored.finished_at)


def test_a_late_backfill_never_reopens_or_overwrites_an_ended_node():
    session = new_session()
    node = write_path.create_node(session.id, kind="code", name="f")
    assert write_path.close_open_nodes(session.id, "cancelled", error="stopped") == 1
    rev_after_close = Session.objects.get(pk=session.pk).rev
    assert write_path.finish_node(node, status="completed", output="late") is False
    stored = Node.objects.get(pk=node.pk)
    assert (stored.status, stored.output, stored.error) == ("cancelled", None, "stopped")
    assert Session.objects.get(pk=session.pk).rev == rev_after_close  # the dropped write used no revision


def test_close_open_nodes_gives_each_closed_node_its_own_revision(django_capture_on_commit_callbacks,
                                                                  published):
    session = new_session()
    done = write_path.create_node(session.id, kind="code", name="done")
    write_path.finish_node(done, status="completed")
    write_path.create_node(session.id, kind="code", name="a", parent_id=done.id)
    write_path.create_node(session.id, kind="llm", name="llm")
    with django_capture_on_commit_callbacks(execute=True):
        assert write_path.close_open_nodes(session.id, "interrupted", error="worker died") == 2
        assert write_path.close_open_nodes(session.id) == 0
    rows = list(Node.objects.filter(session=session).order_by("seq").values_list("name", "status", "rev", "error"))
    assert rows == [("done", "completed", 2, ""), ("a", "interrupted", 5, "worker died"),
                    ("llm", "interrupted", 6, "worker died")]
    assert [m["rev"] for _, m in published] == [5, 6]
    assert Session.objects.get(pk=session.pk).rev == 6


def test_the_nodes_a_sessions_end_closes_are_read_through_the_index_of_running_nodes():
    session = new_session()
    Node.objects.bulk_create([Node(session=session, seq=seq, kind="code", name="done", status="completed", rev=seq)
                              for seq in range(200)])
    open_node = Node.objects.create(session=session, seq=200, kind="code", name="open", status="running", rev=200)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":  # a table this small is read whole otherwise, index or not
            cursor.execute("SET LOCAL enable_seqscan = off")
        plan = write_nodes.running_nodes(session.id).explain()
    assert "node_running_per_session" in plan
    assert list(write_nodes.running_nodes(session.id)) == [open_node]


def test_close_open_nodes_only_accepts_a_final_status():
    session = new_session()
    with pytest.raises(ValueError, match="must be a final node status"):
        write_path.close_open_nodes(session.id, "running")


def test_session_status_moves_forward_and_a_terminal_status_is_final():
    session = new_session()
    assert write_path.set_session_status(session.id, "running") is True
    started = Session.objects.get(pk=session.pk).started_at
    assert started is not None
    assert write_path.set_session_status(session.id, "running") is True
    assert Session.objects.get(pk=session.pk).started_at == started  # the first start is kept
    assert write_path.set_session_status(session.id, "cancelled", error="stopped by alice") is True
    assert write_path.set_session_status(session.id, "completed", result={"late": True}) is False
    stored = Session.objects.get(pk=session.pk)
    assert (stored.status, stored.result, stored.error, stored.rev) == ("cancelled", None, "stopped by alice", 3)
    assert stored.finished_at is not None


def test_session_results_are_made_json_safe(django_capture_on_commit_callbacks, published):
    session = new_session()
    with django_capture_on_commit_callbacks(execute=True):
        assert write_path.set_session_status(session.id, "completed", result={"items": {3, 1, 2}, "x": b"ab"})
    assert Session.objects.get(pk=session.pk).result == {"items": [1, 2, 3], "x": "<bytes: 2 bytes>"}
    [(_, message)] = published
    assert (message["type"], message["rev"], message["session"]["status"]) == ("session", 1, "completed")


def test_set_session_status_names_the_allowed_statuses():
    session = new_session()
    with pytest.raises(ValueError, match="queued, running, completed, error, cancelled, interrupted"):
        write_path.set_session_status(session.id, "done")


def test_update_session_unless_terminal_leaves_ended_sessions_alone():
    session = new_session(status="completed")
    assert write_path.update_session(session.id, unless_terminal=True, cancel_requested=True) is None
    updated = write_path.update_session(session.id, model="sim-2")
    assert (updated.model, updated.rev) == ("sim-2", 1)


def test_revisions_without_update_returning_read_the_counter_back(monkeypatch):
    monkeypatch.setattr(write_sql, "RETURNING_VENDORS", frozenset())
    session = new_session()
    nodes = [write_path.create_node(session.id, kind="code", name="f") for _ in range(3)]
    assert [(n.seq, n.rev) for n in nodes] == [(0, 1), (1, 2), (2, 3)]


def test_writing_to_a_missing_session_names_it():
    session = new_session()
    session_id = session.id
    session.delete()
    with pytest.raises(Session.DoesNotExist, match=str(session_id)):
        write_path.create_node(session_id, kind="code", name="f")
