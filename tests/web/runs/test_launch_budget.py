"""Budgets at launch (issue 10): the form's Advanced section, the API's "budget", run_function --budget.

Each is checked one way (`dag.runs.launch_budget`), stored on the session, shown on its page, and opened
around the run, where it tightens the function's own budget.
"""
from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from dag.models import Node, Session
from dag.runs.launch_budget import BudgetProblem, clean_budget, parse_budget_text
from dag.runs.lifecycle import run_session

pytestmark = pytest.mark.django_db


@pytest.fixture
def no_run(django_capture_on_commit_callbacks):
    """Launch without running: the executor hand-off is captured, not executed."""
    with django_capture_on_commit_callbacks(execute=False):
        yield


# --- one check for every door ------------------------------------------------------------------------

def test_a_budget_keeps_only_the_limits_given_and_seconds_as_a_float():
    assert clean_budget({"max_llm_calls": 20, "timeout_s": 60, "max_depth": None}) == {
        "max_llm_calls": 20, "timeout_s": 60.0}
    assert clean_budget(None) is None and clean_budget({}) is None


@pytest.mark.parametrize("budget, field, words", [
    ({"max_llm_calls": 0}, "max_llm_calls", "from 1 to"),
    ({"max_depth": -3}, "max_depth", "from 1 to"),
    ({"max_tokens": "many"}, "max_tokens", "whole number"),
    ({"max_tokens": 2.5}, "max_tokens", "whole number"),
    ({"max_depth": True}, "max_depth", "whole number"),
    ({"timeout_s": 0}, "timeout_s", "from 0.001 to"),
    ({"timeout_s": float("inf")}, "timeout_s", "number of seconds"),
    ({"max_llm_calls": 10**12}, "max_llm_calls", "from 1 to"),
    ({"max_calls": 3}, "__all__", "unknown limit(s) 'max_calls'; the limits are max_depth"),
    ([1, 2], "__all__", "must be an object"),
])
def test_a_wrong_budget_names_the_limit_and_what_is_allowed(budget, field, words):
    with pytest.raises(BudgetProblem) as caught:
        clean_budget(budget)
    assert list(caught.value.errors) == [field] and words in caught.value.errors[field][0]


def test_the_cli_text_form_reads_numbers():
    assert parse_budget_text("max_llm_calls=20, timeout_s=1.5") == {"max_llm_calls": 20, "timeout_s": 1.5}
    assert parse_budget_text("") is None
    with pytest.raises(BudgetProblem, match="not NAME=VALUE"):
        parse_budget_text("max_llm_calls")
    with pytest.raises(BudgetProblem, match="timeout_s: must be from 0.001 to 604800 seconds, got 0.0005"):
        parse_budget_text("timeout_s=0.0005")  # the CLI's --budget: the same minimum as the form and the API


# --- the API -------------------------------------------------------------------------------------------

def test_api_launch_stores_the_budget_and_answers_with_it(api, test_functions, no_run):
    response = api.post("/api/sessions/", {"function": "echo", "args": {"text": "hi"},
                                           "budget": {"max_llm_calls": 20, "timeout_s": 60}}, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["launch_budget"] == {"max_llm_calls": 20, "timeout_s": 60.0}
    assert Session.objects.get().launch_budget == {"max_llm_calls": 20, "timeout_s": 60.0}


@pytest.mark.parametrize("budget, body", [
    ({"max_llm_calls": 0}, {"budget": {"max_llm_calls": ["must be from 1 to 1000000000, got 0"]}}),
    ({"max_tokens": "ten"}, {"budget": {"max_tokens": ["must be a whole number from 1 to 1000000000, got 'ten'"]}}),
    ({"retries": 3}, {"budget": ["unknown limit(s) 'retries'; the limits are max_depth, max_llm_calls, "
                                 "max_tokens, timeout_s, max_cost_usd"]}),
    ("lots", {"budget": ["must be an object with any of max_depth, max_llm_calls, max_tokens, timeout_s, "
                         "max_cost_usd"]}),
    ({"max_cost_usd": 0}, {"budget": {"max_cost_usd": ["must be from 0.0001 to 1e+06 US dollars, got 0"]}}),
    ({"max_cost_usd": "5$"}, {"budget": {"max_cost_usd": ["must be a number of US dollars from 0.0001 to 1e+06, "
                                                          "got '5$'"]}}),
])
def test_api_launch_with_a_wrong_budget_is_a_400_naming_the_field(api, test_functions, no_run, budget, body):
    response = api.post("/api/sessions/", {"function": "echo", "args": {"text": "hi"}, "budget": budget},
                        format="json")
    assert response.status_code == 400 and response.json() == body
    assert not Session.objects.exists()


def test_the_schema_documents_the_launch_budget(api):
    schema = api.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    shape = schema["components"]["schemas"]["LaunchBudgetShape"]["properties"]
    assert set(shape) == {"max_depth", "max_llm_calls", "max_tokens", "timeout_s", "max_cost_usd"}


def test_each_limit_is_checked_against_the_bounds_the_schema_publishes(api):
    shape = api.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()[
        "components"]["schemas"]["LaunchBudgetShape"]["properties"]
    for name, schema in shape.items():
        low, high = schema["minimum"], schema["maximum"]
        assert clean_budget({name: low}) == {name: low} and clean_budget({name: high}) == {name: high}
        whole = schema["type"] == "integer"
        below, above = (low - 1, high + 1) if whole else (low / 2, high * 2)
        bounds = f"from {low} to {high}" if whole else f"from {low:g} to {high:g}"
        for wrong in (below, above):
            with pytest.raises(BudgetProblem) as caught:
                clean_budget({name: wrong})
            assert list(caught.value.errors) == [name] and bounds in caught.value.errors[name][0]


@pytest.mark.parametrize("timeout_s", [1e-300, 0.0005, 5e-324])
def test_api_launch_with_a_timeout_below_the_minimum_is_a_400_naming_it(api, test_functions, no_run, timeout_s):
    response = api.post("/api/sessions/", {"function": "echo", "args": {"text": "hi"},
                                           "budget": {"timeout_s": timeout_s}}, format="json")
    assert response.status_code == 400
    assert response.json() == {"budget": {"timeout_s": [f"must be from 0.001 to 604800 seconds, got {timeout_s:g}"]}}
    assert not Session.objects.exists()


# --- the form ------------------------------------------------------------------------------------------

def test_the_form_has_a_closed_advanced_section_with_the_four_limits(logged_in, test_functions):
    page = logged_in.get("/functions/echo/").content.decode()
    assert '<details class="advanced" data-role="advanced">' in page
    for name in ("max_depth", "max_llm_calls", "max_tokens", "timeout_s"):
        assert f'name="budget-{name}"' in page


def test_the_form_launches_with_a_budget(logged_in, test_functions, no_run):
    response = logged_in.post("/functions/echo/", {"text": "hi", "budget-max_llm_calls": "3",
                                                   "budget-timeout_s": "2.5"})
    session = Session.objects.get()
    assert response.status_code == 302 and session.launch_budget == {"max_llm_calls": 3, "timeout_s": 2.5}
    page = logged_in.get(f"/sessions/{session.pk}/").content.decode()
    assert "Launched with a budget: max_llm_calls 3 · timeout_s 2.5 s" in page
    again = logged_in.get(f"/functions/echo/?from={session.pk}").content.decode()
    assert 'name="budget-max_llm_calls" value="3"' in again and "<details class=\"advanced\" data-role=\"advanced\" open>" in again


@pytest.mark.parametrize("field, value, words", [
    ("max_llm_calls", "0", "greater than or equal to 1"),
    ("max_depth", "two", "Enter a whole number"),
    ("timeout_s", "inf", "Enter a number"),
])
def test_the_form_refuses_a_wrong_limit_beside_its_field(logged_in, test_functions, field, value, words):
    response = logged_in.post("/functions/echo/", {"text": "hi", f"budget-{field}": value})
    assert response.status_code == 400 and not Session.objects.exists()
    errors = response.context["options"].errors
    assert list(errors) == [field] and words in errors[field][0]
    assert '<details class="advanced" data-role="advanced" open>' in response.content.decode()


# --- the CLI -------------------------------------------------------------------------------------------

@pytest.mark.django_db(transaction=True)  # the run starts when the launch commits
def test_run_function_budget_bounds_the_run(local_user, test_functions):
    out = io.StringIO()
    with pytest.raises(CommandError) as caught:
        call_command("run_function", "chatty", "calls=5", "--budget", "max_llm_calls=2,timeout_s=60", stdout=out)
    assert caught.value.returncode == 1 and "max_llm_calls=2" in str(caught.value)
    assert "Budget: max_llm_calls 2 · timeout_s 60 s" in out.getvalue()
    session = Session.objects.get()
    assert session.launch_budget == {"max_llm_calls": 2, "timeout_s": 60.0}
    assert Node.objects.filter(session=session, kind="llm").count() == 2


@pytest.mark.parametrize("text, words", [("max_llm_calls=0", "max_llm_calls: must be from 1"),
                                         ("retries=2", "unknown limit(s) 'retries'"),
                                         ("max_llm_calls", "not NAME=VALUE"),
                                         # more digits than int() reads: not "got inf"
                                         ("max_depth=" + "9" * 5_000,
                                          "max_depth: must be from 1 to 1000000000, got a number of 5000 digits"),
                                         ("timeout_s=-" + "9" * 5_000, "timeout_s: must be from 0.001 to 604800 "
                                                                       "seconds, got a number of 5000 digits")])
def test_run_function_with_a_wrong_budget_exits_2_and_launches_nothing(local_user, test_functions, text, words):
    with pytest.raises(CommandError) as caught:
        call_command("run_function", "echo", "text=hi", "--budget", text, stdout=io.StringIO())
    assert caught.value.returncode == 2 and words in str(caught.value)
    assert not Session.objects.exists()


# --- the run -------------------------------------------------------------------------------------------

def test_the_launch_budget_tightens_the_functions_own(user):
    # research_agent carries Budget(max_llm_calls=30); the launch asks for 1.
    session = Session.objects.create(owner=user, function="research_agent", args={"topic": "tides"},
                                     launch_budget={"max_llm_calls": 1})
    run_session(session.pk)
    session.refresh_from_db()
    assert session.status == "error" and "max_llm_calls=1" in session.error
    assert Node.objects.filter(session=session, kind="llm").count() == 1
    assert session.budget["max_llm_calls"] == 1  # what the gauge shows


# Committed rows: the process's heartbeat thread (started by earlier runs) cannot see a session inside
# the test's transaction, and a beat during the run would take its lease for lost and stop it.
@pytest.mark.django_db(transaction=True)
def test_research_agent_ships_with_a_budget_of_its_own(user):
    from examples.functions import research_agent
    assert research_agent.budget is not None and research_agent.budget.max_llm_calls == 30
    session = Session.objects.create(owner=user, function="research_agent", args={"topic": "tides"})
    run_session(session.pk)
    session.refresh_from_db()
    assert session.status == "completed" and session.budget["max_depth"] == 3


def test_a_rejected_launch_reads_as_text_naming_each_field():
    from dag.runs.launch import LaunchRejected
    exc = LaunchRejected({"args": {"n": ["must be from 1 to 10000, got 0"]}, "budget": ["unknown limit(s) 'x'"]})
    assert str(exc) == "args n: must be from 1 to 10000, got 0; budget: unknown limit(s) 'x'"
    assert str(LaunchRejected({"args": ["too large"]})) == "args: too large"
    # "__all__" is a parameter name like any other (JSON can send it), so it is named too.
    assert str(LaunchRejected({"args": {"__all__": ["unknown argument"]}})) == "args __all__: unknown argument"


def test_the_forms_budget_inputs_carry_the_bounds_the_api_checks(db):
    from dag.pages.launch_options import LaunchOptionsForm
    from dag.runs.launch_budget import FIELDS, MAXIMUM, MINIMUM

    form = LaunchOptionsForm()
    for name in FIELDS:
        attrs = form.fields[name].widget.attrs
        assert (float(attrs["min"]), float(attrs["max"])) == (MINIMUM[name], MAXIMUM[name]), name


def test_a_timeout_too_large_for_a_float_is_named_not_a_server_error():
    from dag.runs.launch_budget import BudgetProblem, clean_budget

    with pytest.raises(BudgetProblem) as refused:
        clean_budget({"timeout_s": 10 ** 400})
    assert "timeout_s: must be from 0.001 to 604800 seconds, got 1000" in str(refused.value)
