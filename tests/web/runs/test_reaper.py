"""The reaper: a session whose lease expired ends `interrupted`, its open nodes with it, and start-up
recovery ends only what no process will finish; with Celery, a session left queued (its message lost)
is sent again."""
from __future__ import annotations

import subprocess
import sys
import threading
from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.core.management import call_command
from django.db import connection

from dag.conf import conf
from dag.models import Node, Session
from dag.recording import write_path
from dag.runs import leases, lifecycle, reaper
from dag.runs.celery_executor import CeleryExecutor

from ..dag_helpers import new_session
from .lease_helpers import LEASE_S, T0, WORKER, at, claimed

pytestmark = pytest.mark.django_db


def test_an_expired_lease_is_interrupted_with_every_open_node():
    session = claimed()
    outer = write_path.create_node(session.pk, kind="code", name="outer")
    inner = write_path.create_node(session.pk, kind="llm", name="llm", parent_id=outer.pk)
    done = write_path.create_node(session.pk, kind="code", name="done", parent_id=outer.pk)
    write_path.finish_node(done, status="completed")
    assert session.pk in reaper.reap(now=at(LEASE_S + 1), lease_s=LEASE_S)
    session.refresh_from_db()
    assert session.status == "interrupted" and session.finished_at is not None
    assert WORKER in session.error and T0.isoformat(timespec="seconds") in session.error
    statuses = dict(Node.objects.filter(session=session).values_list("name", "status"))
    assert statuses == {"outer": "interrupted", "llm": "interrupted", "done": "completed"}
    assert not Node.objects.filter(session=session, status="running").exists()
    assert reaper.reap(now=at(LEASE_S + 2), lease_s=LEASE_S) == []  # once


def test_a_lease_renewed_in_time_is_kept():
    session = claimed()
    write_path.renew_leases(WORKER, [session.pk], at(10))
    assert reaper.reap(now=at(LEASE_S + 1), lease_s=LEASE_S) == []
    assert Session.objects.get(pk=session.pk).status == "running"


def test_a_lease_renewed_after_the_reaper_read_it_is_kept():
    session = claimed()
    assert session.pk in reaper.expired(at(LEASE_S + 1), LEASE_S)
    write_path.renew_leases(WORKER, [session.pk], at(LEASE_S + 0.5))  # the worker was only slow
    assert not write_path.end_expired_lease(session.pk, lease_s=LEASE_S, now=at(LEASE_S + 1))
    assert Session.objects.get(pk=session.pk).status == "running"


def test_a_session_claimed_without_a_lease_is_not_the_reapers():
    session = new_session()
    write_path.claim_session(session.pk)
    assert reaper.reap(now=at(10 * LEASE_S), lease_s=LEASE_S) == []


@pytest.mark.parametrize("first", ["completed", "cancelled"])
def test_the_reaper_never_replaces_a_status_the_run_reached_first(first):
    session = claimed()
    assert write_path.finish_session(session.pk, first, lease=WORKER)
    assert not write_path.end_expired_lease(session.pk, lease_s=LEASE_S, now=at(LEASE_S + 1))
    assert Session.objects.get(pk=session.pk).status == first


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def this_host(pid: int) -> str:
    return f"{leases.worker_id().rsplit(':', 1)[0]}:{pid}"


def test_start_up_recovery_ends_only_what_no_process_will_finish(settings):
    settings.OPENPROGRAM_LEASE_S = LEASE_S
    now = at(5)
    live_here = claimed(worker=leases.worker_id(), now=now)       # a run_function still going
    live_worker = claimed(worker="host-b:202", now=now)           # a worker elsewhere, renewing
    expired = claimed(worker="host-c:303", now=at(-LEASE_S * 2))   # died without a word
    previous_server = claimed(worker=this_host(dead_pid()), now=now)
    queued = new_session()
    lifecycle.recover_at_start(in_process=True, now=now)
    status = dict(Session.objects.values_list("pk", "status"))
    assert status[live_here.pk] == status[live_worker.pk] == "running"
    assert status[expired.pk] == status[previous_server.pk] == "interrupted"
    # Queued in the previous server's own pool, which died with it: ended, so it neither hangs queued
    # nor counts against its owner's active runs.
    assert status[queued.pk] == "interrupted"
    assert "stopped before running it" in Session.objects.get(pk=queued.pk).error


def test_start_up_recovery_with_workers_leaves_this_hosts_leases_to_the_reaper_and_the_queue_alone():
    gone = claimed(worker=this_host(dead_pid()), now=at(0))
    queued = new_session()  # waiting in the broker for a worker
    assert lifecycle.recover_at_start(in_process=False, now=at(1)) == 0
    assert Session.objects.get(pk=gone.pk).status == "running"
    assert Session.objects.get(pk=queued.pk).status == "queued"


def test_the_start_up_command_leaves_a_live_lease_running():
    # The real clock: `make run` has no other. A lease renewed just now is live.
    from django.utils import timezone
    live = claimed(worker="host-b:202", now=timezone.now())
    call_command("interrupt_orphaned_runs")
    assert Session.objects.get(pk=live.pk).status == "running"


async def test_a_web_process_starts_its_reaper_at_its_first_connection_only(monkeypatch):
    from openprogram_web import asgi

    started, served = [], []
    monkeypatch.setattr(asgi.reaper, "start", lambda: started.append(True))

    async def app(scope, receive, send):
        served.append(scope["type"])

    wrapped = asgi.StartsReaper(app)
    await wrapped({"type": "lifespan"}, None, None)
    assert not started  # a lifespan message is not a connection
    for kind in ("http", "websocket", "http"):
        await wrapped({"type": kind}, None, None)
    assert started == [True] and served == ["lifespan", "http", "websocket", "http"]
    assert isinstance(asgi.application, asgi.StartsReaper)


@pytest.mark.parametrize("module, starts", [("openprogram_web.serve", True), ("openprogram_web.asgi", False)])
def test_the_server_entry_starts_the_reaper_as_it_loads_and_the_application_module_does_not(tmp_path, module, starts):
    # A server just started, with no one connecting, must still write off a dead worker's sessions.
    import os
    import subprocess
    import sys
    from pathlib import Path
    code = (f"import threading, {module}; "
            "print(any(t.name == 'openprogram-reaper' for t in threading.enumerate()))")
    env = {**os.environ, "OPENPROGRAM_VAR_DIR": str(tmp_path / "var")}
    env.pop("DATABASE_URL", None)
    out = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[3], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-1] == str(starts)


def test_a_session_deleted_under_the_reaper_or_its_run_ends_nothing_and_stops_the_run():
    """Deleted (an admin) after the reaper read it or while its run goes on: finishing it changes
    nothing and says so, the reaper's pass goes on, and the run's next write stops it."""
    gone, expired = claimed(), claimed()
    write_path.delete_sessions([gone.pk])
    assert write_path.end_expired_lease(gone.pk, lease_s=LEASE_S, now=at(LEASE_S + 1)) is False
    assert write_path.finish_session(gone.pk, Session.Status.COMPLETED, lease=WORKER) is False
    assert write_path.finish_session(gone.pk, Session.Status.CANCELLED) is False
    assert expired.pk in reaper.reap(now=at(LEASE_S + 1), lease_s=LEASE_S)
    with pytest.raises(write_path.WriteRefused, match="it was deleted"):
        write_path.update_session(gone.pk, lease=WORKER, budget_spend={"llm_calls": 1})


RESEND_S = 60.0


@pytest.fixture
def broker(settings, monkeypatch):
    """The Celery executor with its broker replaced by a list of the tasks sent: (task id, queue)."""
    from openprogram_web.celery import app

    settings.OPENPROGRAM_EXECUTOR, settings.OPENPROGRAM_CELERY_QUEUE = "celery", "test-resend"
    settings.OPENPROGRAM_QUEUED_RESEND_S = RESEND_S
    sent = []
    monkeypatch.setattr(app, "send_task", lambda name, args, task_id, queue: sent.append((task_id, queue)))
    return sent


def sent_at(session, seconds: float):
    """`seconds` after the session was last sent, by the stored stamp."""
    return Session.objects.get(pk=session.pk).sent_at + timedelta(seconds=seconds)


def test_with_celery_a_session_still_queued_after_the_resend_interval_is_sent_again(broker, caplog):
    session = new_session()
    CeleryExecutor.from_settings(conf).send(str(session.pk))  # what a launch does after its commit
    assert broker == [(str(session.pk), "test-resend")]
    assert reaper.resend_queued(now=sent_at(session, RESEND_S - 1)) == []
    resent_at = sent_at(session, RESEND_S + 1)
    with caplog.at_level("WARNING", logger="dag.runs.reaper"):
        assert reaper.resend_queued(now=resent_at) == [session.pk]
    assert broker == [(str(session.pk), "test-resend")] * 2  # the same task id: a duplicate runs nothing twice
    assert Session.objects.get(pk=session.pk).sent_at == resent_at
    assert [r.getMessage() for r in caplog.records] == [
        "1 session(s) still queued 60 s or more after they were last sent to the Celery broker, which may "
        "have lost their messages: sent again"]


def test_two_reaper_passes_in_one_interval_send_a_session_again_once(broker):
    session = new_session()
    CeleryExecutor.from_settings(conf).send(str(session.pk))
    first = sent_at(session, RESEND_S + 1)
    assert reaper.resend_queued(now=first) == [session.pk]
    assert reaper.resend_queued(now=first) == []  # another process's reaper, at the same moment
    assert reaper.resend_queued(now=first + timedelta(seconds=RESEND_S - 1)) == []
    # It had waited RESEND_S + 1 when it was sent again: the next send waits as long again, at least.
    assert reaper.resend_queued(now=first + timedelta(seconds=RESEND_S + 1)) == []
    assert reaper.resend_queued(now=first + timedelta(seconds=2 * RESEND_S + 2)) == [session.pk]
    assert len(broker) == 3  # the launch's send, then once per (doubling) interval


def test_a_session_the_broker_cannot_take_again_stays_queued_for_the_next_pass(broker, monkeypatch, caplog):
    from kombu.exceptions import OperationalError

    from openprogram_web.celery import app
    session = new_session()
    CeleryExecutor.from_settings(conf).send(str(session.pk))

    def broker_down(*args, **kwargs):
        raise OperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")
    monkeypatch.setattr(app, "send_task", broker_down)
    first = sent_at(session, RESEND_S + 1)
    with caplog.at_level("WARNING", logger="dag.runs.celery_executor"):
        assert reaper.resend_queued(now=first) == [session.pk]
    assert Session.objects.get(pk=session.pk).status == "queued"  # accepted once: not ended for a broker outage
    assert any("they stay queued and a later reaper pass tries again" in record.getMessage()
               for record in caplog.records)
    monkeypatch.setattr(app, "send_task", lambda name, args, task_id, queue: broker.append((task_id, queue)))
    assert reaper.resend_queued(now=first + timedelta(seconds=2 * RESEND_S + 2)) == [session.pk]
    assert broker == [(str(session.pk), "test-resend")] * 2


def test_a_session_waiting_behind_a_backlog_is_sent_again_at_doubling_intervals_not_every_one(broker):
    session = new_session()
    created = Session.objects.get(pk=session.pk).created_at
    sends = []
    for minute in range(0, 121):  # a pass every minute for two hours
        now = created + timedelta(minutes=minute)
        if reaper.resend_queued(now=now):
            sends.append(minute)
    assert sends == [2, 4, 8, 16, 32, 64]  # due once it waited over RESEND_S (a minute), then twice as long
    assert len(broker) == len(sends)


def test_one_pass_sends_at_most_its_share_and_the_next_pass_the_rest(broker):
    sessions = [new_session() for _ in range(reaper.RESEND_PER_PASS + 7)]
    late = Session.objects.get(pk=sessions[-1].pk).created_at + timedelta(seconds=RESEND_S + 1)
    assert len(reaper.resend_queued(now=late)) == reaper.RESEND_PER_PASS
    assert len(reaper.resend_queued(now=late)) == 7
    assert len({task_id for task_id, _ in broker}) == len(sessions)


def test_a_session_queued_before_sends_were_stamped_counts_from_its_creation(broker):
    session = new_session()  # never sent through this executor: no stamp
    created = Session.objects.get(pk=session.pk).created_at
    assert reaper.resend_queued(now=created + timedelta(seconds=RESEND_S - 1)) == []
    assert reaper.resend_queued(now=created + timedelta(seconds=RESEND_S + 1)) == [session.pk]
    assert broker == [(str(session.pk), "test-resend")]


def test_only_queued_sessions_are_sent_again_and_only_with_celery(broker, settings):
    running, stopped, queued = claimed(), new_session(), new_session()
    write_path.record_stop_request(stopped.pk)
    late = at(10 * RESEND_S)
    settings.OPENPROGRAM_EXECUTOR = "inprocess"
    assert reaper.resend_queued(now=late) == []
    assert Session.objects.get(pk=queued.pk).sent_at is None
    settings.OPENPROGRAM_EXECUTOR = "celery"
    assert reaper.resend_queued(now=late) == [queued.pk]
    assert broker == [(str(queued.pk), "test-resend")]


@pytest.mark.skipif(not django_settings.DATABASES["default"]["ENGINE"].endswith("postgresql"),
                    reason="two processes' reapers at once need PostgreSQL's row locks")
@pytest.mark.django_db(transaction=True)
def test_two_reapers_at_once_send_each_lost_session_again_once():
    """Two processes' passes at the same moment (threads here, each on its own connection): the
    sessions are split between them, none sent by both."""
    sessions = {new_session().pk for _ in range(40)}
    start, won = threading.Barrier(2), []

    def reaper_pass():
        start.wait()
        try:
            won.append(write_path.claim_resend(cutoff=at(RESEND_S), now=at(RESEND_S), limit=100))
        finally:
            connection.close()
    passes = [threading.Thread(target=reaper_pass) for _ in range(2)]
    for one in passes:
        one.start()
    for one in passes:
        one.join()
    first, second = map(set, won)
    assert first | second == sessions and not first & second
