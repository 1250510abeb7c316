"""The SQL of the recording hot path: advance a session's counters, insert a node, backfill a node.

Every recorded call makes two transactions of two statements each. Built through the ORM's query
compiler they cost about ten times the database work, so these statements are built once per
database vendor and only the parameters are prepared per call, still through each field's own
`get_db_prep_save` (JSON encoding, time zones, UUIDs are the ORM's, not ours).
"""
from __future__ import annotations

from contextlib import contextmanager
from functools import lru_cache
from typing import Optional

from django.db import DEFAULT_DB_ALIAS, connections, models

from .models import Node, Session

# UPDATE ... RETURNING turns "advance the counter and read it" into one statement.
RETURNING_VENDORS = frozenset({"sqlite", "postgresql"})
# Vendors whose driver cursor the hot statements use directly (see `_cursor`).
DRIVER_CURSOR_VENDORS = frozenset({"sqlite", "postgresql"})
_NODE_FIELDS = tuple(field for field in Node._meta.concrete_fields if not field.primary_key)
_SESSION_PK = Session._meta.pk
# Every Node field default is immutable (None, "", numbers), so one copy serves every new node.
_NODE_DEFAULTS = {field.attname: field.get_default() for field in Node._meta.concrete_fields}
# Text and integers reach the driver as they are; preparing them only re-checks their type.
_AS_IS = (models.CharField, models.TextField, models.IntegerField, models.BooleanField)


def _preparer(field):
    target = getattr(field, "target_field", None) if field.is_relation else field
    return None if isinstance(target, _AS_IS) else field.get_db_prep_save


_NODE_PREPARERS = tuple(_preparer(field) for field in _NODE_FIELDS)


def new_node(**fields) -> Node:
    """An unsaved Node from attribute names (`session_id`, `parent_id`, ...), defaults for the rest.

    Built positionally, the way the ORM builds rows it reads: keyword construction costs twice as much.
    """
    unknown = set(fields) - _NODE_DEFAULTS.keys()
    if unknown:
        raise TypeError(f"Node has no field(s) {', '.join(sorted(unknown))}; "
                        f"fields are: {', '.join(_NODE_DEFAULTS)}")
    values = {**_NODE_DEFAULTS, **fields}
    return Node(*values.values())


def _db():
    """The default connection itself: each attribute read through the `connection` proxy costs a
    thread-local lookup, and the hot path makes dozens of them."""
    return connections[DEFAULT_DB_ALIAS]


def _quote(name: str) -> str:
    return _db().ops.quote_name(name)


@contextmanager
def _cursor(connection):
    """A cursor for the hot statements, which are written with `%s` placeholders.

    On SQLite and PostgreSQL it is the driver's own cursor: Django's per-statement wrapper (query
    logging, execute wrappers, placeholder rewriting) costs a third of these tiny statements. Errors
    still come out as Django's, and the statements still run in Django's transaction.
    """
    if connection.vendor not in DRIVER_CURSOR_VENDORS:
        with connection.cursor() as cursor:
            yield cursor
        return
    connection.ensure_connection()
    with connection.wrap_database_errors:
        cursor = connection.connection.cursor()
        try:
            yield cursor
        finally:
            cursor.close()


def _placeholders(vendor: str, sql: str) -> str:
    """`sql` with the placeholders the cursor of `_cursor` takes on this vendor."""
    return sql.replace("%s", "?") if vendor == "sqlite" and vendor in DRIVER_CURSOR_VENDORS else sql


@lru_cache(maxsize=8)
def _advance_sql(vendor: str, returning: bool) -> tuple[str, Optional[str]]:
    table, rev, count, pk = (_quote(n) for n in (Session._meta.db_table, "rev", "node_count", "id"))
    update = f"UPDATE {table} SET {rev} = {rev} + %s, {count} = {count} + %s WHERE {pk} = %s"
    if returning:
        return _placeholders(vendor, f"{update} RETURNING {rev}, {count}"), None
    return _placeholders(vendor, update), _placeholders(vendor, f"SELECT {rev}, {count} FROM {table} WHERE {pk} = %s")


def advance(session_id, revs: int, nodes: int) -> Optional[tuple[int, int]]:
    """Add to the session's revision and node count; the new (rev, node_count), None if no session.

    Call inside a transaction: the session row stays write-locked until it ends.
    """
    connection = _db()
    key = _SESSION_PK.get_db_prep_value(_SESSION_PK.to_python(session_id), connection)
    update, select = _advance_sql(connection.vendor, connection.vendor in RETURNING_VENDORS)
    with _cursor(connection) as cursor:
        cursor.execute(update, [revs, nodes, key])
        if select is not None:
            cursor.execute(select, [key])
        row = cursor.fetchone()
    return (row[0], row[1]) if row is not None else None


@lru_cache(maxsize=8)
def _insert_sql(vendor: str, returning: bool) -> str:
    columns = ", ".join(_quote(field.column) for field in _NODE_FIELDS)
    values = ", ".join(["%s"] * len(_NODE_FIELDS))
    sql = f"INSERT INTO {_quote(Node._meta.db_table)} ({columns}) VALUES ({values})"
    return _placeholders(vendor, f"{sql} RETURNING {_quote(Node._meta.pk.column)}" if returning else sql)


def insert_node(node: Node) -> int:
    """INSERT the unsaved `node` and return its new id (the instance is marked saved)."""
    connection = _db()
    params = [getattr(node, field.attname) if prepare is None else prepare(getattr(node, field.attname), connection)
              for field, prepare in zip(_NODE_FIELDS, _NODE_PREPARERS)]
    returning = connection.features.can_return_columns_from_insert
    with _cursor(connection) as cursor:
        cursor.execute(_insert_sql(connection.vendor, returning), params)
        if returning:
            pk = cursor.fetchone()[0]
        else:
            pk = connection.ops.last_insert_id(cursor, Node._meta.db_table, Node._meta.pk.column)
    node.pk = pk
    node._state.adding = False
    node._state.db = connection.alias
    return pk


@lru_cache(maxsize=64)
def _update_sql(vendor: str, names: tuple[str, ...]) -> tuple[str, tuple]:
    fields = tuple(Node._meta.get_field(name) for name in names)
    assignments = ", ".join(f"{_quote(field.column)} = %s" for field in fields)
    sql = (f"UPDATE {_quote(Node._meta.db_table)} SET {assignments} "
           f"WHERE {_quote(Node._meta.pk.column)} = %s AND {_quote('status')} = %s")
    return _placeholders(vendor, sql), fields


def update_running_node(pk: int, values: dict) -> bool:
    """Set `values` on node `pk` if it is still running; False (nothing written) if it has ended."""
    connection = _db()
    sql, fields = _update_sql(connection.vendor, tuple(values))
    params = [value if isinstance(field, _AS_IS) else field.get_db_prep_save(value, connection)
              for field, value in zip(fields, values.values())]
    with _cursor(connection) as cursor:
        cursor.execute(sql, params + [pk, "running"])
        return cursor.rowcount > 0
