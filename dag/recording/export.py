"""A session's whole DAG as one JSON document, and back: for download, archiving and moving runs.

The export is the same `as_dict()` shapes the API and the websocket stream use, nodes in `seq` order.
Importing creates a new session (new ids) for `owner`; node parents are matched by `seq`, so an
export of the import equals the original apart from ids.
"""
from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Optional

from ..models import Node, Session
from . import write_path

EXPORT_VERSION = 1
# Session fields an import restores; id, owner and node_count are the new session's own.
_SESSION_FIELDS = ("function", "args", "status", "result", "error", "cancel_requested", "budget",
                   "budget_spend", "launch_budget", "model", "rev", "created_at", "started_at", "finished_at")
_NODE_FIELDS = ("kind", "name", "status", "depth", "name_depth", "expose", "render_range", "doc", "input",
                "output", "error", "refusal", "model", "usage", "rev", "started_at", "finished_at")
_TIMES = frozenset({"created_at", "started_at", "finished_at"})
_TEXTS = frozenset({"function", "name", "expose", "doc", "error", "refusal", "model"})
_COUNTS = frozenset({"depth", "name_depth", "rev"})


def export_session(session: Session) -> dict:
    """{"version", "session": session.as_dict(), "nodes": [node.as_dict(), ...] in seq order}."""
    nodes = Node.objects.filter(session=session).order_by("seq")
    return {"version": EXPORT_VERSION, "session": session.as_dict(),
            "nodes": [node.as_dict() for node in nodes.iterator(chunk_size=500)]}


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
        if not isinstance(item, dict):
            raise SessionImportError(f"{where} must be an object, got {type(item).__name__}")
        if item.get("seq") != index:
            raise SessionImportError(f"{where}.seq must be {index} (seqs are gap-free from 0), "
                                     f"got {item.get('seq')!r}")
        node_fields.append({name: _field(item, name, where) for name in _NODE_FIELDS if name in item})
        parent_seqs.append(_parent_seq(item, seq_of_id, where))
        if isinstance(item.get("id"), (int, str)):
            seq_of_id[item["id"]] = index
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


def _parent_seq(item: dict, seq_of_id: dict, where: str) -> Optional[int]:
    parent = item.get("parent")
    if parent is None:
        return None
    if isinstance(parent, (int, str)) and parent in seq_of_id:
        return seq_of_id[parent]
    raise SessionImportError(f"{where}.parent {parent!r} names no earlier node's id")


def _field(item: dict, name: str, where: str) -> Any:
    value = item[name]
    if name in _TIMES and value is not None:
        try:
            return datetime.fromisoformat(value)
        except (TypeError, ValueError):
            raise SessionImportError(f"{where}.{name} must be an ISO 8601 time or null, got {value!r}") from None
    if name in _TEXTS:
        if value is None:
            return ""
        if not isinstance(value, str):
            raise SessionImportError(f"{where}.{name} must be a string, got {type(value).__name__}")
        limit = (Session if where == "session" else Node)._meta.get_field(name).max_length
        if limit is not None and len(value) > limit:
            raise SessionImportError(f"{where}.{name} must be at most {limit} characters, got {len(value)}")
    if name in _COUNTS and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise SessionImportError(f"{where}.{name} must be a whole number >= 0, got {value!r}")
    if name == "cancel_requested" and not isinstance(value, bool):
        raise SessionImportError(f"{where}.{name} must be true or false, got {value!r}")
    if name in ("status", "kind"):
        model = Session if where == "session" else Node
        choices = (model.Status if name == "status" else Node.Kind).values
        if value not in choices:
            raise SessionImportError(f"{where}.{name} must be one of {', '.join(choices)}, got {value!r}")
    return value
