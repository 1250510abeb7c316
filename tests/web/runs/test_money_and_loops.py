"""Cost everywhere and the runaways beyond depth in the web app (issue 38): each model call's cost, the run's
in the API, the list, the CLI and the export; a money budget from the form, the API and the CLI; a
repeated call refused and counted as a loop."""
from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from dag.models import Node, Session
from dag.recording.export import SessionImportError, export_session, import_session
from dag.runs.lifecycle import run_session

from .metered_functions import CALL_COST

pytestmark = pytest.mark.django_db


@pytest.fixture
def metered(settings):
    settings.OPENPROGRAM_FUNCTION_MODULES = ["tests.web.runs.metered_functions"]


@pytest.fixture
def no_run(django_capture_on_commit_callbacks):
    """Launch without running: the executor hand-off is captured, not executed."""
    with django_capture_on_commit_callbacks(execute=False):
        yield


def ran(owner, budget=None, **args) -> Session:
    """A `spend` session run to its end in this process."""
    session = Session.objects.create(owner=owner, function="spend", args=args, launch_budget=budget)
    run_session(session.pk)
    session.refresh_from_db()
    return session


def model_calls(session) -> list[Node]:
    return list(Node.objects.filter(session=session, kind="llm").order_by("seq"))


# --- cost recorded and summed -----------------------------------------------------------------------------

def test_each_model_call_records_its_cost_and_the_run_summary_adds_them_up(api, user, metered):
    session = ran(user, steps=3)
    assert session.status == "completed"
    assert [node.usage["cost_usd"] for node in model_calls(session)] == [CALL_COST] * 4
    body = api.get(f"/api/sessions/{session.pk}/").json()
    assert body["cost_usd"] == pytest.approx(4 * CALL_COST) and body["cost_unknown_calls"] == 0
    [listed] = api.get("/api/sessions/").json()["results"]
    assert listed["cost_usd"] == body["cost_usd"]


def test_an_unpriced_models_cost_is_unknown_not_zero(api, logged_in, user, metered):
    session = ran(user, steps=2, priced=False)
    assert all("cost_usd" not in node.usage for node in model_calls(session))
    body = api.get(f"/api/sessions/{session.pk}/").json()
    assert body["cost_usd"] is None and body["cost_unknown_calls"] == 3
    page = logged_in.get("/sessions/").content.decode()
    assert '<td data-label="Cost" class="num" data-role="cost">unknown for 3 calls</td>' in page


# --- the money budget -----------------------------------------------------------------------------------------

def test_a_money_budget_at_launch_stops_the_run_within_one_call_of_the_cap(user, metered):
    session = ran(user, budget={"max_cost_usd": 0.005}, steps=20)
    assert session.status == "error" and "max_cost_usd=0.005" in session.error
    assert len(model_calls(session)) == 3  # $0.006 spent once the fourth call asked: refused
    assert session.budget["max_cost_usd"] == 0.005  # what the budget panel shows
    assert session.budget_spend["cost_usd"] == pytest.approx(3 * CALL_COST)


def test_the_api_launches_with_a_money_budget(api, metered, no_run):
    response = api.post("/api/sessions/", {"function": "spend", "args": {"steps": 1},
                                           "budget": {"max_cost_usd": 0.5}}, format="json")
    assert response.status_code == 201 and response.json()["launch_budget"] == {"max_cost_usd": 0.5}


def test_the_forms_advanced_section_takes_a_money_budget(logged_in, metered, no_run):
    page = logged_in.get("/functions/spend/").content.decode()
    assert 'name="budget-max_cost_usd"' in page and "Max cost (US dollars)" in page
    response = logged_in.post("/functions/spend/", {"steps": "1", "budget-max_cost_usd": "0.5"})
    session = Session.objects.get()
    assert response.status_code == 302 and session.launch_budget == {"max_cost_usd": 0.5}
    page = logged_in.get(f"/sessions/{session.pk}/").content.decode()
    assert "Launched with a budget: max_cost_usd $0.5" in page


@pytest.mark.parametrize("value, words", [("0", "greater than or equal to 0.0001"), ("lots", "Enter a number")])
def test_the_form_refuses_a_wrong_money_budget_beside_its_field(logged_in, metered, value, words):
    response = logged_in.post("/functions/spend/", {"steps": "1", "budget-max_cost_usd": value})
    assert response.status_code == 400 and not Session.objects.exists()
    errors = response.context["options"].errors
    assert list(errors) == ["max_cost_usd"] and words in errors["max_cost_usd"][0]


# --- repeated calls ---------------------------------------------------------------------------------------------

def test_a_repeated_call_is_refused_once_recorded_as_a_loop_and_the_run_completes_with_its_warning(api, user, metered):
    session = ran(user, steps=10, repeat=True)
    assert session.status == "completed"
    [refused] = Node.objects.filter(session=session, status="refused")
    entry = Node.objects.get(session=session, kind="code", name="spend")
    assert (refused.name, refused.refusal, refused.parent_id) == ("lookup", "loop", entry.pk)
    assert "made 10 times" in refused.error
    assert api.get(f"/api/sessions/{session.pk}/").json()["warning"] == "1 loop"


# --- the CLI ---------------------------------------------------------------------------------------------------

@pytest.mark.django_db(transaction=True)  # the run starts when the launch commits
def test_run_function_draws_each_calls_cost_and_the_runs_and_ends_completed_with_a_loop(local_user, metered):
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(SystemExit) as caught:
        call_command("run_function", "spend", "steps=10", "repeat=true", stdout=out, stderr=err)
    assert caught.value.code == 3 and "completed · 1 loop" in err.getvalue()
    tree = out.getvalue()
    assert tree.count("$0.0020") == 11  # each model call
    assert "$0.0220" in tree  # the run, beside the session


@pytest.mark.django_db(transaction=True)
def test_run_function_budget_max_cost_usd_bounds_the_run(local_user, metered):
    out = io.StringIO()
    with pytest.raises(CommandError) as caught:
        call_command("run_function", "spend", "steps=20", "--budget", "max_cost_usd=0.005", stdout=out)
    assert caught.value.returncode == 1 and "max_cost_usd=0.005" in str(caught.value)
    assert "Budget: max_cost_usd $0.005" in out.getvalue()
    assert Session.objects.get().launch_budget == {"max_cost_usd": 0.005}


# --- the session list ---------------------------------------------------------------------------------------------

def test_the_session_list_shows_each_runs_cost_and_filters_by_it(logged_in, user, metered):
    cheap, dear = ran(user, steps=1), ran(user, steps=5)
    page = logged_in.get("/sessions/").content.decode()
    assert '<th class="num">Cost</th>' in page
    assert '<td data-label="Cost" class="num" data-role="cost">$0.0040</td>' in page
    assert '<td data-label="Cost" class="num" data-role="cost">$0.0120</td>' in page
    filtered = logged_in.get("/sessions/?min_cost=0.01").content.decode()
    assert str(dear.pk) in filtered and str(cheap.pk) not in filtered
    assert 'name="min_cost" value="0.01"' in filtered


@pytest.mark.parametrize("value", ["cheap", "-1", "nan"])
def test_a_wrong_cost_filter_is_a_400_naming_it(logged_in, value):
    response = logged_in.get(f"/sessions/?min_cost={value}")
    assert response.status_code == 400 and "min_cost must be a number of US dollars" in response.content.decode()


# --- the export -----------------------------------------------------------------------------------------------------

def test_the_export_keeps_each_calls_cost_and_an_import_checks_it(user, other_user, metered):
    document = json.loads(json.dumps(export_session(ran(user, steps=1)), default=str))
    costs = [node["usage"]["cost_usd"] for node in document["nodes"] if node["kind"] == "llm"]
    assert costs == [CALL_COST] * 2
    copy = import_session(document, other_user)
    assert [node.usage["cost_usd"] for node in model_calls(copy)] == [CALL_COST] * 2
    next(node for node in document["nodes"] if node["kind"] == "llm")["usage"]["cost_usd"] = "two cents"
    with pytest.raises(SessionImportError, match=r"\['cost_usd'\] must be a number of US dollars"):
        import_session(document, other_user)
