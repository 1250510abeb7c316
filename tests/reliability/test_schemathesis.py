"""Schemathesis over `/api/schema/`, in-process against the ASGI application, logged in with an API token.

Every operation the schema lists is generated against, with data that fits the schema and data that does
not (nothing is excluded): no case may get a server error, and every response must conform to the schema
(a documented status, a documented content type, a body of the documented shape). Operations on one
session get ids of the user's own sessions as well as generated ones, so their 200 answers are checked
too. Bounded and reproducible: a fixed number of examples per operation and mode, derandomized (Hypothesis
derives its choices from the test, not a random seed), no example database.

Token rotation and revocation would log the run out: each of their cases is sent with a token issued just
for it, so the token the other cases use keeps working (they are also tested on their own in
test_api_tokens).

Schemathesis's pytest plugin (`schema.parametrize()`) does not run under pytest 9 (it sets
`Function._nodeid`), so the operations are walked here, each with Hypothesis's `@given`.
"""
from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings, strategies as st
from rest_framework.test import APIClient
from schemathesis import GenerationMode

from dag.accounts import tokens
from dag.models import Session
from openprogram_web.asgi import application
from tests.reliability.bounds import START_S
from tests.reliability.figures import record
from tests.web.launch_helpers import wait_for, wait_for_end

# The sessions the launches start run in the in-process executor's threads: they must see committed rows.
pytestmark = pytest.mark.django_db(transaction=True)

EXAMPLES_PER_OPERATION_AND_MODE = 25
BOUNDED = settings(max_examples=EXAMPLES_PER_OPERATION_AND_MODE, derandomize=True, database=None, deadline=None,
                   suppress_health_check=list(HealthCheck))
# Operations that replace or revoke the token they are sent with.
OWN_TOKEN_OPERATIONS = {("POST", "/api/token/rotate/"), ("DELETE", "/api/token/")}
EVERY_OPERATION = {
    ("GET", "/api/"), ("GET", "/api/functions/"), ("GET", "/api/functions/{name}/"), ("GET", "/api/models/"),
    ("GET", "/api/sessions/"), ("POST", "/api/sessions/"), ("GET", "/api/sessions/{id}/"),
    ("DELETE", "/api/sessions/{id}/"), ("GET", "/api/sessions/{id}/export/"), ("GET", "/api/sessions/{id}/nodes/"),
    ("POST", "/api/sessions/{id}/stop/"), ("POST", "/api/sessions/{id}/share/"), ("DELETE", "/api/sessions/{id}/share/"),
    ("POST", "/api/sessions/{id}/replay/"), ("POST", "/api/sessions/{id}/fork/"), ("GET", "/api/sessions/compare/"),
    ("GET", "/api/sessions/{id}/approvals/"), ("POST", "/api/sessions/{id}/approvals/{seq}/"),
    ("POST", "/api/sessions/{id}/pause/"), ("POST", "/api/sessions/{id}/resume/"),
    ("POST", "/api/token/"), ("DELETE", "/api/token/"),
    ("POST", "/api/token/rotate/"),
}

# Operations whose every request fits the schema (no parameters, or a free-text function name): there is
# no invalid input to generate (Hypothesis would report its strategy unsatisfiable). Their only way to be
# wrong, missing or invalid credentials, is still probed by the auth check on every positive case.
EVERY_INPUT_VALID = {"GET /api/", "GET /api/functions/", "GET /api/functions/{name}/", "GET /api/models/",
                     "DELETE /api/token/", "POST /api/token/rotate/"}

# A launch request may fit the schema and still name no function of this server or give the function
# arguments its own spec refuses: the schema cannot list a server's catalog or each function's parameters
# (GET /api/functions/{name}/ serves those), so a 400 is a documented answer to schema-valid data there.
CONFIG = schemathesis.Config.from_str("""
[[operations]]
include-method = "POST"
include-path = "/api/sessions/"
checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "401", "403", "404", "429"]

# Two session ids that fit the schema need not name two sessions of the caller's (a 404, or a 400 for one
# session twice): the schema cannot list them.
[[operations]]
include-method = "GET"
include-path = "/api/sessions/compare/"
checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "401", "403", "404"]
""")


@pytest.fixture
def api_user(user, settings):
    # Launches past the per-user cap are refused (a documented 429); a higher cap lets more of them run.
    settings.OPENPROGRAM_MAX_ACTIVE_RUNS_PER_USER = 50
    # The token endpoint's password checks are throttled per address (a documented 429 past the rate).
    settings.OPENPROGRAM_LOGIN_RATE = "100/min"
    return user


def token_header(user) -> dict[str, str]:
    _, key = tokens.issue(user)
    return {"Authorization": f"Token {key}"}


@pytest.fixture
def own_session_ids(api_user):
    """Ids of two sessions of the user: one finished with nodes, one still queued (a stop acts on it)."""
    client = APIClient()
    client.force_authenticate(api_user)
    finished = client.post("/api/sessions/", {"function": "wiki_agent", "args": {"question": "guard?"}},
                           format="json").json()["id"]
    wait_for_end(Session.objects.get(pk=finished), timeout=START_S)
    queued = Session.objects.create(owner=api_user, function="wiki_agent", args={"question": "later"})
    return [finished, str(queued.pk)]


@pytest.fixture
def deletable_ids(api_user):
    """Ids of ended sessions of the user for DELETE alone, so the sessions the other operations read stay."""
    ended = [Session.objects.create(owner=api_user, function="wiki_agent", status=Session.Status.COMPLETED)
             for _ in range(3)]
    return [str(session.pk) for session in ended]


def token_auth(user, headers: dict[str, str]):
    """A Schemathesis auth provider: the user's token, or a new one for an operation that spends it.

    Declared as auth (not merely sent as a header), Schemathesis knows the credentials are real, does
    not generate others, and also checks that the operation refuses a request without them or with
    invalid ones."""

    class TokenAuth:
        def get(self, case, context):
            if (case.method.upper(), case.operation.path) in OWN_TOKEN_OPERATIONS:
                return token_header(user)
            return headers

        def set(self, case, data, context):
            case.headers = {**(case.headers or {}), **data}

    return TokenAuth


def test_every_operation_answers_as_its_schema_says(api_user, own_session_ids, deletable_ids):
    headers = token_header(api_user)
    schema = schemathesis.openapi.from_asgi("/api/schema/", application, config=CONFIG, headers=headers)
    schema.auth(refresh_interval=None)(token_auth(api_user, headers))
    operations = [result.ok() for result in schema.get_all_operations()]
    assert {(op.method.upper(), op.path) for op in operations} == EVERY_OPERATION

    cases = 0
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            if mode is GenerationMode.NEGATIVE and operation.label in EVERY_INPUT_VALID:
                continue
            strategy = operation.as_strategy(generation_mode=mode, auth_storage=schema.auth)
            if "{id}" in operation.path and mode is GenerationMode.POSITIVE:  # own ids are valid data
                # A deletion gets ended sessions of its own (they go), and the queued one (a 409).
                ids = deletable_ids + own_session_ids[1:] if operation.label == "DELETE /api/sessions/{id}/" else own_session_ids
                strategy = st.one_of(strategy, *(operation.as_strategy(generation_mode=mode, auth_storage=schema.auth,
                                                                       path_parameters={"id": session_id})
                                                 for session_id in ids))

            @BOUNDED
            @given(case=strategy)
            def send(case):
                nonlocal cases
                cases += 1
                case.call_and_validate()

            send()

    wait_for(lambda: not Session.objects.filter(status__in=("queued", "running"))
             .exclude(pk=own_session_ids[1]).exists(), timeout=START_S, what="the launched sessions to end")
    record("schemathesis", inputs=cases)
