"""The launch form: one widget rule per parameter kind, and server-side validation with the tool's schema."""
from __future__ import annotations

import json
import re

import pytest

from dag.models import Session
from dag.pages.forms import LaunchForm

from ..launch_helpers import echo, widgets

pytestmark = pytest.mark.django_db


def form_data(**overrides):
    """A valid submission of `widgets`, as a browser would send it."""
    data = {"question": "why?", "mode": "brief", "count": "3", "ratio": "0.5", "tags": "alpha\nbeta",
            "sizes": "", "limit": "", "title": "untitled", "level": "2", "extra": "{}"}
    data.update(overrides)
    return {k: v for k, v in data.items() if v is not None}


def field_html(html: str, name: str) -> str:
    match = re.search(rf'<div class="field field-{name}[^"]*">(.*?)</div>\s*(?=<div class="field|<button)', html, re.S)
    assert match, f"no field {name} in the page"
    return match.group(1)


# --- generation --------------------------------------------------------------------------------

def test_fields_follow_the_signature_and_leave_out_hidden_parameters():
    form = LaunchForm(widgets)
    assert list(form.fields) == ["question", "mode", "count", "ratio", "verbose", "tags", "sizes", "limit",
                                 "title", "level", "extra"]
    assert "secret" not in form.fields


def test_page_renders_each_widget_rule(logged_in, test_functions):
    html = logged_in.get("/functions/widgets/").content.decode()
    question = field_html(html, "question")
    assert "<textarea" in question and 'placeholder="Ask me anything"' in question  # multiline, placeholder
    assert "What to ask." in question  # description as help text
    mode = field_html(html, "mode")
    assert "<select" in mode and '<option value="brief" selected>' in mode and '<option value="detailed">' in mode
    count = field_html(html, "count")
    assert 'type="number"' in count and 'step="1"' in count and 'value="3"' in count  # int, default prefilled
    ratio = field_html(html, "ratio")
    assert 'type="number"' in ratio and 'step="any"' in ratio and 'value="0.5"' in ratio
    assert 'type="checkbox"' in field_html(html, "verbose")
    tags = field_html(html, "tags")
    assert "<textarea" in tags and ">\nalpha\nbeta</textarea>" in tags and "One item per line." in tags
    assert "Leave empty for none." in field_html(html, "limit")  # Optional
    level = field_html(html, "level")
    assert '<option value="2" selected>' in level
    assert "<textarea" in field_html(html, "extra")
    assert "secret" not in html and "from-the-default" not in html
    assert "csrfmiddlewaretoken" in html


def test_required_field_is_marked_and_has_no_prefill(logged_in, test_functions):
    html = logged_in.get("/functions/widgets/").content.decode()
    assert "required" in field_html(html, "question")
    assert "required" not in field_html(html, "title")


# --- conversion of a valid submission ------------------------------------------------------------

def test_valid_submission_converts_every_kind():
    form = LaunchForm(widgets, data=form_data(verbose="on", sizes="1\n\n 2 \n", limit="7", level="3",
                                              extra='{"k": [1, 2]}', ratio="2"))
    assert form.is_valid(), form.errors
    assert form.args == {"question": "why?", "mode": "brief", "count": 3, "ratio": 2.0, "verbose": True,
                         "tags": ["alpha", "beta"], "sizes": [1, 2], "limit": 7, "title": "untitled",
                         "level": 3, "extra": {"k": [1, 2]}}


def test_empty_fields_mean_none_or_empty_as_the_type_says():
    form = LaunchForm(widgets, data=form_data(limit="", title="", tags=""))
    assert form.is_valid(), form.errors
    assert form.args["limit"] is None  # Optional: empty is None
    assert form.args["title"] == ""  # an emptied text field is what the user typed
    assert form.args["tags"] == []
    assert form.args["verbose"] is False  # an unticked checkbox is sent as nothing


def test_a_cleared_number_or_json_field_is_not_silently_replaced_by_its_default():
    form = LaunchForm(widgets, data=form_data(count="", extra=""))
    assert not form.is_valid()
    assert form.errors["count"] == ["enter a value; the default is 3"]
    assert form.errors["extra"] == ["enter a value; the default is {}"]


class _Unset:
    """A default that is not JSON: the spec, and so the form, cannot show it."""


UNSET = _Unset()


def test_an_empty_field_whose_default_the_form_cannot_show_leaves_the_functions_default():
    from runtime import agentic_function

    @agentic_function(register_globally=False)
    def tune(steps: int = UNSET, options: dict = UNSET) -> str:
        """Tune with the given steps and options."""
        return "tuned"

    form = LaunchForm(tune, data={"steps": "", "options": ""})
    assert str(form["steps"]).count('value="') == 0  # nothing prefilled: there is no JSON default
    assert form.is_valid(), form.errors
    assert form.args == {}  # both left out, so the function's own defaults apply


def test_posted_hidden_parameter_is_ignored():
    form = LaunchForm(widgets, data=form_data(secret="injected"))
    assert form.is_valid(), form.errors
    assert "secret" not in form.args


# --- validation errors -----------------------------------------------------------------------------

@pytest.mark.parametrize("field, value, message", [
    ("question", "", "this argument is required"),
    ("mode", "chatty", "must be one of 'brief', 'detailed'; got 'chatty'"),
    ("count", "three", "expected an integer, got 'three'"),
    ("count", "2.5", "expected an integer, got '2.5'"),
    ("ratio", "half", "expected a number, got 'half'"),
    ("sizes", "1\nx", "line 2: expected an integer, got 'x'"),
    ("limit", "none", "expected an integer, got 'none'"),
    ("level", "9", "must be one of 1, 2, 3; got '9'"),
    ("extra", "{oops", "not valid JSON"),
    ("extra", "[1]", "expected an object, got list [1]"),
    ("extra", '{"n": %s}' % ("9" * 5_000), "a whole number longer than 4,300 digits"),
])
def test_each_invalid_value_is_reported_on_its_field(field, value, message):
    form = LaunchForm(widgets, data=form_data(**{field: value}))
    assert not form.is_valid()
    assert list(form.errors) == [field]
    assert message in form.errors[field][0]


def test_errors_are_shown_beside_their_fields_and_edits_are_kept(logged_in, test_functions):
    response = logged_in.post("/functions/widgets/", form_data(count="many", question="kept text"))
    assert response.status_code == 400
    html = response.content.decode()
    assert "expected an integer, got &#x27;many&#x27;" in field_html(html, "count")
    assert "kept text" in field_html(html, "question")
    assert Session.objects.count() == 0


def test_arguments_over_the_size_limit_are_refused(settings):
    settings.OPENPROGRAM_MAX_ARGS_BYTES = 200
    form = LaunchForm(echo, data={"text": "x" * 300})
    assert not form.is_valid()
    assert "the limit is 200 bytes" in form.non_field_errors()[0]


def test_user_text_in_errors_is_escaped(logged_in, test_functions):
    response = logged_in.post("/functions/widgets/", form_data(count="<script>alert(1)</script>"))
    assert b"<script>alert(1)" not in response.content
    assert b"&lt;script&gt;" in response.content


# --- launching and "run again" -------------------------------------------------------------------

def test_valid_submit_creates_the_session_and_opens_its_page(logged_in, test_functions, user,
                                                             django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:  # launched, not run, here
        response = logged_in.post("/functions/widgets/", form_data(question="what is it?", count="5"))
    session = Session.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/sessions/{session.pk}/"
    assert session.owner == user and session.function == "widgets" and session.status == "queued"
    assert session.args["question"] == "what is it?" and session.args["count"] == 5
    # Once the row is committed: told to the owner's live lists, and handed to the executor.
    assert len(callbacks) == 2


def test_run_again_prefills_the_form_with_the_sessions_arguments(logged_in, test_functions, user):
    args = {"question": "again?", "mode": "detailed", "count": 9, "tags": ["x", "y"], "limit": None,
            "verbose": True, "extra": {"a": 1}}
    session = Session.objects.create(owner=user, function="widgets", args=args)
    html = logged_in.get(f"/functions/widgets/?from={session.pk}").content.decode()
    assert "again?" in field_html(html, "question")
    assert '<option value="detailed" selected>' in field_html(html, "mode")
    assert 'value="9"' in field_html(html, "count")
    assert ">\nx\ny</textarea>" in field_html(html, "tags")
    assert "checked" in field_html(html, "verbose")
    assert json.dumps({"a": 1}, indent=2).replace('"', "&quot;") in field_html(html, "extra")


def test_run_again_of_someone_elses_session_is_not_found(client, test_functions, user, django_user_model):
    session = Session.objects.create(owner=user, function="widgets", args={"question": "mine"})
    intruder = django_user_model.objects.create_user("mallory", password="mallory-password")
    client.force_login(intruder)
    assert client.get(f"/functions/widgets/?from={session.pk}").status_code == 404
    assert client.get("/functions/widgets/?from=not-a-uuid").status_code == 404


def test_unknown_function_page_is_not_found(logged_in, test_functions):
    assert logged_in.get("/functions/nope/").status_code == 404


# --- ranges (input minimum / maximum / max_length) ---------------------------------------------------

def test_the_form_carries_the_ranges_and_refuses_out_of_range_values_server_side(logged_in):
    from dag.models import Session
    page = logged_in.get("/functions/slow_count/").content.decode()
    assert 'min="1"' in page and 'max="10000"' in page
    wiki = logged_in.get("/functions/wiki_agent/").content.decode()
    assert 'maxlength="2000"' in wiki
    for n in ("0", "-5", "10001"):
        response = logged_in.post("/functions/slow_count/", {"n": n, "delay_s": "0"})
        assert response.status_code == 400
        assert "must be from 1 to 10000" in response.context["form"].errors["n"][0]
    assert not Session.objects.exists()


def test_the_api_refuses_out_of_range_values_naming_the_parameter(logged_in):
    from dag.models import Session
    response = logged_in.post("/api/sessions/", {"function": "slow_count", "args": {"n": 2000000}},
                              content_type="application/json")
    assert response.status_code == 400
    assert response.json() == {"args": {"n": ["must be from 1 to 10000, got 2000000"]}}
    assert not Session.objects.exists()
