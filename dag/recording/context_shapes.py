"""Where a context's nodes come from (`NodeSource`), and the stored one: a session's rows, read on demand.

Choosing what a model call sees needs the shape of the nodes it may show and of the functions wrapping
them (id, seq, parent, kind, expose), then the text of those it shows, never the whole session.
`SessionShapes` reads the viewer's call chain in one query, the latest nodes of a `seq` range a chunk at
a time (the `(session, seq)` unique index), and the wrappers of the nodes read so far by id (the
`parent` index), and keeps every row it read, so a wrapper shared by many nodes is read once. What a
context leaves out it counts in one SQL query (`count_visible`). A run's own nodes, kept in its memory,
are the other source (`run_nodes.RunNodes`).
"""
from __future__ import annotations

from typing import Callable, Iterable, Optional, Protocol

from django.db import connections, router

from ..models import Node

SHAPE = ("id", "seq", "parent_id", "kind", "expose")
# What rendering a node reads besides its shape.
TEXT = ("id", "name", "status", "doc", "input", "output", "error", "model")
# In the parameters of `SessionShapes.query`: this session's id, as the node table holds it.
SESSION = object()


class NodeSource(Protocol):
    """The nodes of one session as a context choice reads them: shape rows (`SHAPE`) and text rows (`TEXT`)."""

    # The rendered texts of ended calls, by id, that the source keeps from one context to the next
    # (None: it keeps none).
    rendered: Optional[dict[int, str]]

    def get(self, node_id: int) -> Optional[dict]:
        """The shape of a node read (or held) so far, else None."""

    def chain(self, node_id: int) -> list[dict]:
        """The node `node_id` and its callers up to the entry call, innermost first; empty if no such node."""

    def latest(self, *, above: Optional[int], below: Optional[int], count: int) -> list[dict]:
        """Up to `count` nodes with `above < seq < below` (None: unbounded), newest first."""

    def read_wrappers(self, rows: Iterable[dict]) -> None:
        """Make every function wrapping `rows` known to `get`."""

    def texts(self, ids: list[int]) -> dict[int, dict]:
        """The text rows of the nodes `ids`, by id (a node gone meanwhile is missing)."""

    def count_visible(self, view, *, before_below: Optional[int], inside_below: Optional[int]) -> tuple[int, int]:
        """(nodes the viewpoint `view` sees before its frame with `seq < before_below`, nodes inside its
        frame with `seq < inside_below`), each 0 when its bound is None."""


class SessionShapes:
    """The shape rows of one session read so far, by node id; and raw SQL over its nodes."""

    rendered = None  # each context reads anew

    def __init__(self, session_id):
        self.session_id = session_id
        self._rows: dict[int, dict] = {}
        self._absent: set[int] = set()  # ids asked for that are not nodes of this session

    def get(self, node_id: int) -> Optional[dict]:
        return self._rows.get(node_id)

    def chain(self, node_id: int) -> list[dict]:
        """The node `node_id` and its callers up to the entry call, innermost first (empty if `node_id`
        is not a node of this session), in one recursive query over `parent`."""
        shape = ", ".join(SHAPE)

        def sql(table, column):
            columns = ", ".join(column(name) for name in SHAPE)
            joined = ", ".join(f"n.{column(name)}" for name in SHAPE)
            return (f"WITH RECURSIVE up({shape}) AS ("
                    f"SELECT {columns} FROM {table} WHERE {column('id')} = %s AND {column('session_id')} = %s "
                    f"UNION SELECT {joined} FROM {table} n JOIN up ON n.{column('id')} = up.parent_id "
                    f"WHERE n.{column('session_id')} = %s) SELECT {shape} FROM up")

        found = {row[0]: dict(zip(SHAPE, row)) for row in self.query(sql, [node_id, SESSION, SESSION])}
        self._rows.update(found)
        chain, current = {}, found.get(node_id)
        while current is not None and current["id"] not in chain:
            chain[current["id"]] = current
            current = found.get(current["parent_id"])
        return list(chain.values())

    def latest(self, *, above: Optional[int], below: Optional[int], count: int) -> list[dict]:
        """Up to `count` nodes with `above < seq < below` (None: unbounded), newest first."""
        if below is not None and below <= 0:
            return []  # a session's seqs start at 0: nothing comes before its entry call, no query needed
        rows = Node.objects.filter(session_id=self.session_id)
        if above is not None:
            rows = rows.filter(seq__gt=above)
        if below is not None:
            rows = rows.filter(seq__lt=below)
        found = list(rows.order_by("-seq").values(*SHAPE)[:count])
        self._rows.update((row["id"], row) for row in found)
        return found

    def read_wrappers(self, rows: Iterable[dict]) -> None:
        """Read every function wrapping `rows` not read yet, one query per level of nesting."""
        wanted = self._unread_parents(rows)
        while wanted:
            found = list(Node.objects.filter(session_id=self.session_id, id__in=wanted).values(*SHAPE))
            self._rows.update((row["id"], row) for row in found)
            self._absent.update(wanted - {row["id"] for row in found})
            wanted = self._unread_parents(found)

    def _unread_parents(self, rows: Iterable[dict]) -> set[int]:
        return {row["parent_id"] for row in rows if row["parent_id"] is not None
                and row["parent_id"] not in self._rows and row["parent_id"] not in self._absent}

    def texts(self, ids: list[int]) -> dict[int, dict]:
        return {row["id"]: row for row in Node.objects.filter(id__in=ids).values(*TEXT)}

    def count_visible(self, view, *, before_below: Optional[int], inside_below: Optional[int]) -> tuple[int, int]:
        """Counted in the database, no row read: the rule of `context_visibility`, stated again in SQL.

        Nodes hanging off the chain are counted by a plain filter over the `(session, seq)` index; only
        below the functions among them that pass something down (`full`, `llm`) does a recursive walk
        follow `parent`, with `open_above` saying every function above a row, up to the chain, is `full`.
        The walk joins children by `parent` alone (a child is in its parent's session), so the planner
        takes the `parent` index: with the session in the join, SQLite scans the session for every row.
        It relies on a node being written after its parent (the write path's order) to stop at the
        newest `seq` it counts.
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
        [(before, inside)] = self.query(sql, params)
        # The chain's rows are read already (and the viewer is never shown).
        chain_rows = (self.get(node_id) for node_id in chain if node_id != viewer_id)
        before += sum(1 for row in chain_rows if row["seq"] < before_below and view.visible(row))
        return int(before), int(inside)

    def query(self, sql: Callable[[str, Callable[[str], str]], str], params: list) -> list[tuple]:
        """The rows of raw SQL over the node table: `sql(table, column)` builds it from the quoted table
        name and a column quoter (so no SQL here spells the table out); SESSION in `params` stands
        for this session's id."""
        connection = connections[router.db_for_read(Node)]
        quote = connection.ops.quote_name
        session = Node._meta.get_field("session").get_db_prep_value(self.session_id, connection)

        def column(name: str) -> str:
            return quote(Node._meta.get_field(name.removesuffix("_id")).column)

        with connection.cursor() as cursor:
            cursor.execute(sql(quote(Node._meta.db_table), column),
                           [session if param is SESSION else param for param in params])
            return cursor.fetchall()
