"""Stopping runs: before they start, while they run (in this process or from another), after they end."""
from __future__ import annotations

import threading

import pytest
from rest_framework.test import APIClient

from dag.models import Node, Session
from dag.recording import write_path
from dag.runs import lifecycle, stop
from dag.runs.launch import launch
from runtime import interrupt
from runtime.hooks import installed_hooks

from ..launch_helpers import SLEEPING_CHECKS, wait_for, wait_for_end


@pytest.fixture
def api(user):
    client = APIClient()
    client.force_authenticate(user)
    return client


def nodes_of(session):
    return list(Node.objects.filter(session=session).order_by("seq"))


def started_counting(session, steps: int = 2):
    def counting():
        session.refresh_from_db()
        assert not session.is_terminal, f"the run ended before it was stopped: {session.status} {session.error}"
        return Node.objects.filter(session=session, name="count_step").count() >= steps
    return wait_for(counting, what="slow_count to make its first child calls")


def assert_nothing_left_running(session):
    assert not Node.objects.filter(session=session, status="running").exists()


# --- before the run starts ---------------------------------------------------------------------

@pytest.mark.django_db
def test_stop_before_start_cancels_at_once_and_the_run_never_starts(api, user):
    session = Session.objects.create(owner=user, function="slow_count", args={"n": 3, "delay_s": 0})
    body = api.post(f"/api/sessions/{session.pk}/stop/").json()
    assert body["status"] == "cancelled" and body["cancel_requested"] is True
    lifecycle.run_session(session.pk)  # a worker picking it up later does nothing
    session.refresh_from_db()
    assert session.status == "cancelled" and session.started_at is None
    assert nodes_of(session) == []


@pytest.mark.django_db
def test_a_queued_session_with_a_persisted_stop_is_cancelled_when_picked_up(user):
    # The flag was written (e.g. by another process) while the session was still queued.
    session = Session.objects.create(owner=user, function="slow_count", args={"n": 3, "delay_s": 0},
                                     cancel_requested=True)
    lifecycle.run_session(session.pk)
    session.refresh_from_db()
    assert session.status == "cancelled" and session.error == write_path.STOPPED_BEFORE_START
    assert nodes_of(session) == []


# --- while it runs -----------------------------------------------------------------------------------

@pytest.mark.django_db
def test_stop_between_claim_and_first_call_is_not_lost(user, test_functions, monkeypatch):
    # The stop lands after the run claimed the session (running) but before its signal exists, so
    # signalling it in this process finds nothing; the persisted flag must still stop the first call.
    session = Session.objects.create(owner=user, function="echo", args={"text": "hi"})
    claim = write_path.claim_session

    def claim_then_stop(session_id, **lease):
        claimed = claim(session_id, **lease)
        assert lifecycle.request_stop(session_id).status == "running"
        return claimed

    monkeypatch.setattr(write_path, "claim_session", claim_then_stop)
    lifecycle.run_session(session.pk)
    session.refresh_from_db()
    assert session.status == "cancelled" and session.result is None
    assert_nothing_left_running(session)


@pytest.mark.django_db(transaction=True)
def test_stop_during_a_run_cancels_it_and_every_open_node(api, user):
    # Long steps, so the stop lands inside one rather than in the instant between two (where no
    # count_step would be open and the last one would have completed).
    session = launch(user, "slow_count", {"n": 200, "delay_s": 5})
    started_counting(session, steps=1)
    body = api.post(f"/api/sessions/{session.pk}/stop/").json()
    assert body["cancel_requested"] is True
    wait_for_end(session)
    assert session.status == "cancelled" and "stopped" in session.error
    nodes = nodes_of(session)
    assert nodes[0].name == "slow_count" and nodes[0].status == "cancelled"
    assert nodes[-1].status == "cancelled"  # the count_step it was in
    assert all(node.status in ("completed", "cancelled") for node in nodes)
    assert len(nodes) < 201  # it did not count to the end
    assert_nothing_left_running(session)


@pytest.mark.django_db(transaction=True)
def test_stop_requested_in_another_process_is_seen_through_the_database(user):
    session = launch(user, "slow_count", {"n": 200, "delay_s": 0.05})
    started_counting(session)
    # Only the row changes, as when the stop request reached another server process.
    write_path.update_session(session.pk, cancel_requested=True)
    wait_for_end(session)
    assert session.status == "cancelled"
    assert_nothing_left_running(session)


@pytest.mark.django_db(transaction=True)
def test_a_late_completion_never_overwrites_cancelled(user):
    session = launch(user, "slow_count", {"n": 200, "delay_s": 0.05})
    started_counting(session)
    lifecycle.request_stop(session.pk)
    wait_for_end(session)
    assert write_path.finish_session(session.pk, Session.Status.COMPLETED, result=200) is False
    session.refresh_from_db()
    assert session.status == "cancelled" and session.result is None


@pytest.mark.django_db(transaction=True)
def test_stop_only_stops_its_own_run(user):
    stopped = launch(user, "slow_count", {"n": 200, "delay_s": 0.05})
    other = launch(user, "slow_count", {"n": 4, "delay_s": 0.05})
    started_counting(stopped)
    lifecycle.request_stop(stopped.pk)
    assert wait_for_end(stopped).status == "cancelled"
    assert wait_for_end(other).status == "completed" and other.result == 4


@pytest.mark.django_db(transaction=True)
def test_process_shutdown_interrupts_local_runs(user):
    session = launch(user, "slow_count", {"n": 200, "delay_s": 0.05})
    started_counting(session)
    assert stop.stop_local_runs() >= 1
    wait_for_end(session)
    assert session.status == "interrupted" and "shutting down" in session.error
    assert_nothing_left_running(session)


# --- after it ended ------------------------------------------------------------------------------

@pytest.mark.django_db(transaction=True)
def test_stop_after_finish_changes_nothing(api, user):
    session = launch(user, "slow_count", {"n": 2, "delay_s": 0})
    wait_for_end(session)
    before = session.as_dict()
    answer = api.post(f"/api/sessions/{session.pk}/stop/").json()  # the session and its run summary
    assert {key: answer[key] for key in before} == before and answer["counts"] == {"completed": 3}
    session.refresh_from_db()
    assert session.as_dict() == before and session.status == "completed" and session.result == 2


@pytest.mark.django_db(transaction=True)
def test_other_user_cannot_stop_a_run(user, other_user):
    session = launch(user, "slow_count", {"n": 6, "delay_s": 0.05})
    intruder = APIClient()
    intruder.force_authenticate(other_user)
    assert intruder.post(f"/api/sessions/{session.pk}/stop/").status_code == 404
    assert wait_for_end(session).status == "completed" and session.cancel_requested is False


# --- the hook and the signal ------------------------------------------------------------------------

@pytest.mark.django_db
def test_hook_acts_only_inside_a_watched_run():
    from runtime import CancelledError, agentic_function

    @agentic_function
    def step() -> str:
        """One step."""
        return "ran"

    outcomes = []

    def call_step():
        try:
            outcomes.append(step())
        except BaseException as exc:
            outcomes.append(exc)

    with stop.watch("11111111-1111-1111-1111-111111111111") as signal:
        assert step() == "ran"
        signal.set()
        outside = threading.Thread(target=call_step)  # a thread without the run's context: not this run
        outside.start()
        outside.join()
        with pytest.raises(CancelledError):
            step()
    assert outcomes == ["ran"]
    assert step() == "ran"  # after the run, nothing is stopped
    assert stop._stop_hook not in installed_hooks()  # and no hook is left behind


@pytest.mark.django_db
def test_the_hook_stays_while_any_run_is_watched():
    with stop.watch("11111111-1111-1111-1111-111111111111"):
        with stop.watch("22222222-2222-2222-2222-222222222222"):
            pass
        assert stop._stop_hook in installed_hooks()
    assert stop._stop_hook not in installed_hooks()


@pytest.mark.django_db(transaction=True)
def test_stop_abandons_an_in_flight_model_request(user, test_functions):
    session = launch(user, "ask_hanging_model", {})
    wait_for(lambda: Node.objects.filter(session=session, kind="llm", status="running").exists(),
             what="the model request to be in flight")
    lifecycle.request_stop(session.pk)
    assert wait_for_end(session).status == "cancelled"
    [model_call] = Node.objects.filter(session=session, kind="llm")
    assert model_call.status == "cancelled"
    assert_nothing_left_running(session)


@pytest.mark.django_db(transaction=True)
def test_a_stop_wakes_a_model_call_that_waits_on_its_runs_bell(user, test_functions, monkeypatch):
    monkeypatch.setattr(interrupt, "BELL_WAKE_S", 600.0)  # no wake-up but the stop's own in the test's time
    SLEEPING_CHECKS.clear()
    session = launch(user, "ask_sleeping_model", {})
    wait_for(lambda: Node.objects.filter(session=session, kind="llm", status="running").exists(),
             what="the model call to wait")
    lifecycle.request_stop(session.pk)
    assert wait_for_end(session).status == "cancelled"
    [check] = SLEEPING_CHECKS
    assert isinstance(check, interrupt.BellCheck)  # it waited without polling


def stuck_cancelling(user):
    """A session running with a stop requested and an open node, and no run to end it (a stuck run)."""
    session = write_path.queue_session(user, function="slow_count", args={})
    write_path.claim_session(session.pk)
    write_path.create_node(session.pk, kind="code", name="slow_count")
    write_path.record_stop_request(session.pk)
    return session


def test_a_session_cancelling_past_the_deadline_is_finished_cancelled(user):
    session = stuck_cancelling(user)
    assert stop.finish_overdue_cancellations() == 0  # within OPENPROGRAM_CANCEL_DEADLINE_S (30 s)
    assert stop.finish_overdue_cancellations(deadline_s=0) == 1
    session.refresh_from_db()
    assert session.status == "cancelled" and "did not end within 0 s of the stop" in session.error
    assert [n.status for n in nodes_of(session)] == ["cancelled"]
    assert stop.finish_overdue_cancellations(deadline_s=0) == 0  # once


def test_the_cancel_deadline_comes_from_settings(settings, user):
    stuck_cancelling(user)
    settings.OPENPROGRAM_CANCEL_DEADLINE_S = "0"
    assert stop.finish_overdue_cancellations() == 1


def test_a_stop_is_saved_when_redis_cannot_take_its_wake_up(settings, user):
    settings.REDIS_URL, settings.OPENPROGRAM_STOP_PUBSUB = "redis://127.0.0.1:1/0", True  # nothing listens
    session = write_path.queue_session(user, function="slow_count", args={})
    write_path.claim_session(session.pk)  # running in "another process": only the wake-up could reach it
    assert lifecycle.request_stop(session.pk).cancel_requested  # the poll will find it


class _EndListener(BaseException):
    """Raised by the fake Redis to end the listener's endless loop."""


def test_a_redis_outage_is_logged_once_by_the_stop_listener_and_its_return_once(monkeypatch, caplog):
    import redis

    from dag.runs import stop

    class Subscription:
        def subscribe(self, channel):
            pass

        def get_message(self, timeout):
            raise redis.exceptions.ConnectionError("connection reset")  # the second outage begins

    class Client:
        def pubsub(self, ignore_subscribe_messages):
            return Subscription()

        def close(self):
            pass

    def refused():
        raise redis.exceptions.ConnectionError("connection refused")

    # Three refused connections (one outage), a subscription that works and then breaks (a second
    # outage), one more refusal, then the end of the test.
    attempts = iter([refused, refused, refused, Client, refused])

    def from_url(url, **options):
        try:
            return next(attempts)()
        except StopIteration:
            raise _EndListener from None

    monkeypatch.setattr(redis.Redis, "from_url", staticmethod(from_url))
    monkeypatch.setattr(stop, "RESUBSCRIBE_S", 0)
    with caplog.at_level("INFO", logger="dag.runs.stop"), pytest.raises(_EndListener):
        stop._listen("redis://127.0.0.1:1/0")
    said = [(record.levelname, record.getMessage().split(" (")[0].split(" after")[0]) for record in caplog.records]
    assert said == [("WARNING", "stop wake-ups from Redis unavailable"),
                    ("INFO", "stop wake-ups from Redis back"),
                    ("WARNING", "stop wake-ups from Redis unavailable")]
