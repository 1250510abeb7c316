"""The Django admin lists sessions and their nodes, filtered by status and function; a run's state and its
nodes are read-only, and what may change goes through the write path."""
import uuid

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from dag.live import broadcast
from dag.models import Node, Session
from dag.recording import write_path

from .dag_helpers import new_session

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client):
    user = get_user_model().objects.create_superuser("dag-admin", "admin@example.com", "a-long-password-1")
    client.force_login(user)
    return client


# Unique names: another test process may share the PostgreSQL test database.
SUMMARIZE, TRANSLATE = (f"{name}_{uuid.uuid4().hex[:8]}" for name in ("summarize", "translate"))


@pytest.fixture
def two_sessions():
    done = new_session(function=SUMMARIZE)
    write_path.set_session_status(done.id, "completed", result="ok")
    running = new_session(function=TRANSLATE, args={"text": "<b>bold</b>"})
    write_path.set_session_status(running.id, "running")
    node = write_path.create_node(running.id, kind="code", name=TRANSLATE, input={"text": "<b>bold</b>"})
    return done, running, node


def test_sessions_filter_by_status_and_function(admin_client, two_sessions):
    done, running, _ = two_sessions
    url = reverse("admin:dag_session_changelist")
    by_status = admin_client.get(url, {"status__exact": "completed"}).content.decode()
    assert str(done.id) in by_status and str(running.id) not in by_status
    by_function = admin_client.get(url, {"function": TRANSLATE}).content.decode()
    assert str(running.id) in by_function and str(done.id) not in by_function
    assert "&lt;b&gt;bold&lt;/b&gt;" in by_function  # user text is shown as text, not HTML


def test_nodes_filter_by_status_and_function_and_cannot_be_edited(admin_client, two_sessions):
    _, running, node = two_sessions
    url = reverse("admin:dag_node_changelist")
    page = admin_client.get(url, {"session__function": TRANSLATE, "status__exact": "running"})
    assert page.status_code == 200 and page.context["cl"].result_count == 1
    finished = admin_client.get(url, {"session__function": TRANSLATE, "status__exact": "completed"})
    assert finished.context["cl"].result_count == 0
    change = admin_client.post(reverse("admin:dag_node_change", args=[node.pk]), {"name": "renamed"})
    assert change.status_code == 403
    assert Node.objects.get(pk=node.pk).name == TRANSLATE
    session_page = admin_client.get(reverse("admin:dag_session_change", args=[running.pk])).content.decode()
    assert f"?session__id__exact={running.pk}" in session_page  # the link to its nodes


def test_a_runs_state_is_read_only_and_an_owner_change_is_a_published_revision(admin_client, two_sessions,
                                                                               django_capture_on_commit_callbacks):
    done, _, _ = two_sessions
    new_owner = get_user_model().objects.create_user(f"new-owner-{uuid.uuid4().hex[:8]}")
    rev_before = Session.objects.get(pk=done.pk).rev
    seen = []
    listener = lambda session_id, messages: seen.extend(messages)  # noqa: E731
    broadcast.subscribe(listener)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            response = admin_client.post(reverse("admin:dag_session_change", args=[done.pk]),
                                         {"owner": new_owner.pk, "status": "running", "result": '"forged"'})
    finally:
        broadcast.unsubscribe(listener)
    assert response.status_code == 302
    stored = Session.objects.get(pk=done.pk)
    assert (stored.owner, stored.status, stored.result) == (new_owner, "completed", "ok")
    assert stored.rev == rev_before + 1 and [m["rev"] for m in seen] == [stored.rev]
    # What it holds against its owner's storage limit is shown, read-only, beside its node count.
    page = admin_client.get(reverse("admin:dag_session_change", args=[done.pk])).content.decode()
    assert "Stored bytes" in page and 'name="stored_bytes"' not in page


def test_deleting_a_session_in_the_admin_takes_its_nodes_and_nodes_alone_cannot_be_deleted(admin_client,
                                                                                          two_sessions):
    _, running, node = two_sessions
    assert admin_client.post(reverse("admin:dag_node_delete", args=[node.pk]), {"post": "yes"}).status_code == 403
    response = admin_client.post(reverse("admin:dag_session_delete", args=[running.pk]), {"post": "yes"})
    assert response.status_code == 302
    assert not Session.objects.filter(pk=running.pk).exists() and not Node.objects.filter(pk=node.pk).exists()


@pytest.mark.parametrize("list_name, query", [
    ("admin:dag_session_changelist", "function=%00"), ("admin:dag_session_changelist", "q=a%00"),
    ("admin:dag_node_changelist", "session__function=x%00y"), ("admin:dag_node_changelist", "na%00me=x"),
    ("admin:auth_user_changelist", "username=a%00"),  # every admin list, Django's own too
])
def test_a_list_filter_holding_nul_is_a_400_naming_it(admin_client, two_sessions, list_name, query):
    # PostgreSQL refuses NUL in text, so the filter must not reach the database (on SQLite it would).
    response = admin_client.get(f"{reverse(list_name)}?{query}")
    assert response.status_code == 400 and response["Content-Type"] == "text/plain; charset=utf-8"
    assert "cannot contain a NUL character" in response.content.decode()
    assert admin_client.get(reverse(list_name), {"o": "1"}).status_code == 200  # a query without one is read
