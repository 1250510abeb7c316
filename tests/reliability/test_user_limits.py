"""Item 7: per-user limits. Queued + running sessions (OPENPROGRAM_MAX_ACTIVE_RUNS_PER_USER) and stored data
(OPENPROGRAM_MAX_STORED_BYTES_PER_USER), refused the same way through the API (429), the form and the CLI."""
import io
import threading

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from rest_framework.test import APIClient

from dag.models import Node, Session
from dag.runs import quotas
from dag.runs.launch import LaunchLimited, create_session

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_at_once(settings):
    settings.OPENPROGRAM_MAX_ACTIVE_RUNS_PER_USER = 2


def fill(owner, count, status="queued"):
    for _ in range(count):
        Session.objects.create(owner=owner, function="slow_count", args={"n": 1}, status=status)


def test_the_api_answers_429_naming_the_limit(user, other_user, two_at_once):
    fill(user, 2)
    client = APIClient()
    client.force_authenticate(user)
    response = client.post("/api/sessions/", {"function": "slow_count", "args": {"n": 1}}, format="json")
    assert response.status_code == 429
    detail = response.json()["detail"]
    assert "limit is 2" in detail and "OPENPROGRAM_MAX_ACTIVE_RUNS_PER_USER" in detail
    assert Session.objects.filter(owner=user).count() == 2
    # Another user is not held back by alice's runs.
    assert create_session(other_user, "slow_count", {"n": 1}).owner == other_user


def test_ended_sessions_do_not_count(user, two_at_once):
    fill(user, 1, "running")
    fill(user, 5, "completed")
    fill(user, 5, "error")
    assert create_session(user, "slow_count", {"n": 1}).status == "queued"
    with pytest.raises(LaunchLimited, match="2 sessions queued or running"):
        create_session(user, "slow_count", {"n": 1})


def test_the_form_shows_the_limit(logged_in, user, two_at_once):
    fill(user, 2)
    response = logged_in.post("/functions/slow_count/", {"n": "1", "delay_s": "0"})
    assert response.status_code == 429
    assert "OPENPROGRAM_MAX_ACTIVE_RUNS_PER_USER" in response.content.decode()
    assert Session.objects.count() == 2


def test_the_cli_exits_2_with_the_message(local_user, two_at_once):
    fill(local_user, 2)
    with pytest.raises(CommandError) as caught:
        call_command("run_function", "slow_count", "n=1", stdout=io.StringIO())
    assert caught.value.returncode == 2
    assert "OPENPROGRAM_MAX_ACTIVE_RUNS_PER_USER" in str(caught.value)


def test_zero_turns_the_limit_off(settings, user):
    settings.OPENPROGRAM_MAX_ACTIVE_RUNS_PER_USER = 0
    fill(user, 10)
    create_session(user, "slow_count", {"n": 1})


@pytest.mark.django_db(transaction=True)
def test_launches_sent_at_once_cannot_all_slip_under_the_limit(user, two_at_once):
    results, start = [], threading.Barrier(6)

    def launch_one():
        try:
            start.wait()
            create_session(user, "slow_count", {"n": 1})
            results.append("created")
        except LaunchLimited:
            results.append("limited")
        finally:
            connection.close()

    threads = [threading.Thread(target=launch_one) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(results) == ["created"] * 2 + ["limited"] * 4
    assert Session.objects.filter(owner=user).count() == 2


def test_the_storage_quota_refuses_a_launch_clearly(settings, user, other_user):
    settings.OPENPROGRAM_MAX_STORED_BYTES_PER_USER = 5_000
    session = Session.objects.create(owner=user, function="slow_count", args={"text": "a" * 1_000},
                                     status="completed", result="b" * 1_000)
    Node.objects.create(session=session, seq=0, kind="code", name="step", input={"x": "c" * 1_500},
                        output="d" * 1_500, status="completed")
    assert 5_000 <= quotas.stored_bytes(user) < 5_200
    with pytest.raises(LaunchLimited) as caught:
        create_session(user, "slow_count", {"n": 1})
    assert "OPENPROGRAM_MAX_STORED_BYTES_PER_USER" in str(caught.value) and "5,000 bytes" in str(caught.value)
    client = APIClient()
    client.force_authenticate(user)
    response = client.post("/api/sessions/", {"function": "slow_count", "args": {"n": 1}}, format="json")
    assert response.status_code == 429 and "OPENPROGRAM_MAX_STORED_BYTES_PER_USER" in response.json()["detail"]
    assert quotas.stored_bytes(other_user) == 0
    create_session(other_user, "slow_count", {"n": 1})
