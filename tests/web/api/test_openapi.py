"""The OpenAPI schema validates without warnings and documents every endpoint."""
from __future__ import annotations

import io

import pytest
import yaml
from django.core.management import call_command
from rest_framework.test import APIClient



def test_spectacular_validates_with_no_warnings(tmp_path):
    target = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(target), stdout=io.StringIO())
    schema = yaml.safe_load(target.read_text())
    paths = set(schema["paths"])
    assert {"/api/functions/", "/api/functions/{name}/", "/api/sessions/", "/api/sessions/{id}/",
            "/api/sessions/{id}/nodes/", "/api/sessions/{id}/export/", "/api/sessions/{id}/stop/"} <= paths
    nodes = schema["paths"]["/api/sessions/{id}/nodes/"]["get"]
    assert [p["name"] for p in nodes["parameters"] if p["in"] == "query"] == ["since_rev"]
    assert set(schema["paths"]["/api/sessions/"]["post"]["responses"]) == {"201", "400", "429"}
    assert "knoxApiToken" in schema["components"]["securitySchemes"]  # `Authorization: Token <key>`


@pytest.mark.django_db
def test_schema_and_docs_pages_are_served_to_logged_in_users(user):
    client = APIClient()
    client.force_authenticate(user)
    assert client.get("/api/schema/").status_code == 200
    docs = client.get("/api/docs/")
    assert docs.status_code == 200 and b"swagger" in docs.content.lower()


@pytest.mark.django_db
@pytest.mark.parametrize("accept", ["*/*", "application/vnd.oai.openapi", "application/vnd.oai.openapi+json"])
def test_the_schema_refuses_an_anonymous_caller_in_json_like_the_rest_of_the_api(accept):
    response = APIClient().get("/api/schema/", HTTP_ACCEPT=accept)
    assert response.status_code == 401 and response["Content-Type"] == "application/json"
    assert response.json() == {"detail": "Authentication credentials were not provided."}


@pytest.mark.django_db
def test_the_docs_page_sends_an_anonymous_visitor_to_log_in_and_back_but_refuses_a_bad_token():
    response = APIClient().get("/api/docs/")
    assert response.status_code == 302 and response["Location"] == "/accounts/login/?next=/api/docs/"
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token wrong")
    assert client.get("/api/docs/").status_code == 401


def test_the_session_schema_documents_the_run_summary_and_the_export_the_recorded_session(tmp_path):
    target = tmp_path / "schema.yaml"
    call_command("spectacular", "--file", str(target), stdout=io.StringIO())
    schemas = yaml.safe_load(target.read_text())["components"]["schemas"]
    session = schemas["Session"]["properties"]
    assert session["counts"]["type"] == "object" and session["counts"]["additionalProperties"]["type"] == "integer"
    assert set(schemas["Usage"]["properties"]) == {"llm_calls", "input_tokens", "output_tokens"}
    assert session["warning"]["type"] == "string" and session["wall_ms"]["nullable"] is True
    recorded = schemas["Export"]["properties"]["session"]["$ref"].rsplit("/", 1)[1]
    assert not {"counts", "usage", "warning", "wall_ms"} & set(schemas[recorded]["properties"])


@pytest.mark.django_db
def test_options_on_the_docs_page_lists_its_methods_in_json(user):
    client = APIClient()
    client.force_authenticate(user)
    response = client.options("/api/docs/")
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    assert "GET" in response["Allow"] and response.json()["name"]


def test_the_launch_schema_says_what_the_server_takes(tmp_path):
    """An empty function name is refused (minLength 1); a null budget limit is taken as no limit."""
    target = tmp_path / "schema.yaml"
    call_command("spectacular", "--file", str(target), stdout=io.StringIO())
    components = yaml.safe_load(target.read_text())["components"]["schemas"]
    assert components["Launch"]["properties"]["function"]["minLength"] == 1
    assert all(limit["nullable"] for limit in components["LaunchBudgetShape"]["properties"].values())


def test_asking_for_a_token_needs_no_authentication_in_the_schema(tmp_path):
    target = tmp_path / "schema.yaml"
    call_command("spectacular", "--file", str(target), stdout=io.StringIO())
    token = yaml.safe_load(target.read_text())["paths"]["/api/token/"]
    assert "security" not in token["post"] and token["delete"]["security"]
