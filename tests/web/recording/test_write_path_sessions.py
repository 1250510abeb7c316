"""The write path's session changes: each one transaction, published after its commit, final once ended."""
import pytest

from dag.live import broadcast
from dag.models import Node, Session
from dag.recording import write_path
from dag.recording.write_path import sessions

from ..dag_helpers import new_session

pytestmark = pytest.mark.django_db


@pytest.fixture
def published():
    """(type, status) of every message published during the test (real commits: tests using it are
    marked `transaction=True`)."""
    received = []

    def listener(session_id, messages):
        received.extend((m["type"], (m.get("node") or m.get("session"))["status"]) for m in messages)

    broadcast.subscribe(listener)
    yield received
    broadcast.unsubscribe(listener)


def test_finish_closes_the_open_nodes_and_ends_the_session_in_one_transaction(monkeypatch):
    session = new_session(status="running")
    node = write_path.create_node(session.pk, kind="code", name="f")

    def broken_update(*args, **kwargs):
        raise RuntimeError("the database went away")

    monkeypatch.setattr(sessions, "update_session_in", broken_update)
    with pytest.raises(RuntimeError):
        write_path.finish_session(session.pk, Session.Status.CANCELLED, error="stopped")
    node.refresh_from_db()
    session.refresh_from_db()
    assert (node.status, session.status) == ("running", "running")  # neither half was kept


@pytest.mark.django_db(transaction=True)
def test_finish_publishes_the_closed_nodes_then_the_status_and_only_the_first_finish_wins(published):
    session = new_session(status="running")
    write_path.create_node(session.pk, kind="code", name="f")
    published.clear()
    assert write_path.finish_session(session.pk, Session.Status.CANCELLED, error="stopped") is True
    assert published == [("node", "cancelled"), ("session", "cancelled")]
    rev = Session.objects.get(pk=session.pk).rev
    assert write_path.finish_session(session.pk, Session.Status.COMPLETED, result="late") is False
    session.refresh_from_db()
    assert (session.status, session.result, session.rev) == ("cancelled", None, rev)
    assert published == [("node", "cancelled"), ("session", "cancelled")]  # the loser published nothing


def test_finish_takes_only_terminal_statuses():
    with pytest.raises(ValueError, match="terminal session status"):
        write_path.finish_session(new_session().pk, Session.Status.RUNNING)


def test_a_claim_moves_a_queued_session_to_running_once():
    session = new_session()
    claimed = write_path.claim_session(session.pk)
    assert claimed.status == "running" and claimed.started_at is not None and claimed.rev == 1
    assert write_path.claim_session(session.pk) is None  # a second delivery does not run it twice
    assert write_path.claim_session("00000000-0000-0000-0000-000000000000") is None


@pytest.mark.django_db(transaction=True)
def test_a_claim_of_a_stopped_queued_session_cancels_it_instead(published):
    session = new_session(cancel_requested=True)
    assert write_path.claim_session(session.pk) is None
    session.refresh_from_db()
    assert (session.status, session.error, session.started_at) == ("cancelled", write_path.STOPPED_BEFORE_START,
                                                                   None)
    assert published == [("session", "cancelled")]


@pytest.mark.django_db(transaction=True)
def test_a_stop_request_cancels_a_queued_session_and_flags_a_running_one(published):
    queued = write_path.record_stop_request(new_session().pk)
    assert (queued.status, queued.cancel_requested) == ("cancelled", True)
    running = new_session(status="running")
    flagged = write_path.record_stop_request(running.pk)
    assert (flagged.status, flagged.cancel_requested) == ("running", True)
    assert write_path.record_stop_request(running.pk).rev == flagged.rev  # asked twice: one change
    assert published == [("session", "queued"), ("session", "cancelled"), ("session", "running")]


def test_deleting_sessions_takes_their_nodes_along():
    session = new_session()
    write_path.create_node(session.pk, kind="code", name="f")
    assert write_path.delete_sessions([session.pk]) == 1
    assert not Session.objects.filter(pk=session.pk).exists()
    assert not Node.objects.filter(session_id=session.pk).exists()
