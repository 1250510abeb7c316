"""Steering a live run through the API: approving and denying tool calls, timeouts, stops, pause and resume."""
from __future__ import annotations

import json
import threading

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from dag.models import Node, Session
from dag.runs import lifecycle
from dag.runs.launch import launch
from examples.functions import CAREFUL_PREFIX
from runtime import interrupt
from runtime.approval import APPROVAL_TIMEOUT_ENV

from .. import launch_helpers
from ..launch_helpers import wait_for, wait_for_end
from . import steering_functions


@pytest.fixture(autouse=True)
def steering_modules(settings, offline_models):
    settings.OPENPROGRAM_FUNCTION_MODULES = steering_functions.MODULES


def approvals(api, session, count: int = 1) -> list[dict]:
    """The session's pending requests once `count` of them wait."""
    def pending():
        session.refresh_from_db()
        assert not session.is_terminal, f"the run ended before its calls waited: {session.status} {session.error}"
        requests = api.get(f"/api/sessions/{session.pk}/approvals/").json()
        return requests if len(requests) >= count else None
    return wait_for(pending, what=f"{count} approval request(s) of {session.function}")


def answer(api, session, seq: int, **body):
    return api.post(f"/api/sessions/{session.pk}/approvals/{seq}/", body, format="json")


def phase(api, session) -> str:
    return api.get(f"/api/sessions/{session.pk}/").json()["phase"]


def tool_node(session, name: str) -> Node:
    return Node.objects.get(session=session, kind="code", name=name)


@pytest.mark.django_db(transaction=True)
def test_an_approved_call_runs_and_the_run_answers_with_its_result(api, user):
    session = launch(user, "careful_agent", {"task": "the build is green"})
    [request] = approvals(api, session)
    assert request["tool"] == "publish_note"
    assert request["arguments"] == {"text": CAREFUL_PREFIX + "the build is green"}
    assert request["depth"] == 2 and request["path"] == ["careful_agent", "publish_note"] and request["requested_at"]
    assert tool_node(session, "publish_note").status == "awaiting_approval"
    assert phase(api, session) == "awaiting_approval"
    response = answer(api, session, request["node"], approve=True)
    assert response.status_code == 200 and response.json() == {"approve": True, "reason": ""}
    assert wait_for_end(session).status == "completed", session.error
    published = f"published: {CAREFUL_PREFIX}the build is green"
    assert published in session.result
    node = tool_node(session, "publish_note")
    assert node.seq == request["node"] and node.status == "completed" and node.output == published
    assert phase(api, session) == "completed" and session.waiting_for == ""


@pytest.mark.django_db(transaction=True)
def test_a_denial_reaches_the_model_with_its_reason_and_the_node_is_refused(api, user):
    session = launch(user, "careful_agent", {"task": "the build is red"})
    [request] = approvals(api, session)
    assert answer(api, session, request["node"], approve=False, reason="not before the release").status_code == 200
    assert wait_for_end(session).status == "completed", session.error
    denial = "approval to run tool 'publish_note' was denied: not before the release"
    node = tool_node(session, "publish_note")
    assert node.status == "refused" and node.refusal == "denied" and node.error.endswith(denial)
    second_turn = Node.objects.filter(session=session, kind="llm").order_by("seq").last()
    tool_results = [m["content"] for m in second_turn.input["messages"] if m["role"] == "tool"]
    assert tool_results == [f"Refused: {denial}"]
    assert denial in session.result
    assert answer(api, session, request["node"], approve=True).status_code == 409


@pytest.mark.django_db(transaction=True)
def test_a_second_answer_is_a_conflict_and_a_call_that_does_not_wait_is_not_found(api, user):
    session = launch(user, "careful_agent", {"task": "twice"})
    [request] = approvals(api, session)
    assert answer(api, session, request["node"] - 1, approve=True).status_code == 404  # the agent's own node
    assert answer(api, session, 999, approve=True).status_code == 404
    assert answer(api, session, request["node"], approve="yes").status_code == 400
    assert answer(api, session, request["node"], approve=False).status_code == 200
    assert answer(api, session, request["node"], approve=True).status_code == 409
    wait_for_end(session)


@pytest.mark.django_db(transaction=True)
def test_a_reason_no_database_could_store_is_a_400_naming_it(api, user):
    # PostgreSQL's jsonb holds neither NUL nor a lone surrogate: storing one was a 500 there.
    session = launch(user, "careful_agent", {"task": "odd reasons"})
    [request] = approvals(api, session)
    for reason in ("not\x00now", "half \ud83d of a pair"):
        body = json.dumps({"approve": False, "reason": reason})  # escaped: the client's renderer cannot send it
        response = api.post(f"/api/sessions/{session.pk}/approvals/{request['node']}/", body,
                            content_type="application/json")
        assert response.status_code == 400 and list(response.json()) == ["reason"], response.content
    assert tool_node(session, "publish_note").status == "awaiting_approval"
    assert answer(api, session, request["node"], approve=False, reason="not now").status_code == 200
    wait_for_end(session)


def test_listing_waiting_calls_takes_as_many_queries_for_six_as_for_one(api, user):
    session = Session.objects.create(owner=user, function="delegate_note", status="running", attended=True)
    entry = Node.objects.create(session=session, seq=0, kind="code", name="delegate_note", depth=1)
    agent = Node.objects.create(session=session, seq=1, parent=entry, kind="code", name="careful_agent", depth=2)

    def queries_for(waiting: int) -> int:
        first = Node.objects.filter(session=session).count()
        Node.objects.bulk_create(Node(session=session, seq=first + i, parent=agent, kind="code", depth=3,
                                      name="publish_note", status="awaiting_approval") for i in range(waiting))
        with CaptureQueriesContext(connection) as queries:
            listed = api.get(f"/api/sessions/{session.pk}/approvals/").json()
        assert [r["path"] for r in listed] == [["delegate_note", "careful_agent", "publish_note"]] * len(listed)
        Node.objects.filter(session=session, status="awaiting_approval").delete()
        return len(queries)

    assert queries_for(6) == queries_for(1)

@pytest.mark.django_db(transaction=True)
def test_another_users_session_is_not_found(api, user, other_user):
    session = launch(user, "careful_agent", {"task": "mine"})
    [request] = approvals(api, session)
    stranger = APIClient()
    stranger.force_authenticate(other_user)
    for response in (stranger.get(f"/api/sessions/{session.pk}/approvals/"),
                     answer(stranger, session, request["node"], approve=True),
                     stranger.post(f"/api/sessions/{session.pk}/pause/"),
                     stranger.post(f"/api/sessions/{session.pk}/resume/")):
        assert response.status_code == 404
    assert tool_node(session, "publish_note").status == "awaiting_approval"
    lifecycle.request_stop(session.pk)
    wait_for_end(session)


@pytest.mark.django_db(transaction=True)
def test_no_answer_in_time_denies_saying_so(api, user, monkeypatch):
    monkeypatch.setenv(APPROVAL_TIMEOUT_ENV, "0.5")
    session = launch(user, "careful_agent", {"task": "nobody home"})
    assert wait_for_end(session).status == "completed", session.error
    node = tool_node(session, "publish_note")
    assert node.status == "refused" and node.refusal == "denied"
    assert f"no one answered within 0.5 s ({APPROVAL_TIMEOUT_ENV})" in session.result
    assert answer(api, session, node.seq, approve=True).status_code == 409


@pytest.mark.django_db(transaction=True)
def test_a_stop_while_waiting_cancels_the_run_and_the_waiting_node(api, user):
    session = launch(user, "careful_agent", {"task": "stop me"})
    approvals(api, session)
    assert api.post(f"/api/sessions/{session.pk}/stop/").status_code == 200
    assert wait_for_end(session).status == "cancelled"
    assert tool_node(session, "publish_note").status == "cancelled"
    assert not Node.objects.filter(session=session, status__in=["running", "awaiting_approval"]).exists()


@pytest.mark.django_db(transaction=True)
def test_parallel_calls_each_wait_for_their_own_answer(api, user):
    session = launch(user, "mail_two", {})
    requests = approvals(api, session, count=2)
    assert sorted(r["arguments"]["to"] for r in requests) == ["ann", "bob"]
    by_name = {r["arguments"]["to"]: r["node"] for r in requests}
    answer(api, session, by_name["ann"], approve=True)
    # One answered, the other still waits: the session still shows it waiting.
    wait_for(lambda: len(api.get(f"/api/sessions/{session.pk}/approvals/").json()) == 1, what="ann's call to run")
    assert phase(api, session) == "awaiting_approval"
    answer(api, session, by_name["bob"], approve=False, reason="bob is on holiday")
    assert wait_for_end(session).status == "completed", session.error
    assert "sent to ann" in session.result and "bob is on holiday" in session.result


@pytest.mark.django_db(transaction=True)
def test_a_request_three_levels_down_waits_the_same_way(api, user):
    session = launch(user, "delegate_note", {"task": "deep"})
    [request] = approvals(api, session)
    assert request["depth"] == 3 and request["path"] == ["delegate_note", "careful_agent", "publish_note"]
    answer(api, session, request["node"], approve=True)
    assert wait_for_end(session).status == "completed" and "published: " in session.result


@pytest.mark.django_db(transaction=True)
def test_an_unattended_launch_offers_no_tool_that_needs_approval(api, user):
    body = api.post("/api/sessions/", {"function": "careful_agent", "args": {"task": "quietly"},
                                       "unattended": True}, format="json").json()
    assert body["attended"] is False
    session = wait_for_end(Session.objects.get(pk=body["id"]))
    assert session.status == "completed" and not Node.objects.filter(session=session, name="publish_note").exists()
    attended = api.post("/api/sessions/", {"function": "careful_agent", "args": {"task": "x"}}, format="json").json()
    assert attended["attended"] is True
    lifecycle.request_stop(attended["id"])
    wait_for_end(Session.objects.get(pk=attended["id"]))


# --- pause and resume -------------------------------------------------------------------------------

def node_count(session) -> int:
    return Node.objects.filter(session=session).count()


@pytest.mark.django_db(transaction=True)
def test_pause_stops_at_the_next_boundary_and_resume_goes_on(api, user):
    session = launch(user, "slow_count", {"n": 40, "delay_s": 0.05})
    wait_for(lambda: node_count(session) >= 3, what="the count to start")
    assert api.post(f"/api/sessions/{session.pk}/pause/").json()["pause_requested"] is True
    wait_for(lambda: phase(api, session) == "paused", what="the run to pause")
    written = node_count(session)
    # Several watcher polls later, still nothing new: a paused run writes no node.
    for _ in range(3):
        wait_for(lambda: phase(api, session) == "paused", what="the run to stay paused")
        session.refresh_from_db()
        assert node_count(session) == written and session.status == "running"
    assert api.post(f"/api/sessions/{session.pk}/resume/").json()["pause_requested"] is False
    assert wait_for_end(session).status == "completed" and session.result == 40
    assert session.waiting_for == ""


@pytest.mark.django_db(transaction=True)
def test_a_pause_asked_while_a_model_call_waits_pauses_the_run_there(api, user, settings, monkeypatch):
    settings.OPENPROGRAM_FUNCTION_MODULES = [*steering_functions.MODULES, launch_helpers.MODULE]
    monkeypatch.setattr(interrupt, "BELL_WAKE_S", 600.0)  # the call waits on its run's bell alone
    session = launch(user, "ask_sleeping_model", {})
    wait_for(lambda: Node.objects.filter(session=session, kind="llm", status="running").exists(),
             what="the model call to wait")
    api.post(f"/api/sessions/{session.pk}/pause/")
    wait_for(lambda: phase(api, session) == "paused", what="the run to pause inside its model call")
    api.post(f"/api/sessions/{session.pk}/stop/")
    assert wait_for_end(session).status == "cancelled"


@pytest.mark.django_db(transaction=True)
def test_a_stop_while_paused_cancels_the_run(api, user):
    session = launch(user, "slow_count", {"n": 40, "delay_s": 0.05})
    wait_for(lambda: node_count(session) >= 2, what="the count to start")
    api.post(f"/api/sessions/{session.pk}/pause/")
    wait_for(lambda: phase(api, session) == "paused", what="the run to pause")
    api.post(f"/api/sessions/{session.pk}/stop/")
    assert wait_for_end(session).status == "cancelled"
    assert not Node.objects.filter(session=session, status="running").exists()


@pytest.mark.django_db(transaction=True)
def test_a_pause_asked_before_the_run_starts_holds_it_at_its_first_call(api, user):
    session = Session.objects.create(owner=user, function="slow_count", args={"n": 2, "delay_s": 0},
                                     attended=True, pause_requested=True)
    runner = threading.Thread(target=lifecycle.run_session, args=(session.pk,))
    runner.start()
    try:
        wait_for(lambda: phase(api, session) == "paused", what="the run to pause at its first call")
        assert node_count(session) == 0
        api.post(f"/api/sessions/{session.pk}/resume/")
        assert wait_for_end(session).status == "completed"
    finally:
        runner.join(60)


@pytest.mark.django_db(transaction=True)
def test_pause_of_an_ended_session_changes_nothing(api, user):
    session = launch(user, "slow_count", {"n": 1, "delay_s": 0})
    wait_for_end(session)
    response = api.post(f"/api/sessions/{session.pk}/pause/")
    assert response.status_code == 200
    assert response.json()["status"] == "completed" and response.json()["pause_requested"] is False


@pytest.mark.django_db(transaction=True)
def test_the_forms_unattended_box_launches_unattended(logged_in, user):
    assert logged_in.post("/functions/careful_agent/", {"task": "a", "budget-unattended": "on"}).status_code == 302
    assert logged_in.post("/functions/careful_agent/", {"task": "b"}).status_code == 302
    sessions = {session.args["task"]: session for session in Session.objects.all()}
    assert sessions["a"].attended is False and sessions["b"].attended is True
    for session in sessions.values():
        lifecycle.request_stop(session.pk)
        wait_for_end(session)


@pytest.mark.django_db(transaction=True)
def test_a_run_that_died_while_a_call_waited_leaves_no_call_waiting(user):
    from dag.recording import write_path
    session = Session.objects.create(owner=user, function="careful_agent", args={}, status="running", attended=True)
    node = write_path.create_awaiting_node(session.pk, kind="code", name="publish_note", input={"text": "x"})
    session.refresh_from_db()
    assert session.phase == "awaiting_approval"
    write_path.finish_session(session.pk, Session.Status.INTERRUPTED, error="the worker died")
    node.refresh_from_db()
    assert node.status == "interrupted"


@pytest.mark.django_db(transaction=True)
def test_openprogram_unattended_set_on_makes_the_apps_launches_unattended_unless_asked(api, user, monkeypatch):
    monkeypatch.setenv("OPENPROGRAM_UNATTENDED", "on")
    default = api.post("/api/sessions/", {"function": "careful_agent", "args": {"task": "a"}}, format="json").json()
    asked = api.post("/api/sessions/", {"function": "careful_agent", "args": {"task": "b"}, "unattended": False},
                     format="json").json()
    assert default["attended"] is False and asked["attended"] is True
    for session in Session.objects.all():
        lifecycle.request_stop(session.pk)
        wait_for_end(session)
