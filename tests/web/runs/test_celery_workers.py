"""Runs on real Celery worker processes, against real PostgreSQL and Redis (make test's `test-scaled` pass).

Each worker is a `celery -A openprogram_web worker --pool threads` process this module starts on the
test database and stops by PID; each test sends to a queue of its own. Rows must be committed for the
workers to see them, hence transactional tests. Every wait is a generous bound, not a timing assertion.
"""
from __future__ import annotations

import pytest
import redis
from django.conf import settings as django_settings

from dag.models import Node, Session
from dag.runs import lifecycle
from dag.runs.celery_executor import CeleryExecutor
from dag.runs.launch import launch

from ..launch_helpers import wait_for, wait_for_end
from .celery_workers import Worker, new_queue, scaled_only

pytestmark = [scaled_only(), pytest.mark.django_db(transaction=True)]

RUN_S = 60.0  # bound on a run's end
LONG_RUN = {"n": 1000, "delay_s": 0.2}  # minutes long: it ends only when stopped


@pytest.fixture(scope="module")
def queue():
    return new_queue()


@pytest.fixture(scope="module")
def worker(django_db_setup, django_db_blocker, tmp_path_factory, queue):
    """The module's worker. Its database poll for stops is an hour apart: a stop reaches its runs at once
    only by Redis pub/sub (or, for a stop saved before the run began, by the run's own start-up check)."""
    with django_db_blocker.unblock():
        started = Worker(tmp_path_factory.mktemp("worker"), queue, OPENPROGRAM_STOP_POLL_S="3600")
    try:
        yield started.wait_ready()
    finally:
        started.stop()


@pytest.fixture
def on_celery(settings, queue):
    settings.OPENPROGRAM_EXECUTOR = "celery"
    settings.OPENPROGRAM_CELERY_QUEUE = queue
    return queue


@pytest.fixture
def start_worker(tmp_path):
    """Start extra workers for one test; each is stopped (by PID) at its end."""
    started: list[Worker] = []

    def start(queue: str, **env) -> Worker:
        started.append(Worker(tmp_path, queue, **env))
        return started[-1].wait_ready()
    yield start
    for one in started:
        one.stop()


def nodes(session):
    return list(Node.objects.filter(session=session).order_by("seq"))


def under_way(session, steps: int = 2):
    def counting():
        session.refresh_from_db()
        assert not session.is_terminal, f"the run ended before it was stopped: {session.status} {session.error}"
        return Node.objects.filter(session=session, name="count_step").count() >= steps
    return wait_for(counting, RUN_S, f"session {session.pk} to get under way on a worker")


def test_a_session_runs_on_a_worker_and_completes_with_its_nodes(worker, on_celery, user):
    session = launch(user, "slow_count", {"n": 3, "delay_s": 0.05})
    session = wait_for_end(session, RUN_S)
    assert (session.status, session.result, session.error) == ("completed", 3, "")
    assert [(n.name, n.status) for n in nodes(session)] == [("slow_count", "completed")] + [("count_step", "completed")] * 3
    assert str(session.pk) in worker.received()


def test_a_duplicate_delivery_never_runs_a_session_twice(worker, on_celery, user):
    session = launch(user, "slow_count", {"n": 3, "delay_s": 0.2})
    CeleryExecutor(queue=on_celery).send(str(session.pk))  # the same task id, delivered again
    wait_for(lambda: worker.log().count(f"run_session[{session.pk}] succeeded") == 2, RUN_S,
             "both deliveries to be handled")
    session.refresh_from_db()
    assert session.status == "completed"
    assert len(nodes(session)) == 4  # one run: slow_count and its three steps, not eight nodes


def test_a_stop_from_the_web_process_cancels_a_run_on_a_worker_through_pubsub(worker, on_celery, user):
    session = launch(user, "slow_count", LONG_RUN)
    under_way(session)
    lifecycle.request_stop(session.pk)
    session = wait_for_end(session, RUN_S)  # the worker's poll is an hour away: this was the wake-up
    assert session.status == "cancelled"
    assert not Node.objects.filter(session=session, status="running").exists()


def test_a_stop_reaches_a_worker_by_the_database_poll_with_pubsub_off(settings, start_worker, user):
    queue = new_queue()
    poller = start_worker(queue, OPENPROGRAM_STOP_PUBSUB="off")
    settings.OPENPROGRAM_EXECUTOR, settings.OPENPROGRAM_CELERY_QUEUE = "celery", queue
    settings.OPENPROGRAM_STOP_PUBSUB = False  # nothing is published: only the flag in the database
    session = launch(user, "slow_count", LONG_RUN)
    under_way(session)
    lifecycle.request_stop(session.pk)
    session = wait_for_end(session, RUN_S)
    assert session.status == "cancelled"
    assert not Node.objects.filter(session=session, status="running").exists()
    assert "stop wake-ups" not in poller.log()  # it never tried to subscribe


def test_a_stop_while_queued_never_starts_the_run(settings, start_worker, user):
    queue = new_queue()
    settings.OPENPROGRAM_EXECUTOR, settings.OPENPROGRAM_CELERY_QUEUE = "celery", queue
    session = launch(user, "slow_count", {"n": 3, "delay_s": 0.05})  # no worker consumes the queue yet
    assert lifecycle.request_stop(session.pk).status == "cancelled"
    late = start_worker(queue)  # the message is still in the queue: the worker gets it, and does nothing
    wait_for(lambda: f"run_session[{session.pk}] succeeded" in late.log(), RUN_S, "the worker to handle it")
    session.refresh_from_db()
    assert (session.status, session.started_at, nodes(session)) == ("cancelled", None, [])


def test_twenty_sessions_on_two_workers_all_complete_and_both_are_used(worker, start_worker, on_celery, user,
                                                                        settings):
    settings.OPENPROGRAM_MAX_ACTIVE_RUNS_PER_USER = 20  # one user launches all twenty at once
    second = start_worker(on_celery)
    sessions = [launch(user, "slow_count", {"n": 3, "delay_s": 0.3}) for _ in range(20)]
    ended = [wait_for_end(session, RUN_S) for session in sessions]
    assert {session.status for session in ended} == {"completed"}
    for session in ended:
        assert [n.status for n in nodes(session)] == ["completed"] * 4
    ids = {str(session.pk) for session in sessions}
    first_ran, second_ran = worker.received() & ids, second.received() & ids
    assert first_ran | second_ran == ids and not first_ran & second_ran
    assert first_ran and second_ran, (len(first_ran), len(second_ran))


def test_sigterm_ends_a_workers_runs_interrupted_at_once(settings, start_worker, user):
    queue = new_queue()
    doomed = start_worker(queue)
    settings.OPENPROGRAM_EXECUTOR, settings.OPENPROGRAM_CELERY_QUEUE = "celery", queue
    sessions = [launch(user, "slow_count", LONG_RUN) for _ in range(2)]
    for session in sessions:
        under_way(session)
    assert doomed.terminate() == 0  # a warm shutdown that does not wait for minutes-long runs
    for session in sessions:
        session.refresh_from_db()
        assert session.status == "interrupted" and "shutting down" in session.error
        assert not Node.objects.filter(session=session, status="running").exists()


def test_sigkill_of_a_worker_ends_its_run_interrupted_by_the_lease_and_no_worker_runs_it_again(
        settings, start_worker, user):
    from dag.runs import reaper

    queue = new_queue()
    # A short lease, so the test waits seconds, not the default 15 s; the worker renews every 0.2 s.
    doomed = start_worker(queue, OPENPROGRAM_LEASE_S="2", OPENPROGRAM_HEARTBEAT_S="0.2")
    settings.OPENPROGRAM_EXECUTOR, settings.OPENPROGRAM_CELERY_QUEUE = "celery", queue
    settings.OPENPROGRAM_LEASE_S = 2
    session = launch(user, "slow_count", LONG_RUN)
    under_way(session)
    session.refresh_from_db()
    assert session.worker.endswith(f":{doomed.pid}")
    doomed._signal(9, 30.0)  # SIGKILL: no shutdown hook runs, the lease just stops being renewed

    def written_off():
        reaper.reap()  # what every worker's and server's reaper thread does every lease/2
        session.refresh_from_db()
        return session.is_terminal
    wait_for(written_off, RUN_S, "the reaper to write off the dead worker's session")
    assert session.status == "interrupted" and session.worker in session.error  # names who was lost
    assert not Node.objects.filter(session=session, status="running").exists()
    steps = Node.objects.filter(session=session).count()
    survivor = start_worker(queue)
    CeleryExecutor(queue=queue).send(str(session.pk))  # as the broker would redeliver the unacked run
    wait_for(lambda: str(session.pk) in survivor.received(), RUN_S, "the survivor to receive the run again")
    wait_for(lambda: "succeeded" in survivor.log() or "ignored" in survivor.log(), RUN_S,
             "the survivor to handle the redelivered run")
    assert Session.objects.get(pk=session.pk).status == "interrupted"
    assert Node.objects.filter(session=session).count() == steps  # it was not run again


async def test_a_run_on_a_worker_reaches_a_web_processs_websocket_client_equal_to_the_database(worker, on_celery,
                                                                                               user):
    """The worker publishes through the Redis channel layer; this process's consumer relays to its client.
    The client keeps the newest version of each row (order is the protocol's business, tested elsewhere)."""
    from channels.db import database_sync_to_async

    from ..live.test_consumers import communicator, database_state

    session = await database_sync_to_async(launch)(user, "slow_count", {"n": 3, "delay_s": 0.2})
    comm = communicator(user, session.pk)
    assert (await comm.connect(timeout=10))[0]
    nodes, status, rev = {}, None, 0
    for _ in range(500):  # a bound on messages, not on time
        message = await comm.receive_json_from(timeout=RUN_S)
        items = message.get("items") or [message]
        if message["type"] in ("snapshot", "snapshot_more"):
            items = [{"type": "node", "node": n, "rev": n["rev"]} for n in message["nodes"]]
            status = message.get("session", {}).get("status", status)
        for item in items:
            if item.get("type") == "node" and item["node"]["rev"] >= nodes.get(item["node"]["id"], {}).get("rev", -1):
                nodes[item["node"]["id"]] = item["node"]
            elif item.get("type") == "session":
                status = item["session"]["status"]
            rev = max(rev, item.get("rev") or 0)
        if status == "completed":
            db_rev, db_status, db_nodes = await database_sync_to_async(database_state)(session.pk)
            if rev >= db_rev:
                break
    await comm.disconnect()
    db_rev, db_status, db_nodes = await database_sync_to_async(database_state)(session.pk)
    assert db_status == "completed" and len(db_nodes) == 4
    assert nodes == db_nodes
    assert str(session.pk) in worker.received()


def test_a_session_whose_message_the_broker_lost_is_sent_again_and_completes(settings, start_worker, user):
    queue = new_queue()
    settings.OPENPROGRAM_EXECUTOR, settings.OPENPROGRAM_CELERY_QUEUE = "celery", queue
    session = launch(user, "slow_count", {"n": 2, "delay_s": 0.05})  # no worker consumes the queue yet
    broker = redis.Redis.from_url(django_settings.CELERY_BROKER_URL)
    assert broker.llen(queue) == 1
    broker.delete(queue)  # lost, as by a Redis restarted without persistence (this test's queue only)
    # Its reaper runs every LEASE_S / 2 = 1 s and sends a session queued for 1 s again.
    worker = start_worker(queue, OPENPROGRAM_EXECUTOR="celery", OPENPROGRAM_QUEUED_RESEND_S="1",
                          OPENPROGRAM_LEASE_S="2", OPENPROGRAM_HEARTBEAT_S="0.5")
    session = wait_for_end(session, RUN_S)
    assert (session.status, session.result, session.error) == ("completed", 2, "")
    assert len(nodes(session)) == 3
    assert "last sent to the Celery broker, which may have lost their messages: sent again" in worker.log()
