"""The shape of a session's nodes (id, seq, parent, kind, expose), read on demand for choosing a context.

Choosing what a model call sees needs the shape of the nodes it may show and of the functions wrapping
them, never the whole session: `SessionShapes` reads the viewer's call chain in one query, the latest
nodes of a `seq` range a chunk at a time (the `(session, seq)` unique index), and the wrappers of the
nodes read so far by id (the `parent` index), and keeps every row it read, so a wrapper shared by many
nodes is read once.
"""
from __future__ import annotations

from typing import Callable, Iterable, Optional

from django.db import connections, router

from ..models import Node

SHAPE = ("id", "seq", "parent_id", "kind", "expose")
# In the parameters of `SessionShapes.query`: this session's id, as the node table holds it.
SESSION = object()


class SessionShapes:
    """The shape rows of one session read so far, by node id; and raw SQL over its nodes."""

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
