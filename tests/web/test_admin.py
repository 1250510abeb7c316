"""The Django admin lists sessions and their nodes, filtered by status and function; nodes are read-only."""
import uuid

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from dag.models import Node
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
