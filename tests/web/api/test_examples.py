"""The API docs' examples are real: the request bodies launch (or fail) as the response examples say,
and every response example has the keys the server answers with."""
from __future__ import annotations

import io

import pytest
import yaml
from django.core.management import call_command

from dag.api import examples
from dag.models import Session

from ..launch_helpers import wait_for, wait_for_end

pytestmark = pytest.mark.django_db

# What differs from one run to the next; everything else must be as the example says.
PER_RUN = {"id", "created_at", "started_at", "finished_at", "worker", "wall_ms", "rev", "parent"}


def same_apart_from_per_run(answer: dict, example: dict) -> None:
    assert set(answer) == set(example)
    assert {k: v for k, v in answer.items() if k not in PER_RUN} == {
        k: v for k, v in example.items() if k not in PER_RUN}


@pytest.fixture
def schema(tmp_path):
    target = tmp_path / "schema.yaml"
    call_command("spectacular", "--file", str(target), stdout=io.StringIO())
    return yaml.safe_load(target.read_text())


@pytest.fixture
def post_queued(api, django_capture_on_commit_callbacks):
    def post(body):
        with django_capture_on_commit_callbacks(execute=False):
            return api.post("/api/sessions/", body, format="json")
    return post


def launched_and_ended(api, body) -> str:
    """Launch `body` through the API (the in-process executor runs it) and wait for its end; its id."""
    response = api.post("/api/sessions/", body, format="json")
    assert response.status_code == 201, response.json()
    wait_for_end(Session.objects.get(pk=response.json()["id"]))
    return response.json()["id"]


def test_the_launch_docs_show_real_bodies_not_placeholders(schema):
    launch = schema["paths"]["/api/sessions/"]["post"]
    bodies = [example["value"] for example in launch["requestBody"]["content"]["application/json"]["examples"].values()]
    assert examples.LAUNCH_SLOW_COUNT == {"function": "slow_count", "args": {"n": 5, "delay_s": 0}}
    assert examples.LAUNCH_SLOW_COUNT in bodies
    assert any("budget" in body and "model" in body for body in bodies)
    assert schema["components"]["schemas"]["Launch"]["properties"]["args"]["type"] == "object"
    for code in ("201", "400", "429"):
        assert launch["responses"][code]["content"]["application/json"]["examples"], code
    for path, method in (("/api/sessions/", "get"), ("/api/sessions/{id}/", "get"),
                         ("/api/sessions/{id}/nodes/", "get"), ("/api/sessions/{id}/export/", "get"),
                         ("/api/sessions/{id}/stop/", "post"), ("/api/sessions/{id}/approvals/", "get"),
                         ("/api/sessions/{id}/approvals/{seq}/", "post"), ("/api/sessions/{id}/pause/", "post"),
                         ("/api/sessions/{id}/resume/", "post")):
        assert schema["paths"][path][method]["responses"]["200"]["content"]["application/json"]["examples"], path


def test_the_launch_examples_answer_as_documented(post_queued, user):
    queued = post_queued(examples.LAUNCH_SLOW_COUNT)
    assert queued.status_code == 201
    same_apart_from_per_run(queued.json(), examples.QUEUED_SESSION)
    budgeted = post_queued(examples.LAUNCH_WITH_BUDGET_AND_MODEL)
    assert budgeted.status_code == 201
    assert budgeted.json()["model"] == "sim:naive"
    assert budgeted.json()["launch_budget"] == examples.LAUNCH_WITH_BUDGET_AND_MODEL["budget"]
    refused = post_queued(examples.LAUNCH_OUT_OF_RANGE)
    assert refused.status_code == 400 and refused.json() == examples.OUT_OF_RANGE_ERROR


def test_the_limit_example_is_what_the_limit_says(local_user, post_queued, api):
    api.force_authenticate(local_user)
    for _ in range(4):  # the default OPENPROGRAM_MAX_ACTIVE_RUNS_PER_USER
        assert post_queued(examples.LAUNCH_SLOW_COUNT).status_code == 201
    limited = post_queued(examples.LAUNCH_SLOW_COUNT)
    assert limited.status_code == 429 and limited.json() == examples.LAUNCH_LIMITED


@pytest.mark.django_db(transaction=True)  # committed: the executor runs it, its heartbeat sees the session
def test_a_finished_run_its_nodes_and_its_export_answer_as_documented(api):
    session_id = launched_and_ended(api, examples.LAUNCH_SLOW_COUNT)
    same_apart_from_per_run(api.get(f"/api/sessions/{session_id}/").json(), examples.COMPLETED_SESSION)
    same_apart_from_per_run(api.get("/api/sessions/").json()["results"][0], examples.COMPLETED_SESSION)
    nodes = api.get(f"/api/sessions/{session_id}/nodes/").json()
    same_apart_from_per_run({**nodes[0], "duration_ms": None}, {**examples.ENTRY_NODE, "duration_ms": None})
    same_apart_from_per_run({**nodes[1], "duration_ms": None}, {**examples.CHILD_NODE, "duration_ms": None})
    exported = api.get(f"/api/sessions/{session_id}/export/").json()
    example = examples.EXPORT_EXAMPLES[0].value
    assert exported["version"] == example["version"]
    same_apart_from_per_run(exported["session"], example["session"])


@pytest.mark.django_db(transaction=True)  # committed: the executor runs it, its heartbeat sees the session
def test_the_refusal_example_is_what_runaway_agent_answers(api):
    session_id = launched_and_ended(api, {"function": "runaway_agent", "args": examples.REFUSED_SESSION["args"]})
    answer = api.get(f"/api/sessions/{session_id}/").json()
    # Token counts follow the simulated model's prompts; the rest is the run's shape.
    answer["usage"] = {**answer["usage"], "input_tokens": None, "output_tokens": None}
    example = {**examples.REFUSED_SESSION,
               "usage": {**examples.REFUSED_SESSION["usage"], "input_tokens": None, "output_tokens": None}}
    same_apart_from_per_run(answer, example)


def test_the_stop_example_is_a_stop_before_the_start(api, post_queued):
    session_id = post_queued(examples.LAUNCH_SLOW_COUNT).json()["id"]
    same_apart_from_per_run(api.post(f"/api/sessions/{session_id}/stop/").json(), examples.CANCELLED_SESSION)
    assert Session.objects.get(pk=session_id).status == "cancelled"


@pytest.mark.django_db(transaction=True)  # committed: the executor runs it, its heartbeat sees the session
def test_the_approval_examples_are_what_a_waiting_careful_agent_answers(api):
    response = api.post("/api/sessions/", examples.LAUNCH_CAREFUL, format="json")
    assert response.status_code == 201, response.json()
    session = Session.objects.get(pk=response.json()["id"])
    approvals = f"/api/sessions/{session.pk}/approvals/"
    [waiting] = wait_for(lambda: api.get(approvals).json() or None, what="careful_agent's approval request")
    assert {**waiting, "requested_at": None} == {**examples.APPROVAL_REQUEST, "requested_at": None}
    answer = f"{approvals}{waiting['node']}/"
    not_waiting = api.post(f"{approvals}0/", examples.APPROVE, format="json")
    assert not_waiting.status_code == 404 and not_waiting.json() == examples.NO_SUCH_REQUEST
    denied = api.post(answer, examples.DENY, format="json")
    assert denied.status_code == 200 and denied.json() == examples.DENY
    again = api.post(answer, examples.APPROVE, format="json")
    assert again.status_code == 409 and again.json() == examples.ANSWERED_ALREADY
    assert wait_for_end(session).status == "completed", session.error


def test_the_pause_and_resume_examples_are_a_pause_before_the_start(api, post_queued):
    session_id = post_queued(examples.LAUNCH_SLOW_COUNT).json()["id"]
    paused = api.post(f"/api/sessions/{session_id}/pause/").json()
    same_apart_from_per_run(paused, examples.PAUSE_EXAMPLES[0].value)
    resumed = api.post(f"/api/sessions/{session_id}/resume/").json()
    same_apart_from_per_run(resumed, examples.RESUME_EXAMPLES[0].value)
    assert [paused["rev"], resumed["rev"]] == [examples.PAUSE_EXAMPLES[0].value["rev"],
                                              examples.RESUME_EXAMPLES[0].value["rev"]]


def test_the_not_found_example_is_the_answer_for_no_such_session(api):
    assert api.get("/api/sessions/00000000-0000-0000-0000-000000000000/").json() == examples.NOT_FOUND
