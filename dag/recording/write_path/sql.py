"""The SQL of the recording hot path: advance a session's counters, insert a node, backfill a node.

Every recorded call makes two transactions of two statements each. Built through the ORM's query
compiler they cost several times the database work, so these statements are built once per database
vendor and only the parameters are prepared per call, still through each field's own
`get_db_prep_save` where it does something (JSON encoding, time zones, UUIDs are the ORM's, not ours).
Each function runs in a `dag.recording.write_path.write_transaction.WriteTransaction`.
"""
from __future__ import annotations

import sqlite3
from functools import lru_cache, partial
from operator import attrgetter, itemgetter
from typing import Optional

from django.db import DEFAULT_DB_ALIAS, connections, models
from django.db.models import signals
from django.db.models.base import ModelState

from ... import timestamps
from ...models import Node, Session
from .. import json_text
from .write_transaction import WriteTransaction, placeholders

# UPDATE ... RETURNING turns "advance the counter and read it" into one statement.
RETURNING_VENDORS = frozenset({"sqlite", "postgresql"})
_NODE_FIELDS = tuple(field for field in Node._meta.concrete_fields if not field.primary_key)
_SESSION_PK = Session._meta.pk
# Every Node field default is immutable (None, "", numbers), so one copy serves every new node.
_NODE_DEFAULTS = {field.attname: field.get_default() for field in Node._meta.concrete_fields}
# Text and integers reach the driver as they are; preparing them only re-checks their type.
_AS_IS = (models.CharField, models.TextField, models.IntegerField, models.BooleanField)


def _preparer(field):
    """How one field's value becomes what the driver takes: None for as it is; for datetimes and JSON the
    backend's own adapter called directly (`get_db_prep_save` reaches the same call through four layers
    of checks for expressions and naive datetimes, which cost most of a batch's CPU and never apply to a
    recorded node's values); every other field through `get_db_prep_save`."""
    target = getattr(field, "target_field", None) if field.is_relation else field
    if isinstance(target, _AS_IS):
        return None
    if isinstance(field, models.DateTimeField):
        return _adapt_datetime
    if isinstance(field, models.JSONField):
        return partial(_adapt_json, field.encoder)
    return field.get_db_prep_save


def _adapt_datetime(value, connection):
    if connection.vendor == "sqlite" and value.tzinfo is not None:
        # What Django's SQLite adapter makes of an aware datetime (naive in the connection's zone, as
        # text), without its layers of checks: two timestamps of every node go through here. With
        # USE_TZ off the zone is None, and Django's own adapter says why an aware value is refused.
        zone = connection.timezone
        if zone is timestamps.UTC and value.tzinfo is timestamps.UTC:
            return timestamps.sqlite_utc(value)  # no conversion to make: only the text, made cheaply
        if zone is not None:
            return str(value.astimezone(zone).replace(tzinfo=None))
    return connection.ops.adapt_datetimefield_value(value)


def _adapt_json(encoder, value, connection):
    if encoder is None and connection.vendor == "sqlite":
        return json_text.dumps(value)  # what SQLite's adapter (json.dumps) writes, with a prebuilt encoder
    return connection.ops.adapt_json_value(value, encoder)


_NODE_PREPARERS = tuple(_preparer(field) for field in _NODE_FIELDS)
_SESSION_AT = next(index for index, field in enumerate(_NODE_FIELDS) if field.name == "session")
# A node's field values in `_NODE_FIELDS` order, read in one call.
_node_values = attrgetter(*(field.attname for field in _NODE_FIELDS))


def new_node(**fields) -> Node:
    """An unsaved Node from attribute names (`session_id`, `parent_id`, ...), defaults for the rest."""
    return node_from(fields)


def node_from(fields: dict) -> Node:
    """`new_node` from a dict of attribute names and values (read, not kept).

    A recorded call builds one on entry, in the run's thread. `Model.__init__` sets each field through
    its descriptor (9 us a node here); on a fresh instance that only fills `__dict__`, which is made
    directly (1 us) unless something listens to Node's init signals, which would then be skipped.
    """
    values = _NODE_DEFAULTS.copy()
    values.update(fields)
    if len(values) != len(_NODE_DEFAULTS):  # a name that is no field's added a key
        unknown = values.keys() - _NODE_DEFAULTS.keys()
        raise TypeError(f"Node has no field(s) {', '.join(sorted(unknown))}; "
                        f"fields are: {', '.join(_NODE_DEFAULTS)}")
    return node_instance(values)


def node_instance(values: dict) -> Node:
    """An unsaved Node whose fields are `values` (every field's attribute name; the dict becomes the
    node's own `__dict__`, so it must be the caller's to give)."""
    # Any init listener at all (for any model) takes the ORM's way: asking per model costs a microsecond.
    if (signals.pre_init.receivers or signals.post_init.receivers) and (
            signals.pre_init.has_listeners(Node) or signals.post_init.has_listeners(Node)):
        return Node(**values)
    node = Node.__new__(Node)
    values["_state"] = ModelState()
    node.__dict__ = values
    return node


def _quote_name():
    """The default database's identifier quoting (the SQL caches below are per vendor)."""
    return connections[DEFAULT_DB_ALIAS].ops.quote_name


def _preparing(preparers) -> tuple:
    """The (position, preparer) of each field of `preparers` (one per field, None: as it is) that is
    prepared: a row visits those few (a node's JSON, its times, its session) and no other."""
    return tuple((index, prepare) for index, prepare in enumerate(preparers) if prepare is not None)


def _prepare(values, preparing, connection) -> list:
    """`values` as the driver takes them; `preparing` as `_preparing` gives it."""
    row = list(values)
    for index, prepare in preparing:
        value = row[index]
        if value is not None:  # None is NULL for every field type: it goes as it is
            row[index] = prepare(value, connection)
    return row


_NODE_PREPARING = _preparing(_NODE_PREPARERS)


# A run's write is fenced by its lease: it passes only while the session has not ended and no other
# worker holds it ("" is a session claimed without a lease, e.g. by a test or an older version).
_TERMINAL = tuple(sorted(Session.TERMINAL))


def fence_sql() -> str:
    """The lease fence, to follow a session row's WHERE: its parameters are `*_TERMINAL, lease`."""
    quote = _quote_name()
    return f" AND {quote('status')} NOT IN ({', '.join(['%s'] * len(_TERMINAL))}) AND {quote('worker')} IN (%s, '')"


@lru_cache(maxsize=8)
def _advance_sql(vendor: str, returning: bool, fenced: bool) -> tuple[str, Optional[str]]:
    quote = _quote_name()
    table, rev, count, pk = (quote(n) for n in (Session._meta.db_table, "rev", "node_count", "id"))
    update = f"UPDATE {table} SET {rev} = {rev} + %s, {count} = {count} + %s WHERE {pk} = %s"
    if fenced:
        update += fence_sql()
    if returning:
        return placeholders(f"{update} RETURNING {rev}, {count}", vendor), None
    return (placeholders(update, vendor),
            placeholders(f"SELECT {rev}, {count} FROM {table} WHERE {pk} = %s", vendor))


def _key(tx: WriteTransaction, session_id):
    return _SESSION_PK.get_db_prep_value(_SESSION_PK.to_python(session_id), tx.connection)


def _returning(connection) -> bool:
    # SQLite has RETURNING from 3.35 (Django 5.2 supports older): Django's INSERT flag tracks that.
    return connection.vendor in RETURNING_VENDORS and connection.features.can_return_columns_from_insert


def give_back_revisions(tx: WriteTransaction, session_id, count: int) -> None:
    """Take back `count` revisions an advance in `tx` reserved and no change used."""
    update, _ = _advance_sql(tx.connection.vendor, _returning(tx.connection), False)
    tx.defer(update, [-count, 0, _key(tx, session_id)])


def _advance_params(key, revs: int, nodes: int, lease: Optional[str]) -> list:
    return [revs, nodes, key] if lease is None else [revs, nodes, key, *_TERMINAL, lease]


def advance(tx: WriteTransaction, session_id, revs: int, nodes: int,
            lease: Optional[str] = None) -> Optional[tuple[int, int]]:
    """Add to the session's revision and node count; the new (rev, node_count), None if no session (or,
    with `lease`, if the session ended or another worker holds it: the fence refused the write).

    The session row stays write-locked until `tx` ends.
    """
    connection = tx.connection
    key = _key(tx, session_id)
    update, select = _advance_sql(connection.vendor, _returning(connection), lease is not None)
    cursor = tx.execute(update, _advance_params(key, revs, nodes, lease))
    if select is not None:
        if cursor.rowcount == 0:
            return None
        cursor = tx.execute(select, [key])
    row = cursor.fetchone()
    return (row[0], row[1]) if row is not None else None


def lock_sessions(tx: WriteTransaction, advances: list[tuple], backfills: list[int]
                  ) -> tuple[list[Optional[tuple[int, int]]], set[int]]:
    """`advance` each (session_id, revs, nodes, lease) of `advances`, in order, then read which nodes of
    `backfills` are still running (under those locks, so it stays true): each advance's (rev, node_count)
    or None, and the running pks. On PostgreSQL, one round trip for all of it."""
    connection = tx.connection
    if not _returning(connection):
        advanced = [advance(tx, *request) for request in advances]
        return advanced, running_among(tx, backfills) if backfills else set()
    statements = [(_advance_sql(connection.vendor, True, lease is not None)[0],
                   _advance_params(_key(tx, session_id), revs, nodes, lease))
                  for session_id, revs, nodes, lease in advances]
    if backfills:
        statements.append(_running_among_sql(connection.vendor, backfills))
    results = tx.fetch_all(statements)
    advanced = [rows[0] if rows else None for rows in results[:len(advances)]]
    return advanced, {row[0] for row in results[len(advances)]} if backfills else set()


@lru_cache(maxsize=8)
def _lease_sql(vendor: str) -> str:
    quote = _quote_name()
    return placeholders(f"SELECT {quote('status')}, {quote('worker')} FROM {quote(Session._meta.db_table)} "
                        f"WHERE {quote('id')} = %s", vendor)


def lease_of(tx: WriteTransaction, session_id) -> Optional[tuple[str, str]]:
    """The session's (status, worker), None if there is no such session: why a fenced write was refused."""
    return tx.execute(_lease_sql(tx.connection.vendor), [_key(tx, session_id)]).fetchone()


@lru_cache(maxsize=8)
def _insert_sql(vendor: str, returning: bool) -> str:
    quote = _quote_name()
    columns = ", ".join(quote(field.column) for field in _NODE_FIELDS)
    values = ", ".join(["%s"] * len(_NODE_FIELDS))
    sql = f"INSERT INTO {quote(Node._meta.db_table)} ({columns}) VALUES ({values})"
    return placeholders(f"{sql} RETURNING {quote(Node._meta.pk.column)}" if returning else sql, vendor)


def insert_node(tx: WriteTransaction, node: Node) -> int:
    """INSERT the unsaved `node` and return its new id (the instance is marked saved)."""
    connection = tx.connection
    params = _prepare(_node_values(node), _NODE_PREPARING, connection)
    returning = connection.features.can_return_columns_from_insert
    cursor = tx.execute(_insert_sql(connection.vendor, returning), params)
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
    quote = _quote_name()
    fields = tuple(Node._meta.get_field(name) for name in names)
    assignments = ", ".join(f"{quote(field.column)} = %s" for field in fields)
    sql = (f"UPDATE {quote(Node._meta.db_table)} SET {assignments} "
           f"WHERE {quote(Node._meta.pk.column)} = %s AND {quote('status')} = %s")
    return placeholders(sql, vendor), _preparing(_preparer(field) for field in fields)


def update_running_node(tx: WriteTransaction, pk: int, values: dict) -> bool:
    """Set `values` on node `pk` if it is still running; False (nothing written) if it has ended."""
    connection = tx.connection
    sql, preparing = _update_sql(connection.vendor, tuple(values))
    params = _prepare(values.values(), preparing, connection)
    return tx.execute(sql, params + [pk, "running"]).rowcount > 0


# --- group commit: batches of node rows whose ids were reserved up front ---------------------------

# Rows per multi-row INSERT on SQLite, at most: fewer statements per batch, and few enough distinct
# statements (one per remainder size) to keep them prepared. A build that allows fewer parameters per
# statement (999 before SQLite 3.32) gets fewer rows each.
ROWS_PER_INSERT = 100


@lru_cache(maxsize=2 * ROWS_PER_INSERT)
def _insert_with_id_sql(vendor: str, rows: int = 1) -> str:
    quote = _quote_name()
    columns = ", ".join(quote(field.column) for field in (Node._meta.pk, *_NODE_FIELDS))
    values = "(" + ", ".join(["%s"] * (len(_NODE_FIELDS) + 1)) + ")"
    return placeholders(f"INSERT INTO {quote(Node._meta.db_table)} ({columns}) VALUES {', '.join([values] * rows)}",
                        vendor)


def insert_nodes(tx: WriteTransaction, nodes: list[tuple[Node, dict]]) -> None:
    """INSERT the unsaved nodes, each with its id already set (`reserve_node_ids`) and beside its record
    (`Node.as_dict()`, made for the live stream anyway), up to `ROWS_PER_INSERT` rows per statement
    (SQLite: PostgreSQL batches go through `numbered_sql`).

    A row's values are read from the record (`_record_row`): it holds every column's value, and its times
    as ISO text, from which SQLite's text of a UTC time is cut without formatting it again.

    SQLite's driver lets go of the GIL around each statement's execution, and a busy run thread that
    takes it meanwhile keeps it for up to a switch interval (5 ms); with executemany (one execution per
    row) the writer waited that out per row: 250 rows beside a thread busy in Python took 250-660 ms,
    against 40-55 ms as multi-row INSERTs.
    """
    connection = tx.connection
    keys: dict = {}  # the session's key, prepared once per session: a batch's rows share a few sessions
    rows = [_record_row(node, record, keys, connection) for node, record in nodes]
    per_statement = _rows_per_insert(connection)
    for start in range(0, len(rows), per_statement):
        chunk = rows[start:start + per_statement]
        tx.execute(_insert_with_id_sql(connection.vendor, len(chunk)), [value for row in chunk for value in row])
    for node, _ in nodes:
        node._state.adding = False
        node._state.db = connection.alias


# The columns of `_insert_with_id_sql`, the id first, as keys of a node's record, the session's key
# left out (a record has none); where in a row the session's key, the JSON and the times go.
_ROW_FIELDS = (Node._meta.pk, *_NODE_FIELDS)
_record_values = itemgetter(*("id" if field.primary_key else field.name for field in _ROW_FIELDS
                              if field.name != "session"))
_ROW_SESSION_AT = _SESSION_AT + 1
_ROW_JSON_AT = tuple(index for index, field in enumerate(_ROW_FIELDS) if isinstance(field, models.JSONField))
_ROW_TIMES_AT = tuple((index, field.attname) for index, field in enumerate(_ROW_FIELDS)
                      if isinstance(field, models.DateTimeField))
_UTC_SUFFIX = "+00:00"


def _record_row(node: Node, record: dict, keys: dict, connection) -> list:
    """The INSERT values of `node` read from its `record`, as `_prepare` would make them from the node;
    `keys`: the sessions' prepared keys, by session id, filled as they are met."""
    row = list(_record_values(record))
    session_id = node.__dict__["session_id"]  # its descriptor is a data descriptor: a read costs a call
    key = keys.get(session_id)
    if key is None:
        key = keys[session_id] = _SESSION_PK.get_db_prep_save(session_id, connection)
    row.insert(_ROW_SESSION_AT, key)
    for index in _ROW_JSON_AT:
        value = row[index]
        if value is not None:
            row[index] = _adapt_json(None, value, connection)
    utc = connection.timezone is timestamps.UTC
    for index, attname in _ROW_TIMES_AT:
        text = row[index]
        if text is not None:
            # An aware time at offset 0 written for a UTC database: its ISO text without the T and the
            # offset (`sqlite_utc`); any other, from the node's own value.
            row[index] = (f"{text[:10]} {text[11:-6]}" if utc and text.endswith(_UTC_SUFFIX)
                          else _adapt_datetime(getattr(node, attname), connection))
    return row


def _rows_per_insert(connection) -> int:
    driver = connection.connection
    limit = driver.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) if hasattr(driver, "getlimit") else 999
    return max(1, min(ROWS_PER_INSERT, limit // (len(_NODE_FIELDS) + 1)))


def update_nodes(tx: WriteTransaction, updates: list[tuple[int, dict]]) -> None:
    """Set each (pk, values) on its node; the caller has checked, under the session lock, that they run."""
    connection = tx.connection
    by_fields: dict[tuple[str, ...], list] = {}
    for pk, values in updates:
        by_fields.setdefault(tuple(values), []).append((pk, values))
    for names, rows in by_fields.items():
        sql, preparing = _update_sql(connection.vendor, names)
        tx.defer_many(sql, [_prepare(values.values(), preparing, connection) + [pk, "running"]
                            for pk, values in rows])


def _running_among_sql(vendor: str, pks: list[int]) -> tuple[str, list]:
    quote = _quote_name()
    sql = (f"SELECT {quote(Node._meta.pk.column)} FROM {quote(Node._meta.db_table)} "
           f"WHERE {quote(Node._meta.pk.column)} IN ({', '.join(['%s'] * len(pks))}) AND {quote('status')} = %s")
    return placeholders(sql, vendor), [*pks, "running"]


def running_among(tx: WriteTransaction, pks: list[int]) -> set[int]:
    """Which of the nodes `pks` are still running (read under the session's lock, so it stays true)."""
    return {row[0] for row in tx.execute(*_running_among_sql(tx.connection.vendor, pks)).fetchall()}


@lru_cache(maxsize=8)
def _reserve_sql(vendor: str) -> tuple[str, ...]:
    quote = _quote_name()
    table, pk = Node._meta.db_table, Node._meta.pk.column
    if vendor == "postgresql":
        # The identity column's sequence: nextval never rolls back and never hands a value out twice.
        # The sequence is looked up once, not once per id: OFFSET 0 keeps the planner from pulling the
        # lookup up into nextval's argument (1,024 ids: 1.1 against 5.3 ms, timed by the client).
        return (f"SELECT nextval(s.seq) FROM (SELECT pg_get_serial_sequence('{table}', '{pk}')::regclass AS seq "
                f"OFFSET 0) AS s, generate_series(1, %s)",)
    # SQLite's AUTOINCREMENT keeps the largest id ever handed out in sqlite_sequence (a row that exists
    # from the table's first insert on): raising it reserves the ids below, for every connection.
    return (placeholders(f"INSERT INTO sqlite_sequence (name, seq) SELECT '{table}', "
                         f"COALESCE((SELECT MAX({quote(pk)}) FROM {quote(table)}), 0) "
                         f"WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = '{table}')", vendor),
            placeholders(f"UPDATE sqlite_sequence SET seq = MAX(seq, %s) + %s WHERE name = '{table}' "
                         f"RETURNING seq", vendor))


# SQLite: the largest node id this process reserved, by database. A reservation made inside an atomic
# block the run's code opened is undone with the block if it rolls back, while the run keeps using the
# ids (its calls happened all the same); the next reservation starts above this mark, so no run of this
# process is given them again.
_sqlite_reserved_up_to: dict[str, int] = {}


def reserve_node_ids(tx: WriteTransaction, count: int, *, alone: bool = False) -> list[int]:
    """`count` node ids no other writer (thread or process) will ever be given, in increasing order.

    One query on PostgreSQL (the table's sequence), one short write on SQLite (its sqlite_sequence row).
    `alone`: the reservation is all `tx` does; on PostgreSQL its COMMIT then goes with the query, one
    round trip.
    """
    statements = _reserve_sql(tx.connection.vendor)
    if tx.connection.vendor == "postgresql":
        return sorted(row[0] for row in tx.fetch_all([(statements[0], [count])], commit=alone)[0])
    # Under the write lock the transaction took at its start (IMMEDIATE): reservations, and the mark, go
    # one at a time.
    database = str(tx.connection.settings_dict["NAME"])
    tx.execute(statements[0])
    last = tx.execute(statements[1], [_sqlite_reserved_up_to.get(database, 0), count]).fetchone()[0]
    _sqlite_reserved_up_to[database] = last
    return list(range(last - count + 1, last + 1))
