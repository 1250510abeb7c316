"""A run that waits holds nothing: no database connection between its operations, a bounded number of
run threads on the database at once, and a database outage waited out (dag.recording.write_path.borrowing)."""
from __future__ import annotations

import threading

import psycopg
import pytest
from django.core.checks import run_checks
from django.db import DEFAULT_DB_ALIAS, OperationalError, connections
from django.utils import timezone

from dag.models import Node, Session
from dag.recording import write_path
from dag.recording.write_path import borrowing
from dag.runs import reaper
from dag.runs.executors import run_in_this_thread

from .. import launch_helpers
from ..dag_helpers import new_session

pytestmark = pytest.mark.django_db(transaction=True)



def away() -> OperationalError:
    """The database being away, as Django raises it: on SQLite a lock held past the busy timeout, on
    PostgreSQL a connection lost (the driver's error its cause)."""
    error = OperationalError("database is locked; server closed the connection unexpectedly")
    error.__cause__ = psycopg.OperationalError("server closed the connection unexpectedly")
    return error


def in_a_thread(work) -> None:
    thread = threading.Thread(target=work)
    thread.start()
    thread.join()


def test_a_waiting_run_holds_no_database_connection(user, test_functions):
    launch_helpers.HELD_WHILE_WAITING.clear()
    session = Session.objects.create(owner=user, function="wait_on_model_and_tool", args={})
    in_a_thread(lambda: run_in_this_thread(session.pk))
    session.refresh_from_db()
    assert (session.status, session.result) == ("completed", "waited"), session.error
    # In the body, on the model, after a nested call: the claim, the context read, the id reservation and
    # the entries' writes each gave their connection back.
    assert launch_helpers.HELD_WHILE_WAITING == [False, False, False]
    assert Node.objects.filter(session=session, status="completed").count() == 3  # itself, the model, echo


def test_an_operation_is_tried_again_while_the_database_is_away():
    failures, pauses = [away(), away()], []

    def operation():
        if failures:
            raise failures.pop()
        return "done"

    assert borrowing.waited_out("a test read", operation, outage_s=5, sleep=pauses.append) == "done"
    assert len(pauses) == 2 and pauses[1] == 2 * pauses[0]  # backoff


def test_an_outage_past_its_limit_is_named_with_the_setting():
    pauses = []

    def operation():
        raise away()

    with pytest.raises(write_path.DatabaseUnreachable, match=r"a test read: .*OPENPROGRAM_DB_OUTAGE_S"):
        borrowing.waited_out("a test read", operation, outage_s=0, sleep=pauses.append)
    assert pauses == []


def test_a_statement_error_is_raised_at_once_not_waited_out():
    calls = []

    def operation():
        calls.append(1)
        raise OperationalError("no such column: nonsense")

    with pytest.raises(OperationalError, match="nonsense"):
        borrowing.waited_out("a bad read", operation, outage_s=5, sleep=lambda _: None)
    assert calls == [1]


def test_a_claim_tried_again_after_its_commit_went_unseen_finds_its_own():
    session = new_session()
    now = timezone.now()
    claimed = write_path.claim_session(session.pk, worker="host:1", now=now)
    again = write_path.claim_session(session.pk, worker="host:1", now=now)
    assert claimed is not None and again is not None and again.rev == claimed.rev  # nothing written twice
    assert write_path.claim_session(session.pk, worker="host:1", now=timezone.now()) is None  # a duplicate
    assert write_path.claim_session(session.pk, worker="host:2", now=now) is None


def test_a_claim_that_meets_an_outage_runs_once_the_database_is_back(user, test_functions, monkeypatch):
    session = Session.objects.create(owner=user, function="echo", args={"text": "hi"})
    claim, outage = write_path.claim_session, [away()]

    def claim_after_a_blip(*args, **kwargs):
        if outage:
            raise outage.pop()
        return claim(*args, **kwargs)

    monkeypatch.setattr(write_path, "claim_session", claim_after_a_blip)
    in_a_thread(lambda: run_in_this_thread(session.pk))
    session.refresh_from_db()
    assert (session.status, session.result) == ("completed", "hi") and not outage


def test_a_batch_whose_commit_went_unseen_is_not_written_twice(user, test_functions, monkeypatch):
    from dag.recording.write_path import batch_writer

    write_parts, lost = batch_writer.write_parts, []

    def commit_then_lose_the_answer(tx, parts, *args, **kwargs):
        outcomes = write_parts(tx, parts, *args, **kwargs)
        if not lost:  # the first batch: committed, its answer lost with the connection
            lost.append(parts)
            if tx.connection.vendor == "sqlite":  # PostgreSQL's COMMIT went with the statements
                tx.execute("COMMIT")
            raise away()
        return outcomes

    monkeypatch.setattr(batch_writer, "write_parts", commit_then_lose_the_answer)
    session = Session.objects.create(owner=user, function="powers_between_echoes", args={"digits": 3})
    in_a_thread(lambda: run_in_this_thread(session.pk))
    session.refresh_from_db()
    assert session.status == "completed", session.error
    assert lost, "no batch went through the lost answer"
    nodes = list(Node.objects.filter(session=session).order_by("seq"))
    assert [(node.name, node.status) for node in nodes] == [
        ("powers_between_echoes", "completed"), ("echo", "completed"), ("power_of_ten", "completed"),
        ("echo", "completed")]
    assert [node.seq for node in nodes] == [0, 1, 2, 3]


def test_a_batch_that_met_an_outage_before_its_commit_is_written_once_the_database_is_back(
        user, test_functions, monkeypatch):
    from dag.recording.write_path import batch_writer

    write_parts, outage = batch_writer.write_parts, [away(), away()]

    def fail_twice(*args, **kwargs):
        if outage:
            raise outage.pop()
        return write_parts(*args, **kwargs)

    monkeypatch.setattr(batch_writer, "write_parts", fail_twice)
    session = Session.objects.create(owner=user, function="powers_between_echoes", args={"digits": 3})
    in_a_thread(lambda: run_in_this_thread(session.pk))
    session.refresh_from_db()
    assert session.status == "completed" and not outage, session.error
    assert Node.objects.filter(session=session, status="completed").count() == 4


def test_a_run_whose_database_stays_away_ends_interrupted_saying_why(user, test_functions, monkeypatch,
                                                                      settings):
    from dag.recording.write_path import batch_writer

    settings.OPENPROGRAM_DB_OUTAGE_S = 0  # give up at the first failure

    def never_there(*args, **kwargs):
        raise away()

    monkeypatch.setattr(batch_writer, "write_parts", never_there)
    session = Session.objects.create(owner=user, function="powers_between_echoes", args={"digits": 3})
    in_a_thread(lambda: run_in_this_thread(session.pk))
    session.refresh_from_db()
    assert session.status == "interrupted" and "OPENPROGRAM_DB_OUTAGE_S" in session.error


def test_the_reaper_waits_a_whole_lease_of_reachable_database_before_writing_off(monkeypatch):
    reaped = []
    monkeypatch.setattr(reaper, "reap", lambda: reaped.append(1))
    monkeypatch.setattr(reaper, "resend_queued", lambda: [])
    reachable = reaper.Reachability()
    reaper.one_pass(reachable, now=100.0)  # the database reached
    reaper.one_pass(reachable, now=110.0)  # less than a lease (15 s) later
    assert reaped == []
    reaper.one_pass(reachable, now=116.0)
    assert reaped == [1]
    reachable.lost()  # an outage: a whole lease of reachable database again before the next write-off
    reaper.one_pass(reachable, now=120.0)
    reaper.one_pass(reachable, now=130.0)
    assert reaped == [1]


def test_run_threads_on_the_database_at_once_are_bounded_and_upkeep_keeps_its_share(monkeypatch):
    monkeypatch.setattr(borrowing, "pool_size", lambda: borrowing.UPKEEP_CONNECTIONS + 2)
    inside, most, lock = 0, 0, threading.Lock()
    release = threading.Event()

    def operation():
        nonlocal inside, most
        with lock:
            inside += 1
            most = max(most, inside)
        release.wait(10)
        with lock:
            inside -= 1

    threads = [threading.Thread(target=borrowing.borrowed, args=("a read", operation)) for _ in range(6)]
    for thread in threads:
        thread.start()
    launch_helpers.wait_for(lambda: inside == 2, 30, "two run threads on the database")
    release.set()
    for thread in threads:
        thread.join()
    assert most == 2  # the pool less the upkeep's four


def test_settings_that_would_starve_upkeep_are_refused_at_start(monkeypatch, settings):
    monkeypatch.setattr(borrowing, "pool_size", lambda: 3)
    errors = {error.id: error for error in run_checks() if error.id in ("dag.E007", "dag.E008")}
    assert "OPENPROGRAM_DB_POOL_SIZE (3)" in errors["dag.E007"].msg
    assert "OPENPROGRAM_WORKER_CONCURRENCY" in errors["dag.E007"].msg and "5" in errors["dag.E007"].hint
    monkeypatch.setattr(borrowing, "pool_size", lambda: 10)
    monkeypatch.setattr(borrowing, "pool_timeout_s", lambda: 14.0)
    errors = {error.id: error for error in run_checks() if error.id in ("dag.E007", "dag.E008")}
    assert list(errors) == ["dag.E008"]
    assert "OPENPROGRAM_DB_POOL_TIMEOUT_S (14 s)" in errors["dag.E008"].msg
    assert "OPENPROGRAM_LEASE_S" in errors["dag.E008"].msg
