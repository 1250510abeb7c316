"""Which nodes a viewer may see (by `expose`) and which are inside its frame: on rows read, and counted in SQL.

The rule (the module docstring of `context_render` states it for readers): the viewer's call chain is
visible; any other code node needs its own expose to be `io` or `full`; and every function wrapping a
node, up to where its branch meets the chain, must be `full`, except that the innermost wrapper of a
model exchange may also be `llm`. A node is inside the frame if it descends from the viewer through
nodes all written after the frame started.

`Viewpoint` applies the rule to rows already read (their wrappers must have been read too), remembering
each wrapper's answer. The nodes a context leaves out are counted by its source (`count_visible`): in
memory with this rule, or in one SQL query that states it again (`context_shapes`).
"""
from __future__ import annotations

from ..models import Node
from .context_shapes import NodeSource

_SHOWN_ALONE = ("io", "full")  # the expose values under which a function's own call is shown


class Viewpoint:
    """Visibility and frame membership for one viewer, over the rows of `shapes`."""

    def __init__(self, shapes: NodeSource, chain: list[dict], frame_seq: int):
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
