"""Which nodes a viewer may see (by `expose`) and which are inside its frame: on rows read, and counted in SQL.

The rule (the module docstring of `context_render` states it for readers): the viewer's call chain is
visible; any other code node needs its own expose to be `io` or `full`; and every function wrapping a
node, up to where its branch meets the chain, must be `full`, except that the innermost wrapper of a
model exchange may also be `llm`. A node is inside the frame if it descends from the viewer through
nodes all written after the frame started.

`Viewpoint` applies the rule to rows already read (their wrappers must have been read too), remembering
each wrapper's answer. `count_visible` applies the same rule in one recursive SQL query, for the nodes
a context leaves out: they are counted, never read. It relies on a node being written after its parent
(the write path's order) to stop its walk at the newest `seq` it counts.
"""
from __future__ import annotations

from typing import Optional

from ..models import Node
from .context_shapes import SESSION, SessionShapes

_SHOWN_ALONE = ("io", "full")  # the expose values under which a function's own call is shown


class Viewpoint:
    """Visibility and frame membership for one viewer, over the rows of `shapes`."""

    def __init__(self, shapes: SessionShapes, chain: list[dict], frame_seq: int):
        self.shapes = shapes
        self.viewer = chain[0]
        self.chain = {row["id"] for row in chain}
        self.frame_seq = frame_seq
        self._clear_above: dict[int, bool] = {}
        self._in_frame: dict[int, bool] = {}

    def visible(self, node: dict) -> bool:
        if node["kind"] == Node.Kind.CODE and node["id"] not in self.chain and node["expose"] not in _SHOWN_ALONE:
            return False
        parent_id = node["parent_id"]
        if parent_id is None or parent_id in self.chain:
            return True
        wrapper = self.shapes.get(parent_id)
        if wrapper is None:
            return False
        own_exchange = node["kind"] == Node.Kind.LLM and wrapper["expose"] == "llm"
        return (own_exchange or wrapper["expose"] == "full") and self._is_clear_above(wrapper)

    def in_frame(self, node: dict) -> bool:
        """Is `node` inside the viewer's frame (the viewer itself is not)?"""
        return self._walk_up(node, self._in_frame, self._frame_step)

    def _is_clear_above(self, wrapper: dict) -> bool:
        """Is every function above `wrapper`, up to the chain, `full`?"""
        return self._walk_up(wrapper, self._clear_above, self._clear_step)

    def _clear_step(self, node: dict):
        parent_id = node["parent_id"]
        if parent_id is None or parent_id in self.chain:
            return True
        parent = self.shapes.get(parent_id)
        return parent if parent is not None and parent["expose"] == "full" else False

    def _frame_step(self, node: dict):
        if node["seq"] <= self.frame_seq or node["id"] == self.viewer["id"]:
            return False
        if node["parent_id"] == self.viewer["id"]:
            return True
        parent = self.shapes.get(node["parent_id"]) if node["parent_id"] is not None else None
        return parent if parent is not None else False

    @staticmethod
    def _walk_up(node: dict, memo: dict, step) -> bool:
        """Follow `step` (a node's answer: True, False, or "ask my parent", the parent row) upwards
        until an answer, and remember it for every node on the way: they all share it."""
        path = []
        while node["id"] not in memo:
            path.append(node["id"])
            answer = step(node)
            if answer is True or answer is False:
                break
            node = answer
        else:
            answer = memo[node["id"]]
        for node_id in path:
            memo[node_id] = answer
        return answer


def count_visible(view: Viewpoint, *, before_below: Optional[int], inside_below: Optional[int]) -> tuple[int, int]:
    """(visible nodes before the frame with `seq < before_below`, visible nodes inside the frame with
    `seq < inside_below`), each 0 when its bound is None; counted in the database, no row read.

    Nodes hanging off the chain are counted by a plain filter over the `(session, seq)` index; only
    below the functions among them that pass something down (`full`, `llm`) does a recursive walk
    follow `parent`, with `open_above` saying every function above a row, up to the chain, is `full`.
    The walk joins children by `parent` alone (a child is in its parent's session), so the planner
    takes the `parent` index: with the session in the join, SQLite scans the session for every row.
    """
    before_below = -1 if before_below is None else min(before_below, view.frame_seq)
    inside_below = -1 if inside_below is None else inside_below
    newest = max(before_below, inside_below)
    if newest < 0:
        return 0, 0
    chain = sorted(view.chain)
    viewer_id, frame_seq = view.viewer["id"], view.frame_seq
    marks = ", ".join(["%s"] * len(chain))

    def sql(table, column):
        id_, seq, parent, kind, expose = (column(name) for name in ("id", "seq", "parent_id", "kind", "expose"))
        hanging = (f"{column('session_id')} = %s AND ({parent} IN ({marks}) OR {parent} IS NULL) "
                   f"AND {id_} NOT IN ({marks}) AND {seq} < %s")
        return (
            f"WITH RECURSIVE reached(id, seq, kind, expose, open_above, in_frame, below) AS ("
            f"SELECT {id_}, {seq}, {kind}, {expose}, 1, "
            f"CASE WHEN {parent} = %s AND {seq} > %s THEN 1 ELSE 0 END, 0 FROM {table} "
            f"WHERE {hanging} AND {expose} IN ('full', 'llm') "
            f"UNION ALL SELECT c.{id_}, c.{seq}, c.{kind}, c.{expose}, "
            f"CASE WHEN r.expose = 'full' THEN 1 ELSE 0 END, "
            f"CASE WHEN r.in_frame = 1 AND c.{seq} > %s THEN 1 ELSE 0 END, 1 "
            f"FROM {table} c JOIN reached r ON c.{parent} = r.id "
            f"WHERE c.{seq} < %s AND r.open_above = 1 "
            f"AND (r.expose = 'full' OR (r.expose = 'llm' AND c.{kind} = 'llm'))), "
            f"counted(seq, in_frame) AS ("
            f"SELECT {seq}, CASE WHEN {parent} = %s AND {seq} > %s THEN 1 ELSE 0 END FROM {table} "
            f"WHERE {hanging} AND ({kind} <> 'code' OR {expose} IN ('io', 'full')) "
            f"UNION ALL SELECT seq, in_frame FROM reached "
            f"WHERE below = 1 AND (kind <> 'code' OR expose IN ('io', 'full'))) "
            f"SELECT COALESCE(SUM(CASE WHEN seq < %s THEN 1 ELSE 0 END), 0), "
            f"COALESCE(SUM(CASE WHEN in_frame = 1 AND seq < %s THEN 1 ELSE 0 END), 0) FROM counted")

    hanging = [SESSION, *chain, *chain, newest]
    params = [viewer_id, frame_seq, *hanging, frame_seq, newest, viewer_id, frame_seq, *hanging,
              before_below, inside_below]
    [(before, inside)] = view.shapes.query(sql, params)
    # The chain's rows are read already (and the viewer is never shown).
    chain_rows = (view.shapes.get(node_id) for node_id in chain if node_id != viewer_id)
    before += sum(1 for row in chain_rows if row["seq"] < before_below and view.visible(row))
    return int(before), int(inside)
