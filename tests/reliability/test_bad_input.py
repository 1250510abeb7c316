"""Hostile or unlucky input to the API and the launch form gets a 4xx that names the problem, never a 500."""
import pytest

from dag.models import Session

pytestmark = pytest.mark.django_db


def post_json(client, path, body: str):
    return client.post(path, body, content_type="application/json")


# --- JSON nested too deep --------------------------------------------------------------------------

def arrays(depth: int) -> str:
    return "[" * depth + "]" * depth


def objects(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


@pytest.mark.parametrize("nested", [arrays(1000), arrays(100_000), objects(1000), objects(900), objects(150)])
def test_deeply_nested_json_in_a_launch_is_a_400_naming_the_depth(logged_in, test_functions, nested):
    body = '{"function": "widgets", "args": {"question": "q", "extra": %s}}' % nested
    response = post_json(logged_in, "/api/sessions/", body)
    assert response.status_code == 400
    assert "nested deeper than 100 levels" in response.json()["detail"]
    assert not Session.objects.exists()


@pytest.mark.parametrize("nested", [arrays(1000), objects(900)])
def test_deeply_nested_json_to_the_anonymous_token_endpoint_is_a_400(client, nested):
    response = post_json(client, "/api/token/", '{"username": %s, "password": "x"}' % nested)
    assert response.status_code == 400
    assert "nested deeper than 100 levels" in response.json()["detail"]


def test_json_nested_within_the_limit_still_launches(logged_in, test_functions):
    body = '{"function": "widgets", "args": {"question": "q", "extra": %s}}' % objects(90)
    assert post_json(logged_in, "/api/sessions/", body).status_code == 201
