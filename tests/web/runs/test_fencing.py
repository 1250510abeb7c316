"""Fenced writes: once a session has ended or another worker holds it, the old run's writes are refused in
their own transaction and the run stops; a late `completed` never replaces `interrupted` or `cancelled`."""
from __future__ import annotations

import threading

import pytest
from django.db import connection

from dag.models import Node, Session
from dag.recording import write_path
from dag.recording.recorder import DjangoRecorder
from dag.runs import leases, lifecycle, reaper
from runtime import CancelledError, agentic_function, use_recorder

from .lease_helpers import LEASE_S, WORKER, at, claimed


@pytest.mark.django_db
@pytest.mark.parametrize("written_off_by", ["reaper", "stop", "another worker"])
def test_a_write_from_a_written_off_run_is_refused(written_off_by):
    session = claimed()
    open_node = write_path.create_node(session.pk, lease=WORKER, kind="code", name="outer")
    if written_off_by == "reaper":
        reaper.reap(now=at(LEASE_S + 1), lease_s=LEASE_S)
    elif written_off_by == "stop":
        write_path.finish_session(session.pk, "cancelled", error="stopped")
    else:
        write_path.update_session(session.pk, worker="host-b:202")
    before = Session.objects.get(pk=session.pk)
    why = "holds its lease" if written_off_by == "another worker" else "has ended"
    with pytest.raises(write_path.WriteRefused, match=why):
        write_path.create_node(session.pk, lease=WORKER, kind="code", name="late")
    if written_off_by == "another worker":
        with pytest.raises(write_path.WriteRefused):
            write_path.finish_node(open_node, lease=WORKER, status="completed")
    with pytest.raises(CancelledError):  # a refusal is a stop for the run that made it
        write_path.update_session(session.pk, lease=WORKER, budget_spend={"llm_calls": 1})
    assert not write_path.finish_session(session.pk, "completed", result="late", lease=WORKER)
    after = Session.objects.get(pk=session.pk)
    assert (after.rev, after.node_count, after.status, after.result) == (before.rev, 1, before.status, None)
    assert not Node.objects.filter(session=session, name="late").exists()


@pytest.mark.django_db
def test_a_session_claimed_without_a_lease_takes_any_runs_writes():
    session = claimed(worker="")
    assert write_path.create_node(session.pk, lease=WORKER, kind="code", name="f").seq == 0


@pytest.mark.django_db
def test_the_run_stops_at_its_first_write_after_being_written_off():
    session = claimed()
    calls = []

    @agentic_function(register_globally=False)
    def step(i: int) -> int:
        calls.append(i)
        return i

    @agentic_function(register_globally=False)
    def outer() -> str:
        step(1)
        reaper.reap(now=at(LEASE_S + 1), lease_s=LEASE_S)  # the worker looked dead meanwhile
        step(2)
        return "done"

    with use_recorder(DjangoRecorder(session, lease=WORKER)), pytest.raises(CancelledError, match="refused"):
        outer()
    assert calls == [1]  # step(2) never ran: its entry could not be recorded
    nodes = dict(Node.objects.filter(session=session).values_list("name", "status"))
    assert nodes == {"outer": "interrupted", "step": "completed"}
    assert Session.objects.get(pk=session.pk).status == "interrupted"


@pytest.mark.django_db
def test_a_run_written_off_mid_way_ends_as_the_reaper_left_it(user, test_functions, monkeypatch):
    # The whole lifecycle: the session is reaped between the claim and the run's first call.
    session = Session.objects.create(owner=user, function="echo", args={"text": "hi"})
    claim = write_path.claim_session

    def claim_then_reap(session_id, **lease):
        claimed_session = claim(session_id, **{**lease, "now": at(0)})  # claimed long ago
        reaper.reap(now=at(LEASE_S + 1), lease_s=LEASE_S)
        return claimed_session

    monkeypatch.setattr(write_path, "claim_session", claim_then_reap)
    lifecycle.run_session(session.pk)
    session.refresh_from_db()
    assert session.status == "interrupted" and leases.worker_id() in session.error and session.result is None
    assert not Node.objects.filter(session=session).exists()


def race(*actions):
    """Run the actions at once, each in its own thread and connection; their results in order."""
    barrier = threading.Barrier(len(actions))
    results = [None] * len(actions)

    def run(index, action):
        try:
            barrier.wait(timeout=10)
            results[index] = action()
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(index, action)) for index, action in enumerate(actions)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads), "a racing write did not finish"
    return results


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("round_", range(5))
def test_finish_reaper_and_stop_race_and_exactly_one_wins(round_):
    session = claimed()
    for name in ("a", "b"):
        write_path.create_node(session.pk, lease=WORKER, kind="code", name=name)
    won = race(
        lambda: write_path.finish_session(session.pk, "completed", result="late", lease=WORKER),
        lambda: write_path.end_expired_lease(session.pk, lease_s=LEASE_S, now=at(LEASE_S + 1)),
        lambda: write_path.finish_session(session.pk, "cancelled", error="stopped"),
    )
    assert sum(bool(w) for w in won) == 1
    final = Session.objects.get(pk=session.pk)
    winner = ["completed", "interrupted", "cancelled"][won.index(True)]
    assert final.status == winner and (final.result == "late") == (winner == "completed")
    assert not Node.objects.filter(session=session, status="running").exists()
    # And whatever comes later changes nothing.
    assert not write_path.finish_session(session.pk, "completed", result="later", lease=WORKER)
    assert Session.objects.get(pk=session.pk).status == winner
