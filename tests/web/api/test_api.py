"""The REST API: every endpoint, its error statuses and shapes, ownership, and token authentication."""
from __future__ import annotations

import pytest
from knox.models import AuthToken
from rest_framework.test import APIClient

from dag.models import Node, Session
from dag.recording import write_path
from dag.runs.lifecycle import run_session


pytestmark = pytest.mark.django_db


@pytest.fixture
def queued(django_capture_on_commit_callbacks):
    """Launch through the API without running: the executor hand-off is captured, not executed."""
    def post(api, payload):
        with django_capture_on_commit_callbacks(execute=False):
            return api.post("/api/sessions/", payload, format="json")
    return post


def make_session(owner, function="echo", args=None, **fields):
    return Session.objects.create(owner=owner, function=function,
                                  args={"text": "hi"} if args is None else args, **fields)


# --- functions -------------------------------------------------------------------------------------

def test_functions_list_names_labels_descriptions_and_specs(api, test_functions):
    body = api.get("/api/functions/").json()
    by_name = {item["name"]: item for item in body}
    assert {"echo", "explode", "widgets"} <= set(by_name)
    echo = by_name["echo"]
    assert echo["label"] == "Echo" and echo["description"] == "Return the text unchanged."
    assert echo["spec"]["parameters"]["required"] == ["text"]
    assert "secret" not in by_name["widgets"]["spec"]["parameters"]["properties"]  # hidden


def test_function_detail_and_unknown_function(api, test_functions):
    assert api.get("/api/functions/echo/").json()["name"] == "echo"
    response = api.get("/api/functions/nope/")
    assert response.status_code == 404 and "unknown function 'nope'" in response.json()["detail"]


def test_default_catalog_is_the_examples(api):
    names = {item["name"] for item in api.get("/api/functions/").json()}
    assert names == {"wiki_agent", "research_agent", "runaway_agent", "slow_count", "careful_agent"}


# --- launching -------------------------------------------------------------------------------------

def test_launch_returns_201_with_the_queued_session(api, queued, test_functions, user):
    response = queued(api, {"function": "echo", "args": {"text": "hello"}})
    assert response.status_code == 201
    body = response.json()
    session = Session.objects.get(pk=body["id"])
    assert body["status"] == "queued" and body["function"] == "echo" and body["args"] == {"text": "hello"}
    assert session.owner == user


@pytest.mark.parametrize("args, errors", [
    ({}, {"text": ["this argument is required"]}),
    ({"text": 5}, {"text": ["expected a string, got int 5"]}),
    ({"text": "x", "loud": True}, {"loud": ["unknown argument; expected one of: text"]}),
    # PostgreSQL cannot store NUL in text or jsonb: refused like the form refuses it, not a 500.
    ({"text": "a\u0000b"}, {"text": ["Null characters are not allowed."]}),
])
def test_bad_arguments_are_400_by_parameter(api, queued, test_functions, args, errors):
    response = queued(api, {"function": "echo", "args": args})
    assert response.status_code == 400
    assert response.json() == {"args": errors}
    assert not Session.objects.exists()


def test_arguments_that_are_not_an_object_are_400(api, queued, test_functions):
    response = queued(api, {"function": "echo", "args": ["x"]})
    assert response.status_code == 400
    assert response.json()["args"][0].startswith("arguments must be an object")


def test_oversized_arguments_are_400(api, queued, test_functions, settings):
    settings.OPENPROGRAM_MAX_ARGS_BYTES = 100
    response = queued(api, {"function": "echo", "args": {"text": "x" * 200}})
    assert response.status_code == 400
    assert "the limit is 100 bytes" in response.json()["args"][0]


def test_a_body_over_the_upload_limit_is_a_json_400(api, queued, test_functions, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    response = queued(api, {"function": "echo", "args": {"text": "x" * 2000}})
    assert response.status_code == 400 and "over 1000 bytes" in response.json()["detail"]


def test_hidden_parameter_cannot_be_set_through_the_api(api, queued, test_functions):
    response = queued(api, {"function": "widgets", "args": {"question": "q", "secret": "mine"}})
    assert response.status_code == 400 and "secret" in response.json()["args"]


def test_unknown_function_is_400_naming_it(api, queued, test_functions):
    response = queued(api, {"function": "nope", "args": {}})
    assert response.status_code == 400
    message = response.json()["function"][0]
    assert "unknown function 'nope'" in message and "echo" in message


def test_missing_function_is_400(api, queued):
    response = queued(api, {"args": {}})
    assert response.status_code == 400 and "function" in response.json()


def test_non_json_body_is_refused(api):
    response = api.post("/api/sessions/", "function=echo", content_type="application/x-www-form-urlencoded")
    assert response.status_code == 415


# --- reading ---------------------------------------------------------------------------------------

def test_list_is_the_callers_own_newest_first_and_paginated(api, user, other_user):
    older = make_session(user)
    newer = make_session(user)
    make_session(other_user)
    Session.objects.filter(pk=older.pk).update(created_at=newer.created_at.replace(year=2020))
    body = api.get("/api/sessions/").json()
    assert body["count"] == 2 and body["next"] is None
    assert [item["id"] for item in body["results"]] == [str(newer.pk), str(older.pk)]


def test_list_pages(api, user):
    for _ in range(3):
        make_session(user)
    body = api.get("/api/sessions/?page=2&page_size=2").json()
    assert body["count"] == 3 and body["previous"] is not None and len(body["results"]) == 1
    assert api.get("/api/sessions/?page=9").status_code == 404


def test_session_detail_is_the_recorded_session_with_its_run_summary(api, user):
    session = make_session(user)
    body = api.get(f"/api/sessions/{session.pk}/").json()
    summary = {"counts": {}, "usage": {"llm_calls": 0, "input_tokens": 0, "output_tokens": 0}, "warning": "",
               "wall_ms": None, "cost_usd": 0.0, "cost_unknown_calls": 0}
    assert body == {**Session.objects.get(pk=session.pk).as_dict(), **summary}


@pytest.mark.django_db(transaction=True)  # the run's heartbeat must see its session
def test_nodes_since_revision_in_seq_order(api, user, test_functions):
    session = make_session(user, function="echo", args={"text": "hi"})
    run_session(session.pk)
    nodes = api.get(f"/api/sessions/{session.pk}/nodes/").json()
    assert [n["name"] for n in nodes] == ["echo"]
    node = nodes[0]
    for key in ("id", "seq", "parent", "kind", "name", "status", "depth", "name_depth", "input", "output",
                "error", "rev", "started_at", "finished_at", "usage"):
        assert key in node
    assert node["status"] == "completed" and node["output"] == "hi" and node["input"] == {"text": "hi"}
    # a later change to an early node, and a new node: both come back after the old revision, by seq
    last_rev = Session.objects.get(pk=session.pk).rev
    first = write_path.create_node(session.pk, kind="code", name="late", depth=1)
    write_path.finish_node(first, status="completed", output=1)
    changed = api.get(f"/api/sessions/{session.pk}/nodes/?since_rev={last_rev}").json()
    assert [n["name"] for n in changed] == ["late"] and changed[0]["rev"] > last_rev
    everything = api.get(f"/api/sessions/{session.pk}/nodes/?since_rev=0").json()
    assert [n["seq"] for n in everything] == [0, 1]
    current = Session.objects.get(pk=session.pk).rev
    assert api.get(f"/api/sessions/{session.pk}/nodes/?since_rev={current}").json() == []


@pytest.mark.parametrize("value", ["x", "-1", "1.5", "", "\u0663", "\u00b2", "1_0", "+1", " 1 ", "1\n"])
def test_bad_since_rev_is_400(api, user, value):
    """Read as `page` and `page_size` are: ASCII digits only (int() also reads "+1", " 1 ", "1_0", "٣")."""
    session = make_session(user)
    response = api.get(f"/api/sessions/{session.pk}/nodes/", {"since_rev": value})
    assert response.status_code == 400 and "since_rev" in response.json()


@pytest.mark.parametrize("digits", [19, 4_300, 5_000])
def test_a_since_rev_past_any_revision_has_no_changes(api, user, digits):
    session = make_session(user)
    response = api.get(f"/api/sessions/{session.pk}/nodes/", {"since_rev": "9" * digits})
    assert response.status_code == 200 and response.json() == []


@pytest.mark.django_db(transaction=True)  # the run's heartbeat must see its session
def test_export_is_the_whole_dag(api, user, test_functions):
    session = make_session(user, function="echo")
    run_session(session.pk)
    body = api.get(f"/api/sessions/{session.pk}/export/").json()
    assert body["session"]["id"] == str(session.pk) and body["session"]["status"] == "completed"
    assert [n["name"] for n in body["nodes"]] == ["echo"]


@pytest.mark.django_db(transaction=True)  # an async run records from a helper thread: it must see the rows
def test_async_functions_run_and_record_their_calls(api, user, test_functions):
    session = make_session(user, function="async_echo", args={"text": "later"})
    run_session(session.pk)
    assert api.get(f"/api/sessions/{session.pk}/").json()["result"] == "later"
    nodes = api.get(f"/api/sessions/{session.pk}/nodes/").json()
    assert [(n["name"], n["depth"], n["status"]) for n in nodes] == [("async_echo", 1, "completed"),
                                                                     ("echo", 2, "completed")]


def test_a_run_that_calls_sys_exit_ends_and_the_exit_goes_on(api, user, test_functions):
    session = make_session(user, function="exit_early", args={})
    with pytest.raises(SystemExit):  # not swallowed: it asks the process to stop
        run_session(session.pk)
    assert api.get(f"/api/sessions/{session.pk}/").json()["status"] == "error"
    assert "SystemExit" in Session.objects.get(pk=session.pk).error
    assert Node.objects.get(session=session).status == "error"


def test_run_error_is_kept_on_the_session(api, user, test_functions):
    session = make_session(user, function="explode", args={"message": "kaboom"})
    run_session(session.pk)
    body = api.get(f"/api/sessions/{session.pk}/").json()
    assert body["status"] == "error" and "kaboom" in body["error"]
    assert Node.objects.get(session=session).status == "error"


# --- stop ------------------------------------------------------------------------------------------

def test_stop_of_a_finished_session_changes_nothing(api, user, test_functions):
    session = make_session(user, function="echo")
    run_session(session.pk)
    before = api.get(f"/api/sessions/{session.pk}/").json()
    response = api.post(f"/api/sessions/{session.pk}/stop/")
    assert response.status_code == 200 and response.json() == before


def test_stop_is_idempotent(api, user):
    session = make_session(user)
    first = api.post(f"/api/sessions/{session.pk}/stop/").json()
    second = api.post(f"/api/sessions/{session.pk}/stop/").json()
    assert first["status"] == second["status"] == "cancelled"
    assert first == second


# --- ownership and authentication --------------------------------------------------------------------

@pytest.mark.parametrize("method, suffix", [("get", ""), ("get", "nodes/"), ("get", "export/"), ("post", "stop/")])
def test_another_users_session_is_404(user, other_user, method, suffix):
    session = make_session(user)
    client = APIClient()
    client.force_authenticate(other_user)
    response = getattr(client, method)(f"/api/sessions/{session.pk}/{suffix}")
    assert response.status_code == 404
    session.refresh_from_db()
    assert session.cancel_requested is False and session.status == "queued"


@pytest.mark.parametrize("method, path", [("get", "/api/functions/"), ("get", "/api/sessions/"),
                                          ("post", "/api/sessions/"), ("get", "/api/schema/")])
def test_anonymous_requests_are_refused(method, path):
    """A 401 naming the scheme to authenticate with, as the schema documents (DRF answers the first
    authenticator's WWW-Authenticate, so the token's comes first)."""
    response = getattr(APIClient(), method)(path)
    assert response.status_code == 401 and response["WWW-Authenticate"] == "Token"


def test_token_authentication(user):
    _, key = AuthToken.objects.create(user=user)
    make_session(user)
    client = APIClient()
    assert client.get("/api/sessions/").status_code == 401
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.get("/api/sessions/").json()["count"] == 1
    for unknown in ("Token wrong", f"Token {'0' * len(key)}"):
        client.credentials(HTTP_AUTHORIZATION=unknown)
        refused = client.get("/api/sessions/")
        assert refused.status_code == 401 and refused["WWW-Authenticate"] == "Token"
        assert refused.json() == {"detail": "Invalid token."}


def test_token_endpoint_exchanges_a_password_for_the_token(user):
    response = APIClient().post("/api/token/", {"username": "alice", "password": "alice-password-1"},
                                format="json")
    assert response.status_code == 200
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {response.json()['token']}")
    assert client.get("/api/sessions/").status_code == 200
    bad = APIClient().post("/api/token/", {"username": "alice", "password": "nope"}, format="json")
    assert bad.status_code == 400


def test_session_auth_needs_csrf_for_writes(client, user):
    from django.test import Client

    strict = Client(enforce_csrf_checks=True)
    strict.force_login(user)
    session = make_session(user)
    assert strict.post(f"/api/sessions/{session.pk}/stop/").status_code == 403


@pytest.mark.django_db
def test_a_session_records_the_model_it_was_launched_on(monkeypatch, user):
    from dag.runs.launch import create_session
    from dag.runs.model_choice import configured_model

    for name in ("OPENPROGRAM_MODEL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    assert create_session(user, "slow_count", {"n": 1}).model == "sim"
    monkeypatch.setenv("OPENPROGRAM_MODEL", "openai:gpt-4o-mini")
    assert configured_model() == "openai:gpt-4o-mini"
    monkeypatch.setenv("OPENPROGRAM_MODEL", "gpt-4o-mini")  # names no provider and no key is set
    assert configured_model() == ""


# --- OPTIONS ---------------------------------------------------------------------------------------

def test_options_describes_the_launch_body_and_no_body_to_stop(api, user):
    launch = api.options("/api/sessions/")
    assert launch.status_code == 200
    assert set(launch.json()["actions"]["POST"]) == {"function", "args", "budget", "model", "unattended"}
    stop = api.options(f"/api/sessions/{make_session(user).pk}/stop/")
    assert stop.status_code == 200 and stop.json()["actions"]["POST"] == {}


@pytest.mark.django_db
def test_a_launch_from_python_with_arguments_nested_too_deep_is_refused_not_a_recursion_error(user):
    # The API's parser, the form and the CLI refuse such data before the launch; Python code calling
    # the launch directly gets the same answer, not a RecursionError from the checks.
    from dag.runs.launch import LaunchRejected, create_session
    deep: list = []
    for _ in range(5_000):
        deep = [deep]
    with pytest.raises(LaunchRejected) as refused:
        create_session(user, "slow_count", {"n": deep})
    assert refused.value.errors == {"args": ["arguments nest objects and arrays deeper than 100 levels; "
                                               "send flatter data"]}
    assert not Session.objects.exists()


@pytest.mark.parametrize("raw", ["0000000000000000005", "0" * 5_000 + "5"])
def test_a_page_size_with_leading_zeros_is_read_as_its_number(api, user, raw):
    for _ in range(6):
        make_session(user)
    body = api.get("/api/sessions/", {"page_size": raw}).json()
    assert len(body["results"]) == 5


def test_a_since_rev_with_thousands_of_leading_zeros_is_read_as_its_number(api, user):
    session = make_session(user)
    response = api.get(f"/api/sessions/{session.pk}/nodes/", {"since_rev": "0" * 5_000 + "1"})
    assert response.status_code == 200 and response.json() == []
