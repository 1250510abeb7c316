"""Requests the launch checks or Django would answer badly: each gets a JSON 4xx that names the problem.

A lone surrogate as the model's name, a number beyond a float's range (1e400, which Python reads as
infinity), an argument called "__all__", a path no endpoint has and a body too large to read.
"""
from __future__ import annotations

import logging

import pytest
from knox.models import AuthToken
from rest_framework.test import APIClient

from dag.api.index import ENDPOINTS
from dag.api.parsers import parse_float
from dag.models import Session

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("offline_models")]

SURROGATE = "is not valid Unicode: it holds a lone surrogate (half of a UTF-16 pair); send whole characters"
LARGEST = "1.79769e+308"


@pytest.fixture
def token_api(user):
    """A client sending `Authorization: Token ...`, as a script does."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {AuthToken.objects.create(user)[1]}")
    return client


@pytest.fixture
def launch(token_api, django_capture_on_commit_callbacks):
    """POST a raw JSON body (so it can hold escapes and numbers Python would not write) without running it."""
    def post(body: str):
        with django_capture_on_commit_callbacks(execute=False):
            return token_api.post("/api/sessions/", body, content_type="application/json")
    return post


# --- a model name that is not Unicode ------------------------------------------------------------------

@pytest.mark.parametrize("escaped, quoted", [(r"\ud800", r"'\ud800'"), (r"\ud83d", r"'\ud83d'"),
                                             (r" \udfff ", r"' \udfff '")])
def test_a_lone_surrogate_as_the_model_is_a_400_naming_it_and_what_is_offered(launch, escaped, quoted):
    response = launch('{"function": "slow_count", "model": "%s"}' % escaped)
    assert response.status_code == 400
    assert response.json() == {"model": [f"model name {quoted} {SURROGATE}; this server offers sim, sim:naive"]}
    assert not Session.objects.exists()


# --- numbers beyond a float's range ----------------------------------------------------------------------

def test_the_parser_keeps_the_text_of_a_number_too_large_for_a_float():
    assert type(parse_float("2.5")) is float and parse_float("2.5") == 2.5
    assert parse_float("1e400") == float("inf") and repr(parse_float("-1e400")) == "-1e400"


@pytest.mark.parametrize("args, errors", [
    ('{"n": 1, "delay_s": 1e400}', {"delay_s": [f"must be a finite number, from -{LARGEST} to {LARGEST}, "
                                                f"got 1e400"]}),
    ('{"n": -1E+999}', {"n": [f"must be a finite number, from -{LARGEST} to {LARGEST}, got -1E+999"]}),
])
def test_a_number_too_large_for_a_float_is_a_400_naming_the_argument(launch, args, errors):
    response = launch('{"function": "slow_count", "args": %s}' % args)
    assert response.status_code == 400 and response.json() == {"args": errors}
    assert not Session.objects.exists()


def test_a_number_too_large_for_a_float_inside_a_value_is_named_too(launch, test_functions):
    response = launch('{"function": "widgets", "args": {"question": "q", "extra": {"a": [1, 2e308]}}}')
    assert response.status_code == 400
    assert response.json() == {"args": {"extra": [f"must hold only finite numbers, from -{LARGEST} to {LARGEST}, "
                                                  f"got 2e308"]}}


@pytest.mark.parametrize("budget, errors", [
    ('{"timeout_s": 1e400}', {"timeout_s": ["must be a number of seconds from 0.001 to 604800, got 1e400"]}),
    ('{"max_llm_calls": 1e400}', {"max_llm_calls": ["must be a whole number from 1 to 1000000000, got 1e400"]}),
])
def test_a_number_too_large_for_a_float_in_the_budget_is_a_400_naming_the_limit(launch, budget, errors):
    response = launch('{"function": "slow_count", "budget": %s}' % budget)
    assert response.status_code == 400 and response.json() == {"budget": errors}


def test_a_number_too_large_for_a_float_as_the_model_is_a_400_on_the_model(launch):
    response = launch('{"function": "slow_count", "model": 1e400}')
    assert response.status_code == 400 and response.json()["model"][0].startswith("must be a model name like")


# --- an argument called "__all__" ---------------------------------------------------------------------

def test_an_argument_called___all___is_named_like_any_unknown_argument(launch):
    response = launch('{"function": "slow_count", "args": {"__all__": 1}}')
    assert response.status_code == 400
    assert response.json() == {"args": {"__all__": ["unknown argument; expected one of: n, delay_s"]}}


def test_problems_with_the_arguments_as_a_whole_are_still_a_list(launch, settings):
    assert launch('{"function": "slow_count", "args": [1]}').json()["args"][0].startswith(
        "arguments must be an object")
    settings.OPENPROGRAM_MAX_ARGS_BYTES = 5
    assert "the limit is 5 bytes" in launch('{"function": "slow_count", "args": {"n": 5}}').json()["args"][0]


# --- paths no endpoint has -------------------------------------------------------------------------

@pytest.mark.parametrize("path", ["/api/nonexistent/", "/api/functions/a%2Fb/", "/api/sessions/x/nope/",
                                  "/api/token/x/", "/api/a/b/c/",
                                  "/api/sessions/a%0Ab/approvals/true/"])  # a newline in the path
@pytest.mark.parametrize("method", ["get", "post", "delete", "options"])
def test_a_path_no_endpoint_has_is_a_json_404(token_api, path, method):
    response = getattr(token_api, method)(path)
    assert response.status_code == 404 and response["Content-Type"] == "application/json"
    detail = response.json()["detail"]
    assert detail.startswith("no API endpoint at /api/") and detail.endswith("; GET /api/ lists them")


def test_a_path_no_endpoint_has_refuses_anonymous_callers_as_every_api_path_does():
    response = APIClient().get("/api/nonexistent/")
    assert response.status_code == 401 and "detail" in response.json()
    assert "no API endpoint" not in response.json()["detail"]


def test_a_path_without_its_slash_is_still_redirected_to_it(token_api):
    response = token_api.get("/api/sessions?page=1")
    assert response.status_code == 301 and response["Location"] == "/api/sessions/?page=1"
    response = token_api.get("/api/nonexistent", follow=True)
    assert response.status_code == 404 and "detail" in response.json()


def test_a_path_outside_the_api_is_still_a_page(logged_in):
    response = logged_in.get("/nonexistent/")
    assert response.status_code == 404 and response["Content-Type"].startswith("text/html")


def test_the_schema_documents_the_endpoints_only_not_the_catch_all(token_api):
    schema = token_api.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    assert set(schema["paths"]) == {path for _, path, _ in ENDPOINTS}


# --- bodies too large to read -------------------------------------------------------------------------

def no_errors_logged(caplog) -> bool:
    return not [record for record in caplog.records if record.levelno >= logging.ERROR]


@pytest.mark.parametrize("body", ["username=local&password=" + "x" * 1_100_000,  # over a megabyte
                                  "&".join(f"f{i}=1" for i in range(1500))])  # over 1,000 fields
def test_a_form_body_to_the_token_endpoint_is_a_json_415_never_read(client, caplog, body):
    """The token endpoint reads JSON only (dag.api.tokens), so a form body is refused by its type, before
    Django's limits on reading forms could come into it."""
    with caplog.at_level(logging.INFO):
        response = client.post("/api/token/", body, content_type="application/x-www-form-urlencoded")
    assert response.status_code == 415 and response["Content-Type"] == "application/json"
    assert "as JSON" in response.json()["detail"]
    assert no_errors_logged(caplog)


@pytest.mark.parametrize("path", ["/api/token/", "/api/sessions/"])  # both read JSON only
def test_a_body_over_the_limit_is_a_json_400_on_every_endpoint_that_reads_one(token_api, settings, caplog, path):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    body = '{"username": "%s"}' % ("x" * 2000)
    with caplog.at_level(logging.INFO):
        response = token_api.post(path, body, content_type="application/json")
    assert response.status_code == 400 and "over 1000 bytes" in response.json()["detail"]
    assert no_errors_logged(caplog)


# --- integers too long to read ------------------------------------------------------------------------

@pytest.mark.parametrize("body, where", [
    ('{"function": "echo", "args": {"text": %s}}', "args.text"),
    ('{"function": "echo", "args": {"text": "hi"}, "budget": {"calls": [1, -%s]}}', "budget.calls[1]"),
    ('%s', "the top of the body"),
])
def test_an_integer_past_the_digit_limit_is_a_400_naming_where_it_is(launch, body, where):
    response = launch(body % ("1" * 5_001))
    assert response.status_code == 400
    assert response.json() == {"detail": f"JSON parse error - the number at {where} has 5,001 digits; "
                                         f"the most this server reads is 4,300"}


def test_an_integer_at_the_digit_limit_is_read(launch, test_functions):
    response = launch('{"function": "echo", "args": {"text": %s}}' % ("1" * 4_300))
    assert response.status_code == 400 and "text" in response.json()["args"]  # read, then refused as not text
