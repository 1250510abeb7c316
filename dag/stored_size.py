"""How much a session holds, as the per-user storage limit counts it: the length, as JSON text, of its
arguments and result and of its nodes' inputs and outputs, plus its and its nodes' error texts (which
keep an exception's whole message); an approximation of the rows' size, summed by the database.

An ended session's size cannot change any more (its run's late writes are refused by the lease fence),
so the write path measures it once, when the session ends, into `Session.stored_bytes`; a launch then
adds up its owner's sessions instead of reading every node they ever recorded. Sessions without a
stored size (still running, or ended before sizes were stored) are measured from their nodes.
"""
from __future__ import annotations

from django.db.models import Sum, TextField, Value
from django.db.models.functions import Cast, Coalesce, Length

from .models import Node, Session


def text_length(*fields):
    """The summed length of `fields` as text (a JSON field's as its JSON), 0 for a NULL."""
    lengths = [Coalesce(Length(Cast(field, TextField())), Value(0)) for field in fields]
    return sum(lengths[1:], lengths[0])


def _own_bytes(sessions) -> int:
    return sessions.aggregate(size=Sum(text_length("args", "result", "error")))["size"] or 0


def _node_bytes(nodes) -> int:
    return nodes.aggregate(size=Sum(text_length("input", "output", "error")))["size"] or 0


def session_bytes(session_id) -> int:
    """What session `session_id` holds now, read from its row and its nodes (every one of them)."""
    return (_own_bytes(Session.objects.filter(pk=session_id))
            + _node_bytes(Node.objects.filter(session_id=session_id)))


def owner_bytes(owner) -> int:
    """What `owner`'s sessions hold: the stored sizes of those that have one, and the others measured.

    Reads one row per session, and nodes only of the sessions without a stored size: none at all
    while every session of `owner` has ended."""
    return sessions_bytes(Session.objects.filter(owner=owner))


def sessions_bytes(sessions) -> int:
    """What the `sessions` (a queryset) hold, as `owner_bytes` counts them."""
    stored = sessions.aggregate(size=Sum("stored_bytes"))["size"] or 0
    unmeasured = list(sessions.filter(stored_bytes__isnull=True).values_list("pk", flat=True))
    if not unmeasured:
        return stored
    return (stored + _own_bytes(Session.objects.filter(pk__in=unmeasured))
            + _node_bytes(Node.objects.filter(session_id__in=unmeasured)))
