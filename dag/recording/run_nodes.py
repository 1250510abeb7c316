"""`RunNodes`: a run's own nodes, kept in its memory, so that its model calls choose their context without a read.

A session has one run, and while it runs nothing else adds or changes its nodes (a person's answers
change session fields; the run writes its nodes itself, `write_path.steering`). So the recorder keeps
what it writes: each node's shape and the fields a context renders, numbered in the order the nodes
were queued, which is the order in which the writer gives them their `seq`. A model call's context is
then chosen here (`context_render.render_context_of`): no flush to wait for, no connection borrowed,
no statement for the database to serve, however many model calls a run makes.

Of a model request it keeps only what a context renders (`context_render.new_messages`), not the
conversation that each request repeats; of an ended call, its text once rendered (`HeldNodes.rendered`),
so a run of many model calls renders each call once, not once per model call. Past MOST_NODES nodes
it gives its memory up, and the run's contexts are read from the database (the walk of
`context_choice` reads about what it shows), so a long run's memory stays bounded.

A run that starts on a session with nodes already (or not known to have none) reads them once, at its
first context, after its own queued writes have committed.
"""
from __future__ import annotations

import threading
from typing import Callable, Iterable, Optional

from ..models import Node
from .context_render import new_messages
from .context_shapes import SHAPE, TEXT

# The nodes a run keeps in memory (each about a kilobyte, with its values): past them its contexts
# are read from the database.
MOST_NODES = 2_000
_FIELDS = tuple(dict.fromkeys(SHAPE + TEXT))
# What a node's later writes may change of what is kept (its request never changes).
_CHANGING = frozenset(_FIELDS) - {"id", "seq", "input"}


class RunNodes:
    """The nodes of one session as its run wrote them; `held()` is the source a context is chosen from.

    `complete`: the session had no nodes before this run (a claim read its count), so the run's own are
    all of them; otherwise they are read at the first context (`read_stored`).
    """

    def __init__(self, *, complete: bool):
        self._held: Optional[HeldNodes] = HeldNodes() if complete else None  # None: not read yet, or given up
        self._given_up = False
        # Held while a node is queued and numbered, so that its number here is its `seq` there.
        self._numbering = threading.Lock()

    def held(self) -> Optional["HeldNodes"]:
        """The nodes held, to choose a context from; None if they are not all held (not read yet, or given up)."""
        return self._held

    @property
    def given_up(self) -> bool:
        """Did the run outgrow MOST_NODES (its contexts are read from the database from then on)?"""
        return self._given_up

    def record(self, write: Callable[..., Node], **fields) -> Node:
        """`write(**fields)` (a node's creation, queued or made), the node kept here as the next `seq`."""
        with self._numbering:
            node = write(**fields)
            held = self._held
            if held is not None:  # else the first read brings it
                # The node as the write made it, its defaults filled; read before anything else may end it.
                values = node.__dict__
                row = {name: values[name] for name in _FIELDS}
                row["seq"] = len(held.rows)
                self._keep(held, row)
            return node

    def amend(self, node_id: int, fields: dict) -> None:
        """A node's later fields (its end, its approval). One row replaces the other, so a context chosen
        meanwhile sees the node before or after, never half of each."""
        held = self._held
        row = held.by_id.get(node_id) if held is not None else None
        if row is not None:
            held.rendered.pop(node_id, None)  # an ended call changes no more; kept should one still change
            held.by_id[node_id] = held.rows[row["seq"]] = {
                **row, **{name: value for name, value in fields.items() if name in _CHANGING}}

    def read_stored(self, read: Callable[[int], Iterable[dict]]) -> None:
        """Hold the session's nodes as stored: `read(most)` gives up to `most` rows of `_FIELDS` by `seq`
        (the caller has flushed the run's writes). Past MOST_NODES, give up instead."""
        with self._numbering:
            if self._held is not None or self._given_up:
                return
            rows = list(read(MOST_NODES + 1))
            if len(rows) > MOST_NODES or any(row["seq"] != seq for seq, row in enumerate(rows)):
                self._give_up()
                return
            held = HeldNodes()
            for row in rows:
                self._keep(held, row)
            self._held = held

    def _keep(self, held: "HeldNodes", row: dict) -> None:
        if len(held.rows) >= MOST_NODES:
            self._give_up()
            return
        row = _lean(row)
        held.rows.append(row)
        held.by_id[row["id"]] = row

    def _give_up(self) -> None:
        # A context being chosen keeps what it holds; the rest is garbage once it is done.
        self._held, self._given_up = None, True


class HeldNodes:
    """A run's nodes in memory, by `seq` and by id, as a `context_shapes.NodeSource` reads them. `RunNodes`
    adds to them while a context is chosen: a node written meanwhile may be seen, as a row committed
    meanwhile would be by a read."""

    def __init__(self):
        self.rows: list[dict] = []
        self.by_id: dict[int, dict] = {}
        self.rendered: dict[int, str] = {}

    def get(self, node_id: int) -> Optional[dict]:
        return self.by_id.get(node_id)

    def chain(self, node_id: int) -> list[dict]:
        chain, current = {}, self.by_id.get(node_id)
        while current is not None and current["id"] not in chain:
            chain[current["id"]] = current
            current = self.by_id.get(current["parent_id"])
        return list(chain.values())

    def latest(self, *, above: Optional[int], below: Optional[int], count: int) -> list[dict]:
        rows = self.rows
        end = len(rows) if below is None else max(0, min(below, len(rows)))
        start = max(0 if above is None else above + 1, end - count)
        return rows[start:end][::-1]

    def read_wrappers(self, rows: Iterable[dict]) -> None:
        """Every wrapper is held already."""

    def texts(self, ids: list[int]) -> dict[int, dict]:
        return {node_id: self.by_id[node_id] for node_id in ids if node_id in self.by_id}

    def count_visible(self, view, *, before_below: Optional[int], inside_below: Optional[int]) -> tuple[int, int]:
        """Counted over the rows held, by the viewpoint's own rule (`context_visibility`)."""
        before = inside = 0
        if before_below is not None:
            before = sum(1 for row in self.rows[:max(0, min(before_below, view.frame_seq))]
                         if row["id"] != view.viewer["id"] and view.visible(row))
        if inside_below is not None:
            inside = sum(1 for row in self.rows[view.frame_seq + 1:max(0, inside_below)]
                         if view.in_frame(row) and view.visible(row))
        return before, inside


def stored_nodes(session_id, most: int) -> list[dict]:
    """The first `most` nodes of a session as stored, by `seq`: what `RunNodes.read_stored` reads."""
    return list(Node.objects.filter(session_id=session_id).order_by("seq").values(*_FIELDS)[:most])


def _lean(row: dict) -> dict:
    """`row` with a model request cut to what a context renders of it."""
    if row["kind"] == Node.Kind.LLM and isinstance(row["input"], dict):
        row = {**row, "input": {"messages": new_messages(row["input"])}}
    return row
