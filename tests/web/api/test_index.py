"""`GET /api/`: an index of the API (each endpoint and what it does), linking the docs and the schema."""
from __future__ import annotations

import io

import pytest
import yaml
from django.contrib.auth import get_user_model
from django.core.management import call_command
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


def test_the_index_lists_endpoints_and_links_the_docs_and_schema(api):
    response = api.get("/api/")
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    body = response.json()
    assert body["docs"] == "http://testserver/api/docs/" and body["schema"] == "http://testserver/api/schema/"
    by_path = {entry["path"]: entry for entry in body["endpoints"]}
    assert by_path["/api/sessions/"]["methods"] == "GET, POST"
    assert all(entry["description"] for entry in body["endpoints"])
    assert api.get(body["docs"]).status_code == 200 and api.get(body["schema"]).status_code == 200


def test_anonymous_callers_get_a_json_refusal_not_a_page():
    response = APIClient().get("/api/")
    assert response.status_code == 401 and "detail" in response.json()


def test_the_index_names_every_documented_path_with_its_methods(tmp_path):
    target = tmp_path / "schema.yaml"
    call_command("spectacular", "--file", str(target), stdout=io.StringIO())
    documented = {path: {method.upper() for method in operations if method != "parameters"}
                  for path, operations in yaml.safe_load(target.read_text())["paths"].items()}
    client = APIClient()
    client.force_authenticate(get_user_model().objects.create_user("indexer"))
    listed = {entry["path"]: set(entry["methods"].split(", ")) for entry in client.get("/api/").json()["endpoints"]}
    assert listed == documented
