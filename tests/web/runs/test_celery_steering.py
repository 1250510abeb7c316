"""Answers, pauses and resumes crossing processes: the run on a real Celery worker, the answer from here
(make test's `test-scaled` pass, on PostgreSQL and Redis). Every wait is a generous bound."""
from __future__ import annotations

import pytest

from dag.models import Node
from dag.runs import lifecycle
from dag.runs.launch import launch

from ..launch_helpers import wait_for, wait_for_end
from .celery_workers import Worker, new_queue, scaled_only
# The module's queue and worker, as the stop tests have them: the worker's database poll is an hour apart,
# so an answer reaches its run at once only by Redis.
from .test_celery_workers import queue, worker  # noqa: F401 (fixtures)

pytestmark = [scaled_only(), pytest.mark.django_db(transaction=True)]

RUN_S = 60.0


def on(settings, queue):
    settings.OPENPROGRAM_EXECUTOR, settings.OPENPROGRAM_CELERY_QUEUE = "celery", queue


def waiting_request(api, session) -> dict:
    def pending():
        session.refresh_from_db()
        assert not session.is_terminal, f"the run ended before its call waited: {session.status} {session.error}"
        return api.get(f"/api/sessions/{session.pk}/approvals/").json()
    return wait_for(pending, RUN_S, "the call on the worker to wait for approval")[0]


def test_an_approval_given_here_runs_the_call_on_the_worker(worker, settings, queue, api, user):
    on(settings, queue)
    session = launch(user, "careful_agent", {"task": "across processes"})
    request = waiting_request(api, session)
    assert api.post(f"/api/sessions/{session.pk}/approvals/{request['node']}/", {"approve": True},
                    format="json").status_code == 200
    session = wait_for_end(session, RUN_S)
    assert session.status == "completed" and "published: " in session.result, session.error
    assert Node.objects.get(session=session, name="publish_note").status == "completed"


def test_pause_and_resume_given_here_reach_the_worker(worker, settings, queue, api, user):
    on(settings, queue)
    session = launch(user, "slow_count", {"n": 1000, "delay_s": 0.2})
    wait_for(lambda: Node.objects.filter(session=session, name="count_step").count() >= 2, RUN_S, "the count")
    api.post(f"/api/sessions/{session.pk}/pause/")
    wait_for(lambda: api.get(f"/api/sessions/{session.pk}/").json()["phase"] == "paused", RUN_S, "the pause")
    api.post(f"/api/sessions/{session.pk}/resume/")
    wait_for(lambda: api.get(f"/api/sessions/{session.pk}/").json()["phase"] == "running", RUN_S, "the resume")
    lifecycle.request_stop(session.pk)
    assert wait_for_end(session, RUN_S).status == "cancelled"


def test_a_denial_reaches_a_worker_by_the_database_poll_with_pubsub_off(settings, tmp_path, api, user):
    queue = new_queue()
    poller = Worker(tmp_path, queue, OPENPROGRAM_STOP_PUBSUB="off").wait_ready()
    try:
        on(settings, queue)
        settings.OPENPROGRAM_STOP_PUBSUB = False  # nothing is published: only the answer in the database
        session = launch(user, "careful_agent", {"task": "polled"})
        request = waiting_request(api, session)
        api.post(f"/api/sessions/{session.pk}/approvals/{request['node']}/",
                 {"approve": False, "reason": "read from the database"}, format="json")
        session = wait_for_end(session, RUN_S)
        assert session.status == "completed" and "denied: read from the database" in session.result
    finally:
        poller.stop()
