"""Every kind of page works under the Content-Security-Policy (a violation is a console error, which the
`page` fixture turns into a failure), and the API docs load their assets from this server, not a CDN."""
import pytest

PAGES = ["/", "/functions/wiki_agent/", "/functions/research_agent/", "/sessions/"]


@pytest.mark.parametrize("path", PAGES)
def test_app_pages_carry_the_policy_and_break_none_of_it(page, path):
    response = page.goto(path)
    assert response.ok
    assert "script-src 'self'" in response.headers["content-security-policy"]


def test_the_api_docs_render_offline_under_the_policy(page, server_url):
    elsewhere = []
    page.on("request", lambda request: None if request.url.startswith(server_url) else elsewhere.append(request.url))
    page.goto("/api/docs/")
    page.wait_for_selector(".swagger-ui .info")
    assert elsewhere == []


def test_the_admin_works_under_the_policy(page, user):
    user.is_staff = user.is_superuser = True
    user.save()
    page.goto("/admin/dag/session/")
    page.wait_for_selector("#changelist")
    page.goto("/admin/dag/node/")
    page.wait_for_selector("#changelist")
