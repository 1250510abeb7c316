"""The executor is chosen by dotted path in settings, behind a small base class."""
from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from dag.models import Node, Session
from dag.runs import lifecycle
from dag.runs.executors import EXITED_DURING_RUN, Executor, InProcessExecutor, get_executor
from dag.runs.launch import launch
from ..launch_helpers import wait_for


ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(autouse=True)
def an_exit_ends_with_its_test():
    """A test's simulated process exit stops every run that registers afterwards (`shut_down_local_runs`);
    the test process itself goes on, so the next test starts without it."""
    from dag.runs import stop
    yield
    stop._shutting_down = None


class RecordingExecutor(Executor):
    """Runs nothing; remembers what it was given."""

    submitted: list = []

    def submit(self, session_id) -> None:
        RecordingExecutor.submitted.append(str(session_id))


@pytest.mark.parametrize("name", ["inprocess", "dag.runs.executors.InProcessExecutor", "dag.executor.InProcessExecutor"])
def test_the_in_process_pool_by_name_or_dotted_path(settings, name):
    settings.OPENPROGRAM_EXECUTOR = name
    assert type(get_executor()) is InProcessExecutor


def test_celery_by_name_sends_to_its_queue(settings):
    from dag.runs.celery_executor import CeleryExecutor
    settings.OPENPROGRAM_EXECUTOR, settings.OPENPROGRAM_CELERY_QUEUE = "celery", "runs-here"
    executor = get_executor()
    assert isinstance(executor, CeleryExecutor) and executor.queue == "runs-here"


@pytest.mark.django_db
def test_a_broker_that_cannot_take_a_run_ends_its_session_naming_the_broker(settings, user, test_functions,
                                                                            monkeypatch):
    from dag.runs.celery_executor import NOT_QUEUED, CeleryExecutor
    from openprogram_web.celery import app

    def refuse(*args, **kwargs):
        raise ConnectionRefusedError("Connection refused")
    monkeypatch.setattr(app, "send_task", refuse)
    settings.CELERY_BROKER_URL = "redis://:secret@broker.example:6379/0"
    session = launch(user, "echo", {"text": "x"})
    CeleryExecutor(queue="q").send(str(session.pk))
    session.refresh_from_db()
    assert session.status == "error" and NOT_QUEUED in session.error and "broker.example" in session.error
    assert "secret" not in session.error


def test_the_default_is_the_in_process_pool(settings):
    settings.OPENPROGRAM_EXECUTOR_WORKERS = 3
    executor = get_executor()
    assert isinstance(executor, InProcessExecutor) and executor.workers == 3
    assert get_executor() is executor  # one per process


@pytest.mark.django_db
def test_launches_go_to_the_configured_executor(settings, user, test_functions):
    settings.OPENPROGRAM_EXECUTOR = f"{__name__}.RecordingExecutor"
    RecordingExecutor.submitted.clear()
    client = APIClient()
    client.force_authenticate(user)
    session_id = client.post("/api/sessions/", {"function": "echo", "args": {"text": "x"}}, format="json").json()["id"]
    assert RecordingExecutor.submitted == [session_id]


@pytest.mark.parametrize("path, error, message", [
    ("dag.runs.executors.NoSuchExecutor", ImportError, "OPENPROGRAM_EXECUTOR='dag.runs.executors.NoSuchExecutor' cannot be imported"),
    ("dag.models.Session", TypeError, "is not a dag.runs.executors.Executor subclass"),
])
def test_a_wrong_setting_is_named(settings, path, error, message):
    settings.OPENPROGRAM_EXECUTOR = path
    with pytest.raises(error, match=message.replace("(", r"\(").replace(".", r"\.")):
        get_executor()


def test_a_pool_needs_a_worker():
    with pytest.raises(ValueError, match="OPENPROGRAM_EXECUTOR_WORKERS must be at least 1"):
        InProcessExecutor(workers=0)


@pytest.mark.django_db
def test_a_wrong_setting_fails_the_launch_before_a_session_is_saved(settings, user, test_functions):
    settings.OPENPROGRAM_EXECUTOR = "dag.runs.executors.NoSuchExecutor"
    with pytest.raises(ImportError, match="OPENPROGRAM_EXECUTOR"):
        launch(user, "echo", {"text": "x"})
    assert not Session.objects.filter(owner=user).exists()  # no session left queued with no run


def test_the_pool_reads_no_settings_of_its_own(settings):
    settings.OPENPROGRAM_EXECUTOR_WORKERS = 1
    assert InProcessExecutor(workers=4).workers == 4  # what it is given, not the global


# A process that launches a long run and then simply ends, as the server does on Ctrl-C.
EXITING_PROCESS = """
import django, time
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from django.contrib.auth import get_user_model
from dag.models import Node
from dag.runs.launch import launch
session = launch(get_user_model().objects.create(username="exiting"), "slow_count", {"n": 200, "delay_s": 0.05})
while not Node.objects.filter(session=session).exists():
    time.sleep(0.01)
print(session.pk)
"""


def test_a_process_that_exits_stops_its_runs_and_they_end_interrupted(tmp_path):
    database = tmp_path / "db.sqlite3"
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{database}", "OPENPROGRAM_VAR_DIR": str(tmp_path),
           "DJANGO_SETTINGS_MODULE": "openprogram_web.settings", "OPENPROGRAM_EXECUTOR": "",
           "OPENPROGRAM_FUNCTION_MODULES": "examples.functions"}
    done = subprocess.run([sys.executable, "-c", EXITING_PROCESS], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    session_id = uuid.UUID(done.stdout.split()[-1]).hex
    with sqlite3.connect(database) as db:
        status, error = db.execute("SELECT status, error FROM dag_session WHERE id = ?", [session_id]).fetchone()
        open_nodes = db.execute("SELECT count(*) FROM dag_node WHERE status = 'running'").fetchone()[0]
    assert (status, open_nodes) == ("interrupted", 0) and "shutting down" in error


@pytest.mark.django_db(transaction=True)
def test_at_exit_a_queued_session_is_not_started_and_ends_interrupted(user, test_functions):
    executor = InProcessExecutor(workers=1, exit_grace_s=30)
    going = Session.objects.create(owner=user, function="ask_hanging_model", args={})
    waiting = Session.objects.create(owner=user, function="echo", args={"text": "never"})
    executor.submit(going.pk)
    executor.submit(waiting.pk)
    wait_for(lambda: Session.objects.filter(pk=going.pk, status="running").exists(), 30, "the run to start")
    executor._stop_runs_at_exit()  # what atexit runs as the process exits
    going.refresh_from_db()
    waiting.refresh_from_db()
    assert going.status == "interrupted" and "shutting down" in going.error
    assert (waiting.status, waiting.error) == ("interrupted", lifecycle.QUEUED_IN_DEAD_SERVER)
    assert not Node.objects.filter(session=waiting).exists()  # it never ran


@pytest.mark.django_db(transaction=True)
def test_at_exit_a_run_that_does_not_stop_in_its_grace_is_ended_for_it(user, test_functions):
    from ..launch_helpers import RELEASE_DEAF_RUNS
    executor = InProcessExecutor(workers=1, exit_grace_s=0)
    deaf = Session.objects.create(owner=user, function="deaf_until_released", args={})
    executor.submit(deaf.pk)
    # In its function, not merely claimed: a stop reaches a run at each call's entry.
    wait_for(lambda: Node.objects.filter(session=deaf, name="deaf_until_released").exists(), 30,
             "the run to enter its function")
    try:
        executor._stop_runs_at_exit()
        deaf.refresh_from_db()
        # Its thread dies with the process: had the session stayed running, only a reaper would end it.
        assert (deaf.status, deaf.error) == ("interrupted", EXITED_DURING_RUN)
        assert not Node.objects.filter(session=deaf, status="running").exists()
    finally:
        RELEASE_DEAF_RUNS.set()
        for thread in executor._threads:
            thread.join(30)
        RELEASE_DEAF_RUNS.clear()
    deaf.refresh_from_db()
    assert deaf.status == "interrupted"  # its late "completed" is refused


@pytest.mark.django_db(transaction=True)
def test_at_exit_a_session_that_cannot_be_ended_does_not_keep_the_others_from_ending(user, monkeypatch):
    from django.db import OperationalError

    from dag.runs import executors
    first, second = (Session.objects.create(owner=user, function="echo", args={"text": "t"}) for _ in range(2))
    finish = executors.write_path.finish_session

    def locked_for_the_first(session_id, *args, **kwargs):
        if str(session_id) == str(first.pk):
            raise OperationalError("database is locked")
        return finish(session_id, *args, **kwargs)
    monkeypatch.setattr(executors.write_path, "finish_session", locked_for_the_first)
    executor = InProcessExecutor(workers=1)
    for session in (first, second):  # queued, no thread free to take them
        executor._queue.append(session.pk)
    executor._stop_runs_at_exit()
    assert Session.objects.get(pk=first.pk).status == "queued"  # left to the next start's recovery
    assert Session.objects.get(pk=second.pk).status == "interrupted"


@pytest.mark.django_db(transaction=True)
def test_a_session_submitted_to_a_pool_that_was_shut_down_ends_interrupted_not_queued(user, test_functions):
    # Left queued, no thread would ever take it, and it would count against its owner's active runs.
    from dag.runs.executors import SUBMITTED_AFTER_SHUTDOWN
    executor = InProcessExecutor(workers=1)
    executor._stop_runs_at_exit()  # the process is exiting
    late = Session.objects.create(owner=user, function="echo", args={"text": "late"})
    executor.submit(late.pk)  # a launch committing just then
    late.refresh_from_db()
    assert (late.status, late.error) == ("interrupted", SUBMITTED_AFTER_SHUTDOWN)
    assert not Node.objects.filter(session=late).exists()


@pytest.mark.django_db(transaction=True)
def test_at_exit_a_run_claimed_but_not_yet_watched_is_stopped_when_it_registers(user, test_functions, monkeypatch):
    # Between its claim and its stop registration a run is not among the local runs a shutdown signals.
    import threading

    from dag.runs import catalog
    claimed, go_on = threading.Event(), threading.Event()
    look_up = catalog.get

    def held_after_the_claim(name):
        claimed.set()
        go_on.wait(30)
        return look_up(name)
    monkeypatch.setattr(lifecycle.catalog, "get", held_after_the_claim)
    from dag.runs import stop
    signalled, signal_runs = threading.Event(), stop.stop_local_runs

    def signalling(*args, **kwargs):
        count = signal_runs(*args, **kwargs)
        signalled.set()
        return count
    monkeypatch.setattr(stop, "stop_local_runs", signalling)
    executor = InProcessExecutor(workers=1, exit_grace_s=30)
    session = Session.objects.create(owner=user, function="chatty", args={"calls": 400})
    executor.submit(session.pk)
    assert claimed.wait(30)
    assert Session.objects.get(pk=session.pk).status == "running"
    exiting = threading.Thread(target=executor._stop_runs_at_exit)
    exiting.start()  # signals the runs it knows of, then gives them their grace
    assert signalled.wait(30)
    go_on.set()
    exiting.join(60)
    session.refresh_from_db()
    assert session.status == "interrupted" and "shutting down" in session.error, session.error
    assert Node.objects.filter(session=session, kind="llm").count() == 0  # stopped at its first call


@pytest.mark.django_db(transaction=True)
def test_a_thread_stuck_in_a_written_off_run_is_replaced_so_later_sessions_still_run(user, test_functions):
    from dag.runs import leases, stop

    from ..launch_helpers import RELEASE_DEAF_RUNS
    executor = InProcessExecutor(workers=1)
    deaf = Session.objects.create(owner=user, function="deaf_until_released", args={})
    executor.submit(deaf.pk)
    wait_for(lambda: Node.objects.filter(session=deaf, name="deaf_until_released").exists(), 30,
             "the run to enter its function")
    try:
        lifecycle.request_stop(deaf.pk)  # no stop reaches it: the deadline finishes it without its run
        assert stop.finish_overdue_cancellations(deadline_s=0) == 1
        later = Session.objects.create(owner=user, function="echo", args={"text": "after"})
        executor.submit(later.pk)
        # The heartbeat finds it written off (this beat, or the process's own heartbeat thread before it).
        assert leases.process_leases.beat() in ({str(deaf.pk)}, set())
        wait_for(lambda: Session.objects.filter(pk=later.pk, status="completed").exists(), 60,
                 "the later session to run on the thread that took the stuck one's place")
        assert leases.process_leases.beat() == set()  # reported once, not at every beat
    finally:
        RELEASE_DEAF_RUNS.set()
        for thread in [*executor._threads, *executor._set_aside]:
            thread.join(30)
        RELEASE_DEAF_RUNS.clear()
    assert Session.objects.get(pk=deaf.pk).status == "cancelled"
    assert len(executor._threads) == 1 and not executor._set_aside  # the stuck thread left when it came back


def test_a_session_queued_after_a_stuck_thread_left_the_pool_gets_a_thread_of_its_own(monkeypatch):
    # The one thread finished A and took B from the queue; B's run is then written off and stuck. C,
    # launched after, must not wait for B's thread: it left the pool.
    import threading

    from dag.runs import executors
    started = {name: threading.Event() for name in "ABC"}
    release = {name: threading.Event() for name in "ABC"}

    def run(session_id):
        started[session_id].set()
        release[session_id].wait(60)
    monkeypatch.setattr(executors, "run_in_this_thread", run)
    executor = InProcessExecutor(workers=1)
    try:
        executor._enqueue("A")
        executor._enqueue("B")  # no thread free: it waits in the queue
        assert started["A"].wait(30)
        release["A"].set()
        assert started["B"].wait(30)  # the same thread, back from A, took it
        executor._set_aside_thread_of("B")
        executor._enqueue("C")
        assert started["C"].wait(30), "C waited for the stuck thread"
        assert not release["B"].is_set()
    finally:
        for event in release.values():
            event.set()
        executor.shutdown(wait=False)
