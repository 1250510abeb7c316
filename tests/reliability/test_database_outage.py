"""Runs that wait hold nothing, on real Celery workers (the scaled pass: PostgreSQL and Redis): hundreds of
waiting runs on two workers with default settings within a few connections, and the database's connections
cut mid-run (a proxy this test controls, never a restart of the shared server) waited out, nothing lost.

Every wait is a generous bound on a broken run, never a timing the assertions rely on: how many runs are
under way at once, and when they end, is the test's (they run until it creates their release file).
"""
from __future__ import annotations

import asyncio
import threading
import time
import uuid
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from django.db import connection

from dag.models import Node, Session
from dag.runs.launch import launch
from tests.database_url import database_url
from tests.web.launch_helpers import wait_for
from tests.web.runs.celery_workers import Worker, new_queue, scaled_only

from .live_runs import database_view, start_server, viewer  # noqa: F401 (fixtures)
from .stream_client import StreamClient
from .tcp_proxy import TcpProxy

pytestmark = [scaled_only(), pytest.mark.django_db(transaction=True)]

MODULES = "examples.functions,tests.reliability.waiting_functions"
BOUND_S = 180.0  # on anything a broken run would never do
SAMPLE_S = 0.05


@pytest.fixture
def release(tmp_path):
    """The file whose creation ends the runs; created at the end whatever happened, so none outlives the test."""
    path = tmp_path / "release"
    yield path
    path.touch()


@pytest.fixture
def workers(tmp_path):
    """`workers(queue, n, **env)`: n workers started and ready; every one is stopped (by PID) at the end."""
    started: list[Worker] = []

    def start(queue: str, count: int, **env) -> list[Worker]:
        new = [Worker(tmp_path, queue, OPENPROGRAM_FUNCTION_MODULES=MODULES, **env) for _ in range(count)]
        started.extend(new)
        return [worker.wait_ready() for worker in new]
    yield start
    for worker in started:
        worker.stop()


class PeakConnections:
    """Samples, on a thread of its own, how many connections PostgreSQL has open for `application_name`."""

    def __init__(self, application_name: str):
        self.application_name, self.peak = application_name, 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> "PeakConnections":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()

    def _sample(self) -> None:
        with psycopg.connect(database_url(connection.settings_dict), autocommit=True) as sampler:
            while not self._done.wait(SAMPLE_S):
                count = sampler.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                                        [self.application_name]).fetchone()[0]
                self.peak = max(self.peak, count)


def ended(session_ids) -> list[Session]:
    def all_ended():
        sessions = list(Session.objects.filter(pk__in=session_ids))
        return sessions if all(session.is_terminal for session in sessions) else None
    return wait_for(all_ended, BOUND_S, f"{len(session_ids)} sessions to end")


def test_three_hundred_waiting_runs_on_two_default_workers_all_complete_within_thirty_connections(
        settings, user, workers, release):
    queue, tag = new_queue(), f"openprogram-test-{uuid.uuid4().hex[:8]}"
    settings.OPENPROGRAM_EXECUTOR, settings.OPENPROGRAM_CELERY_QUEUE = "celery", queue
    settings.OPENPROGRAM_FUNCTION_MODULES = MODULES.split(",")
    settings.OPENPROGRAM_MAX_ACTIVE_RUNS_PER_USER = 0  # one user launches all three hundred
    first, second = workers(queue, 2, PGAPPNAME=tag, concurrency=None)  # default concurrency and pool
    with PeakConnections(tag) as connections_seen:
        ids = [str(launch(user, "wait_for_release", {"release_file": str(release)}).pk) for _ in range(300)]
        wait_for(lambda: Session.objects.filter(pk__in=ids, status="running").count() == 300, BOUND_S,
                 "all 300 runs to be under way at once")
        release.touch()
        sessions = ended(ids)
    assert {session.status for session in sessions} == {"completed"}, {s.error for s in sessions}
    assert Node.objects.filter(session_id__in=ids, status="completed").count() == 900  # each, and two steps
    assert first.received() & set(ids) and second.received() & set(ids)
    assert 0 < connections_seen.peak <= 30, connections_seen.peak


def test_pool_pressure_never_writes_off_a_healthy_run(settings, user, workers, release):
    """Twenty runs on the smallest pool start-up allows (one connection for runs beside upkeep's four) and a
    short lease: the heartbeat and the reaper keep their connections, so no run is written off."""
    queue = new_queue()
    settings.OPENPROGRAM_EXECUTOR, settings.OPENPROGRAM_CELERY_QUEUE = "celery", queue
    settings.OPENPROGRAM_FUNCTION_MODULES = MODULES.split(",")
    settings.OPENPROGRAM_MAX_ACTIVE_RUNS_PER_USER = 0
    workers(queue, 1, concurrency=20, OPENPROGRAM_DB_POOL_SIZE="5", OPENPROGRAM_DB_POOL_TIMEOUT_S="1",
            OPENPROGRAM_LEASE_S="3", OPENPROGRAM_HEARTBEAT_S="0.5")
    ids = [str(launch(user, "count_until_released", {"release_file": str(release), "delay_s": 0.1}).pk)
           for _ in range(20)]
    # Each run records for many leases (a hundred steps of 0.1 s against a 3 s lease) before it is released.
    wait_for(lambda: all(nodes_of(session_id) >= 100 for session_id in ids), BOUND_S, "every run to go on")
    release.touch()
    sessions = ended(ids)
    assert {session.status for session in sessions} == {"completed"}, {s.error for s in sessions}


def through(proxy: TcpProxy) -> str:
    """The test database's URL, by way of `proxy`."""
    url = urlsplit(database_url(connection.settings_dict))
    return urlunsplit(url._replace(netloc=f"{url.username}@127.0.0.1:{proxy.port}" if url.username
                                   else f"127.0.0.1:{proxy.port}"))


@pytest.fixture
def database_proxy():
    settings_dict = connection.settings_dict
    proxy = TcpProxy(settings_dict.get("HOST") or "127.0.0.1", int(settings_dict.get("PORT") or 5432))
    yield proxy
    proxy.close()


def nodes_of(session_id: str) -> int:
    return Node.objects.filter(session_id=session_id).count()


@pytest.mark.parametrize("cut_s", [5, 20])
def test_a_database_cut_mid_run_is_waited_out_and_every_client_equals_the_database(
        cut_s, start_server, viewer, workers, database_proxy, release):
    queue, url = new_queue(), through(database_proxy)
    # Everything reaches PostgreSQL through the proxy, as in a failover: the web server (its reaper
    # included) and both workers.
    server = start_server(DATABASE_URL=url, OPENPROGRAM_EXECUTOR="celery", OPENPROGRAM_CELERY_QUEUE=queue,
                          OPENPROGRAM_FUNCTION_MODULES=MODULES)
    workers(queue, 2, database_url=url)
    ids = [viewer.launch(server, "count_until_released", {"release_file": str(release), "delay_s": 0.05})
           for _ in range(8)]
    wait_for(lambda: all(nodes_of(session_id) >= 3 for session_id in ids), BOUND_S, "every run to be under way")
    clients = [StreamClient(server.ws_url, session_id, viewer.cookie) for session_id in ids]
    watching = threading.Thread(target=lambda: asyncio.run(follow_all(clients)))
    watching.start()

    database_proxy.cut()
    time.sleep(cut_s)  # the outage's length, not a wait for anything
    database_proxy.restore()
    at_restore = {session_id: nodes_of(session_id) for session_id in ids}
    wait_for(lambda: all(nodes_of(session_id) > at_restore[session_id] + 2 for session_id in ids), BOUND_S,
             "every run to go on recording after the outage")
    release.touch()
    sessions = ended(ids)
    watching.join(BOUND_S)

    assert {session.status for session in sessions} == {"completed"}, {s.error for s in sessions}
    for session in sessions:
        nodes = list(Node.objects.filter(session=session).order_by("seq"))
        assert [node.seq for node in nodes] == list(range(len(nodes)))  # nothing lost, nothing twice
        assert {node.status for node in nodes} == {"completed"}
        assert session.result == len(nodes) - 1  # every count_step it made is recorded, once
    assert not watching.is_alive(), "the websocket clients did not catch up"
    for client in clients:
        assert client.differences(*database_view(client.base.rstrip("/").rsplit("/", 1)[1])) == 0


async def follow_all(clients) -> None:
    await asyncio.gather(*(client.follow(BOUND_S) for client in clients))
