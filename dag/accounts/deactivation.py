"""Deactivating a user (the admin's "active" box, or `is_active = False` saved) stops their runs.

Django already refuses a deactivated user's logins, cookies and tokens; their runs would go on, spending
on their models. Each queued or running session of theirs is finished `cancelled` at once, saying why
(DEACTIVATED), through the write path's compare-and-set (a run ending on its own at that moment keeps its
own end), and its run is woken as for a Stop: it stops at its next call, and its later writes are
refused by its lease's fence.

Saved rows only: `User.objects.filter(...).update(is_active=False)` sends no signal and stops nothing.
"""
from __future__ import annotations

import logging

from django.conf import settings
from django.db.models.signals import post_save
from django.dispatch import receiver

from ..models import Session
from ..recording import write_path
from ..runs import stop

log = logging.getLogger(__name__)

DEACTIVATED = "the owner's account was deactivated"


def stop_sessions_of(user) -> int:
    """Finish every queued or running session of `user` `cancelled` (DEACTIVATED); how many it ended."""
    active = Session.objects.filter(owner=user, status__in=(Session.Status.QUEUED, Session.Status.RUNNING))
    ended = 0
    for session_id in active.values_list("pk", flat=True):
        if write_path.finish_session(session_id, Session.Status.CANCELLED, error=DEACTIVATED):
            ended += 1
            if not stop.signal_local(session_id):
                stop.publish_stop(session_id)  # running in another process: wake it (the fence holds anyway)
    if ended:
        log.warning("user %r was deactivated: %d of their sessions stopped", user.get_username(), ended)
    return ended


@receiver(post_save, sender=settings.AUTH_USER_MODEL, dispatch_uid="dag.accounts.deactivation.on_save")
def stop_runs_of_a_deactivated_user(sender, instance, **kwargs) -> None:
    if not instance.is_active:
        stop_sessions_of(instance)
