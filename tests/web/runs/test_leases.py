"""Run leases: a claim records the worker and a heartbeat; one heartbeat query per process renews them all."""
from __future__ import annotations

import os
import socket

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from dag.models import Session
from dag.recording import write_path
from dag.runs import leases, lifecycle, reaper, stop
from runtime import CancelledError

from ..dag_helpers import new_session
from .lease_helpers import LEASE_S, T0, WORKER, at, claimed

pytestmark = pytest.mark.django_db


def test_a_claim_records_the_worker_and_its_first_heartbeat():
    session = new_session()
    assert session.as_dict()["worker"] is None  # not claimed yet: null in the API
    claimed_session = write_path.claim_session(session.pk, worker=WORKER, now=T0)
    session.refresh_from_db()
    assert (session.status, session.worker, session.heartbeat_at) == ("running", WORKER, T0)
    assert claimed_session.as_dict()["worker"] == WORKER


def test_the_api_session_object_names_the_worker(api, user):
    session = Session.objects.create(owner=user, function="entry")
    assert api.get(f"/api/sessions/{session.pk}/").json()["worker"] is None
    write_path.claim_session(session.pk, worker=WORKER, now=T0)
    assert api.get(f"/api/sessions/{session.pk}/").json()["worker"] == WORKER


@pytest.mark.django_db(transaction=True)  # the run's heartbeat must see its session
def test_a_run_claims_its_session_as_this_process(user, test_functions):
    session = Session.objects.create(owner=user, function="echo", args={"text": "hi"})
    lifecycle.run_session(session.pk)
    session.refresh_from_db()
    assert session.status == "completed"
    assert session.worker == leases.worker_id() == f"{socket.gethostname()}:{os.getpid()}"
    assert session.heartbeat_at is not None


def test_one_heartbeat_query_renews_every_lease_of_the_process():
    mine = [claimed() for _ in range(3)]
    other = claimed(worker="host-b:202")
    process = leases.Leases(WORKER)
    with process.held(mine[0].pk), process.held(mine[1].pk), process.held(mine[2].pk):
        with CaptureQueriesContext(connection) as queries:
            assert process.beat(now=at(2)) == set()
    assert len(queries) == 1 and queries[0]["sql"].lstrip().upper().startswith("UPDATE")
    beats = dict(Session.objects.values_list("pk", "heartbeat_at"))
    assert [beats[session.pk] for session in mine] == [at(2)] * 3
    assert beats[other.pk] == T0  # another worker's lease is not ours to renew


def test_the_heartbeat_changes_nothing_a_viewer_sees():
    session = claimed()
    assert write_path.renew_leases(WORKER, [session.pk], at(2)) == 1
    session_after = Session.objects.get(pk=session.pk)
    assert session_after.rev == session.rev and session_after.heartbeat_at == at(2)


def test_a_process_with_nothing_held_makes_no_query():
    with CaptureQueriesContext(connection) as queries:
        assert leases.Leases(WORKER).beat(now=at(2)) == set()
    assert len(queries) == 0


def test_a_process_that_lost_a_lease_stops_that_run():
    kept, reaped, taken = claimed(), claimed(), claimed()
    write_path.finish_session(reaped.pk, "interrupted", error="written off")
    write_path.update_session(taken.pk, worker="host-b:202")  # another worker holds it now
    process = leases.Leases(WORKER)
    with process.held(kept.pk), process.held(reaped.pk), process.held(taken.pk), \
            stop.watch(kept.pk) as kept_signal, stop.watch(reaped.pk) as reaped_signal:
        assert process.beat(now=at(2)) == {str(reaped.pk), str(taken.pk)}
        assert reaped_signal.is_set and reaped_signal.reason == stop.LEASE_LOST
        assert not kept_signal.is_set
        with pytest.raises(CancelledError, match="lost its lease"):
            reaped_signal.raise_if_set()


@pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite takes one lock for the whole database")
@pytest.mark.django_db(transaction=True)
def test_the_heartbeat_locks_sessions_in_the_order_a_batch_does_so_they_never_deadlock():
    import threading
    import time

    from django.db import connections

    # Claimed higher id first, so a plain UPDATE finds (and locks) the higher one first.
    pair = [new_session(), new_session()]
    low, high = sorted(pair, key=lambda session: str(session.pk))
    for session in (high, low):
        write_path.claim_session(session.pk, worker=WORKER, now=T0)
    table = Session._meta.db_table
    failures, renewed = [], []
    batch_holds_low, heartbeat_started = threading.Event(), threading.Event()

    def a_batch():  # what a group-commit batch does: lock its sessions in id order, low then high
        try:
            with connections["default"].cursor() as cursor:
                cursor.execute("BEGIN")
                cursor.execute(f'UPDATE "{table}" SET rev = rev WHERE id = %s', [low.pk])
                batch_holds_low.set()
                assert heartbeat_started.wait(30)
                deadline = time.monotonic() + 30
                while True:  # until the heartbeat waits for a lock (for low: it holds high, or nothing)
                    cursor.execute("SELECT count(*) FROM pg_locks WHERE NOT granted")
                    if cursor.fetchone()[0] or time.monotonic() > deadline:
                        break
                    time.sleep(0.01)
                cursor.execute(f'UPDATE "{table}" SET rev = rev WHERE id = %s', [high.pk])
                cursor.execute("COMMIT")
        except Exception as exc:
            failures.append(exc)
        finally:
            connections["default"].close()

    def a_heartbeat():
        try:
            assert batch_holds_low.wait(30)
            heartbeat_started.set()
            renewed.append(write_path.renew_leases(WORKER, [high.pk, low.pk], at(2)))
        except Exception as exc:
            failures.append(exc)
        finally:
            connections["default"].close()

    threads = [threading.Thread(target=a_batch), threading.Thread(target=a_heartbeat)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert failures == [] and renewed == [2]


def test_the_heartbeat_renews_only_the_sessions_the_process_runs():
    """A session left running under this worker's id by a run that is gone (its final write failed) is
    not kept alive by the process's other runs: the reaper writes it off. And a run whose lease is lost
    is told so, whatever such a session would have added to the count."""
    orphan, running, written_off = claimed(), claimed(), claimed()
    process = leases.Leases(WORKER)
    with process.held(running.pk), process.held(written_off.pk):
        write_path.finish_session(written_off.pk, Session.Status.CANCELLED)  # ended elsewhere
        assert process.beat(now=at(LEASE_S)) == {str(written_off.pk)}
        reaped = reaper.reap(now=at(LEASE_S + 1), lease_s=LEASE_S)
    assert orphan.pk in reaped and running.pk not in reaped
    assert Session.objects.get(pk=running.pk).status == Session.Status.RUNNING
    assert Session.objects.get(pk=orphan.pk).status == Session.Status.INTERRUPTED


# The test ends its heartbeat thread by raising SystemExit in it, which pytest reports as a thread's exception.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_the_heartbeat_outlives_a_setting_made_invalid_while_it_runs(settings):
    """The start-up check refuses an invalid OPENPROGRAM_HEARTBEAT_S; one set while the process runs (a
    test's) pauses the heartbeat for the default interval instead of ending its thread, which would leave
    every lease of the process to expire."""
    from dag.conf import DEFAULTS, conf

    from ..launch_helpers import wait_for

    settings.OPENPROGRAM_HEARTBEAT_S = "0.1"
    beats, ending = [], []

    def beat() -> set:
        if ending:
            raise SystemExit  # ends the thread, past the loop's `except Exception`
        beats.append(True)
        return set()

    holder = leases.Leases()
    holder.beat = beat  # no database: the test counts the rounds
    holder._thread.ensure()
    try:
        wait_for(lambda: beats, 60, "a first beat")
        settings.OPENPROGRAM_HEARTBEAT_S = "0"  # below the minimum: refused at start-up
        assert conf.pause_s("HEARTBEAT_S") == DEFAULTS["HEARTBEAT_S"]
        seen = len(beats)
        # The thread reads the invalid value for its next pause; it beats again after the default one.
        wait_for(lambda: len(beats) > seen + 1, 60, "a beat after the setting turned invalid")
        assert holder._thread._thread.is_alive()
    finally:
        ending.append(True)
        settings.OPENPROGRAM_HEARTBEAT_S = "0.1"
        holder._thread._thread.join(60)  # ended here, so that its SystemExit is this test's
