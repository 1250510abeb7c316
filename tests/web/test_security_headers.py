"""Security headers on every response, and an API docs page that needs nothing from another host."""
import pytest


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/", "/accounts/login/", "/api/functions/"])
def test_every_response_carries_the_content_security_policy(client, path):
    response = client.get(path)
    policy = response.headers["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
    assert response.headers["X-Frame-Options"] == "DENY"


@pytest.mark.django_db
def test_the_api_docs_load_swagger_ui_from_this_server(logged_in):
    html = logged_in.get("/api/docs/").content.decode()
    assert "swagger-ui" in html
    assert "cdn.jsdelivr.net" not in html and "https://" not in html


def test_favicon_points_at_the_static_icon(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response.headers["Location"].endswith("favicon.svg")
