"""A session's whole DAG as one JSON document, and back: for download, archiving and moving runs.

The export is the same `as_dict()` shapes the API and the websocket stream use, nodes in `seq` order.
Importing creates a new session (new ids) for `owner`; node parents are matched by `seq`, so an
export of the import equals the original apart from ids. An import is checked field by field against
what the recorder itself would store, so a hand-edited or hostile document is refused with
SessionImportError naming the field, never written half-way or left to break a page later.
"""
from __future__ import annotations

import math
import re
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any, Callable, Iterator, Optional

from django.db import connections, transaction
from django.db.backends.base.operations import BaseDatabaseOperations
from django.db.models import Field

from runtime.options import EXPOSE_VALUES, check_render_range
from runtime.spec import about_digits

from ..models import Node, Session
from ..runs.launch_budget import BudgetProblem, clean_budget
from . import write_path
from .values import MAX_DEPTH, clean_text

EXPORT_VERSION = 1
# Session fields an import restores; id, owner and node_count are the new session's own. `worker` is
# kept for the record only: an import always arrives ended, so no lease on it is ever renewed.
_SESSION_FIELDS = ("function", "args", "status", "result", "error", "cancel_requested", "budget",
                   "budget_spend", "launch_budget", "model", "rev", "created_at", "started_at", "finished_at",
                   "worker")
_NODE_FIELDS = ("kind", "name", "status", "depth", "name_depth", "expose", "render_range", "doc", "input",
                "output", "error", "traceback", "refusal", "model", "usage", "rev", "replayed", "started_at",
                "finished_at")
# The tightest bounds of every supported database (PostgreSQL's `integer` is 32-bit; SQLite's are all
# 64-bit), so an import that works on one works on all.
_INTEGER_RANGES = BaseDatabaseOperations.integer_field_ranges
# The totals add usage up cast to a plain integer column (dag.recording.totals).
_MAX_TOKENS = _INTEGER_RANGES["IntegerField"][1]
# A model call's cost beyond any real one: the totals add costs up as floats, where a huge one would
# swallow every other.
_MAX_COST_USD = 1e9
# Rounds of re-reading a session that runs on while it is exported; each reads only what changed, and a
# round ends the export unless a batch committed during its two queries.
_EXPORT_ROUNDS = 50
_BAD_TEXT = "must be valid Unicode text without NUL characters (no unpaired surrogates)"


def export_session(session: Session) -> dict:
    """{"version", "session": session.as_dict(), "nodes": [node.as_dict(), ...] in seq order}, as at one
    moment: of a running session, the session as stored then (re-read) and exactly its nodes then, so no
    node is newer than the session's `rev` and none of the changes it counts is missing.

    Every change of a node commits with a bump of its session's `rev`, so nodes read after the session,
    none of them newer than it, are the nodes as they were when it was read. A node newer than it means
    the run went on meanwhile: the session is read again and only the nodes changed since are read
    again, until a round sees no change after its session (one round for an ended session). No lock is
    held, so a long export does not hold up the run it reads; only a run that commits between every two
    queries for `_EXPORT_ROUNDS` rounds is read once more, whole, in one transaction (`_one_snapshot`).
    """
    nodes: dict[int, dict] = {}
    since: Optional[int] = None  # the first round reads every node
    for _ in range(_EXPORT_ROUNDS):
        session, newest = _read_changes(session.pk, since, nodes)
        if newest <= session.rev:
            break
        since = session.rev
    else:
        with _one_snapshot():
            nodes.clear()
            session, _ = _read_changes(session.pk, None, nodes)
    return {"version": EXPORT_VERSION, "session": session.as_dict(),
            "nodes": sorted(nodes.values(), key=lambda node: node["seq"])}


def _read_changes(session_id, since: Optional[int], nodes: dict) -> tuple[Session, int]:
    """The session as stored now, after which its nodes changed after `since` (all if None) go into
    `nodes`; and the newest of their revs (0 if none)."""
    session = Session.objects.get(pk=session_id)
    changed = Node.objects.filter(session=session)
    if since is not None:
        changed = changed.filter(rev__gt=since)
    newest = 0
    for node in changed.iterator(chunk_size=500):
        nodes[node.pk] = node.as_dict()
        newest = max(newest, node.rev)
    return session, newest


@contextmanager
def _one_snapshot() -> Iterator[None]:
    """A transaction whose reads all see one moment: SQLite's writes wait for it (the app's transactions
    begin IMMEDIATE); PostgreSQL is asked for REPEATABLE READ, which only the outermost transaction may
    set (inside a caller's, the caller's isolation stands)."""
    connection = connections[Session.objects.db]
    outermost = not connection.in_atomic_block
    with transaction.atomic(using=connection.alias):
        if connection.vendor == "postgresql" and outermost:
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        yield


def export_filename(session: Session) -> str:
    """`<function>-<id>.json`, the function's name reduced to characters safe in a file name (and in a
    Content-Disposition header) on every system."""
    function = re.sub(r"[^A-Za-z0-9._-]+", "_", session.function).strip("._") or "session"
    return f"{function[:100]}-{session.pk}.json"


class SessionImportError(ValueError):
    """The document is not a session export; the message names the field that is wrong."""


def import_session(data: Any, owner) -> Session:
    """Recreate an exported session (as a new session owned by `owner`) with all its nodes."""
    session_data, nodes_data = _check_document(data)
    session_fields = {name: _field(session_data, name, "session") for name in _SESSION_FIELDS
                      if name in session_data}
    node_fields, parent_seqs = [], []
    seq_of_id: dict = {}  # the exported ids seen so far: a parent is always written before its children
    for index, item in enumerate(nodes_data):
        where = f"nodes[{index}]"
        node_id = _checked_node_id(item, index, seq_of_id, where)
        node_fields.append({name: _field(item, name, where) for name in _NODE_FIELDS if name in item})
        parent_seqs.append(_parent_seq(item, seq_of_id, where))
        if node_id is not None:
            seq_of_id[node_id] = index
    _end_what_was_unfinished(session_fields, node_fields)
    return write_path.insert_imported_session(owner, session_fields, node_fields, parent_seqs)


IMPORTED_UNFINISHED = "exported before it ended; imported as interrupted"


def _end_what_was_unfinished(session_fields: dict, node_fields: list[dict]) -> None:
    """An export taken mid-run holds `queued` / `running` rows; no run will ever finish the copy, so it
    arrives `interrupted` (otherwise it would stay running forever and count against the active-run limit)."""
    if session_fields.get("status", Session.Status.QUEUED) not in Session.TERMINAL:
        session_fields["status"] = Session.Status.INTERRUPTED
        session_fields["error"] = session_fields.get("error") or IMPORTED_UNFINISHED
    for fields in node_fields:
        if fields.get("status", Node.Status.RUNNING) not in Node.TERMINAL:
            fields["status"] = Node.Status.INTERRUPTED


def _check_document(data: Any) -> tuple[dict, list]:
    if not isinstance(data, dict):
        raise SessionImportError("the export must be a JSON object with 'session' and 'nodes'")
    version = data.get("version", EXPORT_VERSION)
    if version != EXPORT_VERSION:
        raise SessionImportError(f"version must be {EXPORT_VERSION}, got {version!r}")
    if not isinstance(data.get("session"), dict):
        raise SessionImportError("'session' must be an object (a session's as_dict())")
    if not isinstance(data.get("nodes"), list):
        raise SessionImportError("'nodes' must be a list of node objects in seq order")
    if not isinstance(data["session"].get("function"), str) or not data["session"]["function"]:
        raise SessionImportError("session.function must be the function's name (a non-empty string)")
    return data["session"], data["nodes"]


def _is_id(value: Any) -> bool:
    # Not a bool: True == 1 as a dict key, so `"parent": true` would find the node with id 1.
    return isinstance(value, (int, str)) and not isinstance(value, bool)


def _checked_node_id(item: Any, index: int, seq_of_id: dict, where: str) -> Any:
    """The exported id of `item`, a node object at its place in seq order (None if it has no id children
    could name); SessionImportError if it is not such an object or an earlier node has the same id."""
    if not isinstance(item, dict):
        raise SessionImportError(f"{where} must be an object, got {type(item).__name__}")
    seq = item.get("seq")
    if not _is_id(seq) or seq != index:
        raise SessionImportError(f"{where}.seq must be {index} (seqs are gap-free from 0), got {seq!r}")
    node_id = item.get("id")
    if not _is_id(node_id):
        return None
    if node_id in seq_of_id:
        raise SessionImportError(f"{where}.id {node_id!r} is also nodes[{seq_of_id[node_id]}]'s; "
                                 f"node ids must be unique")
    return node_id


def _parent_seq(item: dict, seq_of_id: dict, where: str) -> Optional[int]:
    parent = item.get("parent")
    if parent is None:
        return None
    if _is_id(parent) and parent in seq_of_id:
        return seq_of_id[parent]
    raise SessionImportError(f"{where}.parent {parent!r} names no earlier node's id")


def _field(item: dict, name: str, where: str) -> Any:
    """`item[name]` as it is stored; SessionImportError naming `where.name` if it is not allowed there."""
    model = Session if where == "session" else Node
    field = model._meta.get_field(name)
    check = _CHECKS.get(name) or _CHECKS_BY_TYPE[field.get_internal_type()]
    return check(item[name], f"{where}.{name}", field)


def _time(value: Any, at: str, field: Field) -> Optional[datetime]:
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value)
        # Stored in UTC: a time near the ends of the calendar may have no UTC equivalent.
        return moment.astimezone(timezone.utc) if moment.tzinfo is not None else moment
    except (TypeError, ValueError):
        raise SessionImportError(f"{at} must be an ISO 8601 time or null, got {value!r}") from None
    except OverflowError:
        raise SessionImportError(f"{at} must be a time from year 1 to 9999 in UTC, got {value!r}") from None


def _text(value: Any, at: str, field: Field) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise SessionImportError(f"{at} must be a string, got {type(value).__name__}")
    if field.max_length is not None and len(value) > field.max_length:
        raise SessionImportError(f"{at} must be at most {field.max_length} characters, got {len(value)}")
    # The recorder stores text through clean_text, so what it would change was not recorded here.
    if clean_text(value) != value:
        raise SessionImportError(f"{at} {_BAD_TEXT}")
    return value


def _count(value: Any, at: str, field: Field) -> int:
    low, high = _INTEGER_RANGES[field.get_internal_type()]
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise SessionImportError(f"{at} must be a whole number from {low} to {high}, got {_shown(value)}")
    return value


def _flag(value: Any, at: str, field: Field) -> bool:
    if not isinstance(value, bool):
        raise SessionImportError(f"{at} must be true or false, got {value!r}")
    return value


def _choice(value: Any, at: str, field: Field) -> str:
    choices = [choice for choice, _ in field.choices] if field.choices else EXPOSE_VALUES
    if value not in choices:
        raise SessionImportError(f"{at} must be one of {', '.join(choices)}, got {value!r}")
    return value


def _json(value: Any, at: str, field: Field) -> Any:
    problem = _json_problem(value)
    if problem is not None:
        inside, what = problem
        raise SessionImportError(f"{at}{inside} {what}")
    return value


def _json_problem(value: Any, depth: int = 0) -> Optional[tuple[str, str]]:
    """(where inside `value`, what is wrong) for its first part that is not JSON as the recorder stores it
    (see dag.recording.values), None if there is none. Never deeper than MAX_DEPTH, so never a RecursionError."""
    if isinstance(value, str):
        return None if clean_text(value) == value else ("", _BAD_TEXT)
    if value is None or isinstance(value, (bool, int)):
        return None
    if isinstance(value, float):
        # NaN and the infinities are not JSON (json.loads reads them anyway); jsonb refuses them.
        return None if math.isfinite(value) else ("", f"must be a finite number, got {value!r}")
    if not isinstance(value, (dict, list)):
        return "", f"must be JSON, got a {type(value).__name__}"
    if depth >= MAX_DEPTH:
        return "", f"must be nested at most {MAX_DEPTH} levels deep (as the recorder stores values)"
    for key, item in value.items() if isinstance(value, dict) else enumerate(value):
        if isinstance(value, dict) and not (isinstance(key, str) and clean_text(key) == key):
            return f"[{key!r}]", f"key {_BAD_TEXT}"
        problem = _json_problem(item, depth + 1)
        if problem is not None:
            return f"[{key!r}]{problem[0]}", problem[1]
    return None


def _args(value: Any, at: str, field: Field) -> dict:
    if not isinstance(value, dict):
        raise SessionImportError(f"{at} must be an object of argument names and values, got {type(value).__name__}")
    return _json(value, at, field)


def _launch_budget(value: Any, at: str, field: Field) -> Optional[dict]:
    try:
        return clean_budget(value)
    except BudgetProblem as problem:
        # Its messages say what is allowed; only the place is this module's to add.
        raise SessionImportError("; ".join(f"{at if name == '__all__' else f'{at}.{name}'} {' '.join(messages)}"
                                           for name, messages in problem.errors.items())) from None


def _render_range(value: Any, at: str, field: Field) -> Optional[dict]:
    try:
        check_render_range(value)
    except ValueError as exc:
        raise SessionImportError(f"{at}: {exc}") from None
    return _json(value, at, field)


def _usage(value: Any, at: str, field: Field) -> Optional[dict]:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise SessionImportError(f'{at} must be null or an object like {{"input_tokens": N, "output_tokens": N}}, '
                                 f"got {type(value).__name__}")
    # The two counts and the cost the totals add up; anything else a provider reported is kept as the JSON it is.
    for key, count in ((key, value[key]) for key in ("input_tokens", "output_tokens") if key in value):
        if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= _MAX_TOKENS:
            raise SessionImportError(f"{at}[{key!r}] must be a whole number from 0 to {_MAX_TOKENS}, "
                                     f"got {_shown(count)}")
    cost = value.get("cost_usd")
    if "cost_usd" in value and (isinstance(cost, bool) or not isinstance(cost, (int, float))
                                or not 0 <= cost <= _MAX_COST_USD):
        raise SessionImportError(f"{at}['cost_usd'] must be a number of US dollars from 0 to {_MAX_COST_USD:g} "
                                 f"(absent when unknown), got {_shown(cost)}")
    return _json(value, at, field)


def _shown(value: Any) -> str:
    """`value` for a message: a huge number by its size, not its thousands of digits."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**30:
        return f"a number of about {about_digits(value) + 1} digits"  # str() may refuse it
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:80]}…"


_Check = Callable[[Any, str, Field], Any]
_CHECKS: dict[str, _Check] = {"args": _args, "launch_budget": _launch_budget, "render_range": _render_range,
                              "usage": _usage, "status": _choice, "kind": _choice, "expose": _choice}
_CHECKS_BY_TYPE: dict[str, _Check] = {
    "DateTimeField": _time, "CharField": _text, "TextField": _text, "BooleanField": _flag,
    "PositiveIntegerField": _count, "PositiveBigIntegerField": _count, "JSONField": _json}
