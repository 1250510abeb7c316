"""API errors are JSON and documented: a 404 for any malformed id, a 400 naming a bad `page_size`, and the
schema's statuses and minimums."""
import io

import pytest
import yaml
from django.core.management import call_command

from dag.models import Session

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("path", [
    "/api/sessions/not-a-uuid/",
    "/api/sessions/zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz/",
    "/api/sessions/%C3%A9/",
    f"/api/sessions/{'a' * 300}/",
    "/api/sessions/not-a-uuid/nodes/",
    "/api/sessions/not-a-uuid/export/",
    "/api/sessions/00000000-0000-0000-0000-000000000000/",
])
def test_a_session_that_is_not_found_is_a_json_404(logged_in, path):
    response = logged_in.get(path)
    assert response.status_code == 404 and response["Content-Type"] == "application/json"
    assert "detail" in response.json()


def test_stopping_a_malformed_id_is_a_json_404(logged_in):
    response = logged_in.post("/api/sessions/not-a-uuid/stop/")
    assert response.status_code == 404 and response["Content-Type"] == "application/json"


@pytest.mark.parametrize("page_size", ["abc", "", "0", "-1", "501", "2.5", "1e2", "²", "9" * 30, "9" * 5000])
def test_a_page_size_that_is_not_one_is_a_400_naming_it(logged_in, page_size):
    response = logged_in.get("/api/sessions/", {"page_size": page_size})
    assert response.status_code == 400
    assert response.json()["page_size"] == [f"must be a whole number from 1 to 500, got {page_size[:40]!r}"]


def test_a_page_size_in_range_is_used(logged_in, user):
    for _ in range(3):
        Session.objects.create(owner=user, function="echo", args={})
    page = logged_in.get("/api/sessions/", {"page_size": "2"}).json()
    assert page["count"] == 3 and len(page["results"]) == 2
    assert len(logged_in.get("/api/sessions/").json()["results"]) == 3


@pytest.fixture(scope="module")
def schema(django_db_blocker):
    with django_db_blocker.unblock():
        out = io.StringIO()
        call_command("spectacular", "--validate", "--fail-on-warn", stdout=out)
    return yaml.safe_load(out.getvalue())


def responses(schema, method, path):
    return set(schema["paths"][path][method]["responses"])


def test_the_schema_documents_400_and_404(schema):
    assert responses(schema, "get", "/api/sessions/") == {"200", "400", "404"}
    assert responses(schema, "get", "/api/sessions/{id}/nodes/") == {"200", "400", "404"}
    for method, path in [("get", "/api/sessions/{id}/"), ("get", "/api/sessions/{id}/export/"),
                         ("post", "/api/sessions/{id}/stop/"), ("get", "/api/functions/{name}/")]:
        assert responses(schema, method, path) == {"200", "404"}, path
    # 403: asked from another site's page; 415: not JSON; 503: the login throttle's store is unreachable.
    assert responses(schema, "post", "/api/token/") == {"200", "400", "403", "415", "429", "503"}


def test_the_schema_documents_the_minimums(schema):
    def query(method, path):
        return {p["name"]: p["schema"] for p in schema["paths"][path][method]["parameters"] if p["in"] == "query"}

    sessions = query("get", "/api/sessions/")
    assert sessions["page"]["minimum"] == 1
    assert (sessions["page_size"]["minimum"], sessions["page_size"]["maximum"]) == (1, 500)
    assert query("get", "/api/sessions/{id}/nodes/")["since_rev"]["minimum"] == 0


@pytest.mark.parametrize("page", ["", "abc", "0", "000", "-1", "1.5", "\x00", "²"])
def test_a_page_that_is_not_a_page_number_is_a_400_naming_it(logged_in, page):
    # DRF read an empty `page` as page 1 (found by Schemathesis: the schema says a whole number from 1),
    # and answered the others with a 404 "Invalid page." that named nothing.
    response = logged_in.get("/api/sessions/", {"page": page})
    assert response.status_code == 400
    assert response.json()["page"] == [f"must be a whole number from 1 (or \"last\"), got {page[:40]!r}"]


def test_a_page_past_the_last_is_a_404_and_last_is_the_last(logged_in):
    for page in ("7", "2086487032655", "9" * 5_000):  # well formed, no such page
        assert logged_in.get("/api/sessions/", {"page": page}).status_code == 404
    assert logged_in.get("/api/sessions/", {"page": "last"}).status_code == 200


def test_the_schema_says_a_session_id_is_a_uuid(schema):
    for method, path in [("get", "/api/sessions/{id}/"), ("get", "/api/sessions/{id}/nodes/"),
                         ("get", "/api/sessions/{id}/export/"), ("post", "/api/sessions/{id}/stop/")]:
        [parameter] = [p for p in schema["paths"][path][method]["parameters"] if p["in"] == "path"]
        assert parameter["schema"] == {"type": "string", "format": "uuid"}, path
