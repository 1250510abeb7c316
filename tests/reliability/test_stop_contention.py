"""A stop that finds a stop already requested (or the session ended) returns at once: it never waits
for the session's row lock, on which 100 concurrent stops of one session used to queue."""
import pytest
from django.db.models import QuerySet

from dag.models import Session
from dag.runs import lifecycle, stop

pytestmark = pytest.mark.django_db


@pytest.fixture
def no_row_locks(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("request_stop queued on the session's row lock")
    monkeypatch.setattr(QuerySet, "select_for_update", refuse)


@pytest.mark.parametrize("status, cancel_requested", [
    (Session.Status.RUNNING, True),
    (Session.Status.CANCELLED, True),
    (Session.Status.COMPLETED, False),
])
def test_a_stop_with_nothing_to_write_takes_no_row_lock(user, no_row_locks, status, cancel_requested):
    session = Session.objects.create(owner=user, function="echo", args={}, status=status,
                                     cancel_requested=cancel_requested)
    stopped = lifecycle.request_stop(session.pk)
    assert (stopped.pk, stopped.status, stopped.cancel_requested) == (session.pk, status, cancel_requested)


def test_a_repeated_stop_still_signals_a_run_in_this_process(user, no_row_locks):
    session = Session.objects.create(owner=user, function="echo", args={}, status=Session.Status.RUNNING,
                                     cancel_requested=True)
    with stop.watch(session.pk) as signal:
        lifecycle.request_stop(session.pk)
        assert signal.is_set
