"""The session list (`/sessions/`) and the live session page (`/sessions/<id>/`)."""
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


def test_list_shows_only_the_callers_sessions_newest_first(client_user, user, other_user):
    older = make(user, "wiki_agent")
    newer = make(user, "slow_count", status="running")
    make(other_user, "runaway_agent")
    response = client_user.get("/sessions/")
    assert response.status_code == 200
    assert listed_ids(response) == [str(newer.id), str(older.id)]
    assert "runaway_agent" not in response.content.decode()


def test_status_filter_narrows_the_list_and_counts_each_status(client_user, user):
    running = make(user, "slow_count", status="running")
    make(user, "wiki_agent", status="completed")
    make(user, "wiki_agent", status="completed")
    response = client_user.get("/sessions/?status=running")
    assert listed_ids(response) == [str(running.id)]
    filters = {f["value"]: (f["count"], f["active"]) for f in response.context["filters"]}
    assert filters[""] == (3, False)
    assert filters["running"] == (1, True)
    assert filters["completed"] == (2, False)
    assert filters["error"] == (0, False)


def test_unknown_status_filter_is_a_400_naming_the_allowed_values(client_user):
    response = client_user.get("/sessions/?status=sleeping")
    assert response.status_code == 400
    body = response.content.decode()
    assert "'sleeping'" in body and "running" in body and "cancelled" in body


def test_stop_buttons_only_for_unfinished_runs_and_cancelling_shown(client_user, user):
    running = make(user, "slow_count", status="running")
    stopping = make(user, "slow_count", status="running", cancel_requested=True)
    done = make(user, "wiki_agent", status="completed")
    html = client_user.get("/sessions/").content.decode()
    rows = {sid: html[html.index(f'data-session="{sid}"'):] for sid in (str(running.id), str(stopping.id), str(done.id))}
    row_end = lambda text: text[:text.index("</tr>")]  # noqa: E731
    assert f'data-stop-url="/api/sessions/{running.id}/stop/"' in row_end(rows[str(running.id)])
    assert 'class="badge status-cancelling" data-role="status">cancelling<' in row_end(rows[str(stopping.id)])
    assert "data-stop-url" not in row_end(rows[str(done.id)])


def test_list_is_paginated(client_user, user):
    for _ in range(51):
        make(user)
    first = client_user.get("/sessions/")
    second = client_user.get("/sessions/?page=2")
    assert len(listed_ids(first)) == 50 and len(listed_ids(second)) == 1


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


def test_durations_in_the_list_read_at_a_glance(client_user, user):
    from datetime import timedelta

    from django.utils import timezone

    start = timezone.now()
    make(user, started_at=start, finished_at=start + timedelta(milliseconds=320))
    make(user, started_at=start, finished_at=start + timedelta(seconds=4.25))
    make(user, started_at=start, finished_at=start + timedelta(seconds=125))
    make(user, status="running", started_at=start)
    make(user, status="queued")
    durations = [s.duration_text for s in client_user.get("/sessions/").context["page"].object_list]
    assert durations == ["", "running", "2 m 5 s", "4.2 s", "320 ms"]
