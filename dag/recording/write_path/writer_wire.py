"""How a serving process's writes and its writer process's answers cross their pipes (`writer_process`).

Messages are pickled (`encode`). A queued write crosses as a tuple (`to_wire`, `from_wire`): a new node as
its field values, its times in UTC as seconds since the epoch (a float pickles in a fifth of a
datetime's time, and below the year 2106 it names the microsecond exactly); a backfill as its fields. A
failure crosses as itself if it pickles, else as its text (`portable`).
"""
from __future__ import annotations

import pickle
from datetime import datetime, timezone
from operator import itemgetter

from django.db import models

from ...models import Node
from .batch_writes import NodeCreate, NodeFinish
from .sql import node_instance


# A new node's field values, in this order (its `__dict__`, read without the descriptors).
_NODE_ATTNAMES = tuple(field.attname for field in Node._meta.concrete_fields)
_node_values = itemgetter(*_NODE_ATTNAMES)
_TIMES_AT = tuple(index for index, field in enumerate(Node._meta.concrete_fields)
                  if isinstance(field, models.DateTimeField))
_TIME_NAMES = frozenset(_NODE_ATTNAMES[index] for index in _TIMES_AT)


def _time_out(value):
    return value.timestamp() if isinstance(value, datetime) and value.tzinfo is timezone.utc else value


def _time_in(value):
    return datetime.fromtimestamp(value, timezone.utc) if type(value) is float else value


def to_wire(entry) -> tuple:
    """A queued write as the writer process takes it: (session, lease, values) for a new node, (session,
    lease, pk, fields) for a backfill."""
    if isinstance(entry, NodeCreate):
        values = list(_node_values(entry.node.__dict__))
        for index in _TIMES_AT:
            values[index] = _time_out(values[index])
        return entry.session_id, entry.lease, values
    return entry.session_id, entry.lease, entry.pk, {
        name: _time_out(value) if name in _TIME_NAMES else value for name, value in entry.fields.items()}


def from_wire(item: tuple):
    """The write `to_wire` gave."""
    if len(item) == 3:
        session_id, lease, values = item
        for index in _TIMES_AT:
            values[index] = _time_in(values[index])
        return NodeCreate(session_id, lease, node_instance(dict(zip(_NODE_ATTNAMES, values))), taken=True)
    session_id, lease, pk, fields = item
    return NodeFinish(session_id, lease, pk, {
        name: _time_in(value) if name in _TIME_NAMES else value for name, value in fields.items()}, taken=True)


def portable(failure: BaseException) -> BaseException:
    """`failure` as it can cross to the serving process: itself if it pickles, else its text."""
    try:
        pickle.loads(pickle.dumps(failure))
        return failure
    except Exception:
        return RuntimeError(f"{type(failure).__name__}: {failure}")


def encode(message) -> bytes:
    return pickle.dumps(message, pickle.HIGHEST_PROTOCOL)
