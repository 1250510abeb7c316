"""The reaper: a session whose lease expired ends `interrupted`, its open nodes with it, and start-up
recovery ends only what no process will finish."""
from __future__ import annotations

import subprocess
import sys

import pytest
from django.core.management import call_command

from dag.models import Node, Session
from dag.recording import write_path
from dag.runs import leases, lifecycle, reaper

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
