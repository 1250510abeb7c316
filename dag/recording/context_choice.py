"""The nodes one model call's context shows, newest first, read only as far as its `render_range` reaches.

Each slice (`subcalls` inside the frame, then `callers` before it) is walked backwards by `seq` a chunk
at a time, keeping the nodes the viewer may see, until the slice has its N nodes or its range ends. A
bounded range therefore reads about N rows whatever the session's length (plus the nodes of parallel
branches written since the frame started, and the functions wrapping what it reads, each read once).
The reader stops the walk when its text is full; what the slices would still have chosen is then
counted by the source (`chosen_count`: in the database, for stored nodes), not read.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator, Optional

from .context_shapes import NodeSource
from .context_visibility import Viewpoint

BEFORE, INSIDE = "before", "inside"
# An upper bound on `seq` for counting a slice the walk has not started (it is always started first).
_NEWEST = 2 ** 62


@dataclass
class _Slice:
    name: str
    limit: float  # how many nodes it chooses (math.inf: all)
    above: Optional[int]  # the walk covers above < seq < below (None: unbounded) ...
    below: Optional[int]  # ... and moves `below` down as it reads
    taken: int = 0
    done: bool = False  # it has its `limit` nodes, or nothing is left to read
    last_read: int = 0

    def read_size(self, chunk: int) -> int:
        """A chunk; less when the slice needs fewer nodes, growing while what it reads is hidden."""
        if self.limit == math.inf:
            return chunk
        self.last_read = min(chunk, max(int(self.limit - self.taken), 2 * self.last_read))
        return self.last_read


class ContextChoice:
    """The walk for the viewer `view`; `newest_first` yields what it chooses."""

    def __init__(self, view: Viewpoint, limits: dict, chunk: int):
        self.view, self.chunk = view, chunk
        self.inside = _Slice(INSIDE, _count(limits["subcalls"], unlimited=-1), above=view.frame_seq, below=None)
        self.before = _Slice(BEFORE, _count(limits["callers"], unlimited=None), above=None, below=view.frame_seq)

    @classmethod
    def of(cls, shapes: NodeSource, node_id: int, seq: Optional[int], limits: dict,
           chunk: int) -> Optional["ContextChoice"]:
        """The walk over `shapes` for a model call in the frame `node_id` that started at `seq` (None: the
        node's own), or None if there is no such node in the session."""
        chain = shapes.chain(node_id)
        if not chain:
            return None
        frame_seq = chain[0]["seq"] if seq is None else seq
        return cls(Viewpoint(shapes, chain, frame_seq), limits, chunk)

    def newest_first(self) -> Iterator[list[tuple[str, dict]]]:
        """Lists of (slice name, shape row) of the chosen nodes, newest first across both slices."""
        shapes, view = self.view.shapes, self.view
        for part in (self.inside, self.before):
            part.done = part.done or part.limit == 0
            while not part.done:
                size = part.read_size(self.chunk)
                rows = shapes.latest(above=part.above, below=part.below, count=size)
                part.done = len(rows) < size
                shapes.read_wrappers(rows)
                chosen = []
                for row in rows:
                    part.below = row["seq"]
                    if row["id"] == view.viewer["id"] or (part is self.inside and not view.in_frame(row)):
                        continue
                    if view.visible(row):
                        chosen.append((part.name, row))
                        part.taken += 1
                        if part.taken >= part.limit:
                            part.done = True
                            break
                if chosen:
                    yield chosen

    def chosen_count(self) -> int:
        """How many nodes the range chooses: those yielded so far, plus those the walk did not reach
        (counted by the source)."""
        total = self.before.taken + self.inside.taken
        before_left, inside_left = (not part.done and part.limit != 0 for part in (self.before, self.inside))
        if not (before_left or inside_left):
            return total
        inside_below = _NEWEST if self.inside.below is None else self.inside.below
        before, inside = self.view.shapes.count_visible(
            self.view, before_below=self.before.below if before_left else None,
            inside_below=inside_below if inside_left else None)
        for part, left, more in ((self.before, before_left, before), (self.inside, inside_left, inside)):
            if left:
                total += min(part.limit - part.taken, more)
        return int(total)


def _count(value: Optional[int], *, unlimited) -> float:
    """A `render_range` count as a limit: math.inf for the slice's "all" value, 0 for None otherwise."""
    return math.inf if value == unlimited else (value or 0)
