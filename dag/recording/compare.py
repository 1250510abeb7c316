"""Two runs side by side: their calls aligned by call path, and what differs between each aligned pair.

A call's place is its call path (the names of the calls from the entry call down to it, a model call
named `llm`) and how many calls before it had that same path: the third `report/average/llm` of one run
is aligned with the third of the other. A call only one run made is a row with one side empty.
"""
from __future__ import annotations

from typing import Optional

from runtime.prices import COST_KEY

from ..models import Node, Session
from .values import preview

# What a pair of aligned calls is compared on, each with the node record's value it reads.
COMPARED = {
    "arguments": lambda node: node["input"] if node["kind"] == Node.Kind.CODE else None,
    "output": lambda node: node["output"],
    "status": lambda node: node["status"],
    "tokens": lambda node: _tokens(node["usage"]),
    "cost": lambda node: (node["usage"] or {}).get(COST_KEY),
    "duration": lambda node: node["duration_ms"],
}
TIMING = {"duration"}  # differs between any two runs: not what makes two runs differ
MODEL_CALL = "llm"
SEPARATOR = "/"


def _tokens(usage: Optional[dict]) -> Optional[int]:
    return (usage.get("input_tokens", 0) + usage.get("output_tokens", 0)) if usage else None


def keyed_nodes(nodes: list[dict]) -> list[tuple[tuple[str, int], dict]]:
    """`nodes` (records in seq order) each with its place: (call path, occurrence of that path)."""
    names = {node["id"]: node["name"] if node["kind"] == Node.Kind.CODE else MODEL_CALL for node in nodes}
    parents = {node["id"]: node["parent"] for node in nodes}
    seen: dict[str, int] = {}
    keyed = []
    for node in nodes:
        parts, current = [], node["id"]
        while current is not None and current in names:
            parts.append(names[current])
            current = parents[current]
        path = SEPARATOR.join(reversed(parts))
        occurrence = seen.get(path, 0)
        seen[path] = occurrence + 1
        keyed.append(((path, occurrence), node))
    return keyed


def aligned(a_nodes: list[dict], b_nodes: list[dict]) -> list[tuple[tuple[str, int], Optional[dict], Optional[dict]]]:
    """(place, a's node, b's node) rows in a's call order, each call only b made placed after the row of
    the last call both made before it."""
    b_keyed = keyed_nodes(b_nodes)
    b_by_key = dict(b_keyed)
    in_a = keyed_nodes(a_nodes)
    a_keys = {key for key, _ in in_a}
    only_b: dict = {}  # by the place of the last call both made before them (None: before any)
    last_common = None
    for key, node in b_keyed:
        if key in a_keys:
            last_common = key
        else:
            only_b.setdefault(last_common, []).append((key, None, node))
    rows = list(only_b.get(None, ()))
    for key, node in in_a:
        rows.append((key, node, b_by_key.get(key)))
        rows.extend(only_b.get(key, ()))
    return rows


def differences(a: Optional[dict], b: Optional[dict]) -> list[str]:
    """What differs between two aligned calls (COMPARED's names); ["missing"] when one side has none."""
    if a is None or b is None:
        return ["missing"]
    return [name for name, value in COMPARED.items() if value(a) != value(b)]


def _side(node: Optional[dict]) -> Optional[dict]:
    if node is None:
        return None
    return {"id": node["id"], "seq": node["seq"], "kind": node["kind"], "name": node["name"],
            **{name: value(node) for name, value in COMPARED.items()},
            "replayed": node.get("replayed", False), "error": node["error"]}


def compare_sessions(a: Session, b: Session) -> dict:
    """{"a": session a's record, "b": b's, "rows": [{"path", "occurrence", "a", "b", "differences"}],
    "different": how many rows differ in more than their
    duration}: the JSON the compare page and API answer."""
    rows = []
    for (path, occurrence), node_a, node_b in aligned(_records(a), _records(b)):
        rows.append({"path": path, "occurrence": occurrence, "a": _side(node_a), "b": _side(node_b),
                     "differences": differences(node_a, node_b)})
    return {"a": a.as_dict(), "b": b.as_dict(), "rows": rows,
            "different": sum(1 for row in rows if set(row["differences"]) - TIMING)}


def _records(session: Session) -> list[dict]:
    return [node.as_dict() for node in Node.objects.filter(session=session).order_by("seq")]


def shown(value, limit: int = 120) -> str:
    """A compared value as one short line of text for the page ("" for none)."""
    return "" if value is None else preview(value, limit)
