"""The session list (`/sessions/`) and the live session page (`/sessions/<id>/`); the list's filters, rows
and totals are tested in tests/web/pages/test_session_list.py."""
import re

import pytest

from dag.models import Session

pytestmark = pytest.mark.django_db


@pytest.fixture
def client_user(client, user):
    client.force_login(user)
    return client


def make(owner, function="wiki_agent", status="completed", **fields):
    return Session.objects.create(owner=owner, function=function, status=status, **fields)


def listed_ids(response):
    return re.findall(r'data-session="([0-9a-f-]{36})"', response.content.decode())


@pytest.mark.parametrize("url", ["/sessions/", "/sessions/9b2f3c1e-0000-4000-8000-000000000000/"])
def test_pages_need_a_login(client, url):
    response = client.get(url)
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_session_page_carries_what_the_live_view_needs(client_user, user):
    session = make(user, "runaway_agent", status="running")
    response = client_user.get(f"/sessions/{session.id}/")
    assert response.status_code == 200
    html = response.content.decode()
    assert f'data-ws-path="/ws/sessions/{session.id}/"' in html
    assert f'data-stop-url="/api/sessions/{session.id}/stop/"' in html
    assert 'data-ceiling="5"' in html
    # The statuses that end a run, from the server: the page's script keeps no list of its own.
    assert 'data-terminal="cancelled,completed,error,interrupted"' in html
    assert 'type="module"' in html and "js/session_page.js" in html
    assert f"/functions/runaway_agent/?from={session.id}" in html  # run again


def test_another_users_session_page_is_a_404(client, other_user, user):
    session = make(user)
    client.force_login(other_user)
    assert client.get(f"/sessions/{session.id}/").status_code == 404


def test_function_names_are_escaped_in_pages(client_user, user):
    session = make(user, function="<script>alert(1)</script>")
    for url in ("/sessions/", f"/sessions/{session.id}/"):
        html = client_user.get(url).content.decode()
        assert "<script>alert(1)</script>" not in html
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
