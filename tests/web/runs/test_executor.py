"""The executor is chosen by dotted path in settings, behind a small base class."""
from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from dag.models import Session
from dag.runs.executors import Executor, InProcessExecutor, get_executor
from dag.runs.launch import launch


class RecordingExecutor(Executor):
    """Runs nothing; remembers what it was given."""

    submitted: list = []

    def submit(self, session_id) -> None:
        RecordingExecutor.submitted.append(str(session_id))


def test_the_default_is_the_in_process_pool(settings):
    settings.OPENPROGRAM_EXECUTOR_WORKERS = 3
    executor = get_executor()
    assert isinstance(executor, InProcessExecutor) and executor.workers == 3 and executor.supports_local_stop
    assert get_executor() is executor  # one per process


@pytest.mark.django_db
def test_launches_go_to_the_configured_executor(settings, user, test_functions):
    settings.OPENPROGRAM_EXECUTOR = f"{__name__}.RecordingExecutor"
    RecordingExecutor.submitted.clear()
    client = APIClient()
    client.force_authenticate(user)
    session_id = client.post("/api/sessions/", {"function": "echo", "args": {"text": "x"}}, format="json").json()["id"]
    assert RecordingExecutor.submitted == [session_id]


@pytest.mark.parametrize("path, error, message", [
    ("dag.runs.executors.NoSuchExecutor", ImportError, "OPENPROGRAM_EXECUTOR='dag.runs.executors.NoSuchExecutor' cannot be imported"),
    ("dag.models.Session", TypeError, "is not a dag.runs.executors.Executor subclass"),
])
def test_a_wrong_setting_is_named(settings, path, error, message):
    settings.OPENPROGRAM_EXECUTOR = path
    with pytest.raises(error, match=message.replace("(", r"\(").replace(".", r"\.")):
        get_executor()


def test_a_pool_needs_a_worker():
    with pytest.raises(ValueError, match="OPENPROGRAM_EXECUTOR_WORKERS must be at least 1"):
        InProcessExecutor(workers=0)


@pytest.mark.django_db
def test_a_wrong_setting_fails_the_launch_before_a_session_is_saved(settings, user, test_functions):
    settings.OPENPROGRAM_EXECUTOR = "dag.runs.executors.NoSuchExecutor"
    with pytest.raises(ImportError, match="OPENPROGRAM_EXECUTOR"):
        launch(user, "echo", {"text": "x"})
    assert not Session.objects.filter(owner=user).exists()  # no session left queued with no run
