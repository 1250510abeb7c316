"""Per-user limits checked at every launch, so one user cannot starve the others or fill the database.

- `OPENPROGRAM_MAX_ACTIVE_RUNS_PER_USER` (default 4): sessions queued or running at once;
- `OPENPROGRAM_MAX_STORED_BYTES_PER_USER` (default 200 MB): what the user's sessions hold, measured as
  the length of their arguments and results and of their nodes' inputs and outputs as JSON text
  (`dag.stored_size`: ended sessions by the size stored when they ended, the others from their nodes).

0 turns a limit off. The check and the new session's row are one transaction, under a lock on the
user's row, so launches sent at once cannot all slip under the limit.
"""
from __future__ import annotations

from django.contrib.auth import get_user_model

from ..conf import conf
from ..models import Session
from ..stored_size import owner_bytes

ACTIVE = (Session.Status.QUEUED, Session.Status.RUNNING)


def lock_user(owner) -> None:
    """Hold `owner`'s row until the transaction ends: their launches check and create one at a time."""
    list(get_user_model().objects.select_for_update().filter(pk=owner.pk).values_list("pk"))


def active_runs_problem(owner) -> str | None:
    limit = conf.MAX_ACTIVE_RUNS_PER_USER
    if not limit:
        return None
    active = Session.objects.filter(owner=owner, status__in=ACTIVE).count()
    if active < limit:
        return None
    return (f"{owner.get_username()} already has {active} sessions queued or running; the limit is {limit} "
            f"(setting OPENPROGRAM_MAX_ACTIVE_RUNS_PER_USER): wait for one to end, or stop one")


def stored_bytes(owner) -> int:
    """About how much `owner`'s sessions hold: their JSON payloads' length as text."""
    return owner_bytes(owner)


def storage_problem(owner) -> str | None:
    limit = conf.MAX_STORED_BYTES_PER_USER
    if not limit:
        return None
    stored = stored_bytes(owner)
    if stored < limit:
        return None
    return (f"the sessions of {owner.get_username()} hold about {stored:,} bytes of arguments, results and "
            f"node data; the limit is {limit:,} bytes (setting OPENPROGRAM_MAX_STORED_BYTES_PER_USER): "
            f"an administrator can delete old sessions (/admin/) or raise the limit")
