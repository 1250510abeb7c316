"""Deactivating a user stops their queued and running sessions (`cancelled`, saying why); another user's
runs go on."""
from __future__ import annotations

import pytest

from dag.accounts.deactivation import DEACTIVATED
from dag.models import Node, Session
from dag.runs.launch import launch

from ..launch_helpers import wait_for_end
from .test_stop import started_counting

pytestmark = pytest.mark.django_db(transaction=True)


def test_deactivating_a_user_stops_their_queued_and_running_sessions(settings, user, other_user):
    settings.OPENPROGRAM_MAX_ACTIVE_RUNS_PER_USER = 10
    running = launch(user, "slow_count", {"n": 200, "delay_s": 0.05})
    theirs = launch(other_user, "slow_count", {"n": 200, "delay_s": 0.05})
    started_counting(running)
    started_counting(theirs)
    queued = Session.objects.create(owner=user, function="slow_count", args={"n": 1})  # no worker picks it

    user.is_active = False
    user.save()  # as the admin's change form does

    for session in (running, queued):
        wait_for_end(session)
        assert (session.status, session.error) == (Session.Status.CANCELLED, DEACTIVATED)
    assert not Node.objects.filter(session=running, status="running").exists()
    theirs.refresh_from_db()
    assert not theirs.is_terminal  # another user's run goes on
    count = Node.objects.filter(session=running).count()
    wait_for_end(Session.objects.get(pk=running.pk))
    assert Node.objects.filter(session=running).count() == count  # nothing written after the stop

    other_user.is_active = False
    other_user.save()
    assert (wait_for_end(theirs).status, theirs.error) == (Session.Status.CANCELLED, DEACTIVATED)


def test_saving_an_active_user_stops_nothing(user):
    queued = Session.objects.create(owner=user, function="slow_count", args={"n": 1})
    user.first_name = "Alice"
    user.save()
    queued.refresh_from_db()
    assert queued.status == Session.Status.QUEUED
