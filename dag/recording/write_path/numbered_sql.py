"""PostgreSQL: a session's part of a group-commit batch as statements that number its rows themselves.

Elsewhere the writer reads a session's counters (its advance) before it can number and write the
batch's rows. Here the rows go with relative numbers (`seq` from 0 among the new nodes, `rev` from 1
among the part's writes) and each statement adds the counters the session had before the batch, read
under the lock that the part's advance took earlier in the same transaction. Nothing waits for a
result, so a whole batch (every session's advance, rows and backfills) and its COMMIT travel to the
server together: one round trip, where a round trip on a loaded machine costs milliseconds, most of
them spent getting the GIL back.

Rows travel as one JSON array per statement (`json_to_recordset`): a node's record is the JSON the live
stream sends anyway (`Node.as_dict`, whose keys are the fields' names), so it is encoded once for both.
The fence is in every statement: a session whose advance is refused (it ended, or another worker holds
it) gets none of its rows written either.
"""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Optional

from django.db import DEFAULT_DB_ALIAS, connections

from ...models import Node, Session
from .. import json_text
from . import sql


def _quote(name: str) -> str:
    return sql._quote_name()(name)


def _record_type(field) -> str:
    """The field's column type without a length: the INSERT's own cast checks lengths, and says which
    value is too long, as an INSERT of the values would."""
    return re.sub(r"[(].*[)]", "", field.db_type(connections[DEFAULT_DB_ALIAS]))


@lru_cache(maxsize=2)
def _counters_sql(fenced: bool) -> str:
    """The session's counters before the batch (its advance has added `revs` and `nodes`); its
    parameters are the advance's (`sql._advance_params`)."""
    return (f"(SELECT {_quote('rev')} - %s AS rev0, {_quote('node_count')} - %s AS seq0 "
            f"FROM {_quote(Session._meta.db_table)} WHERE {_quote('id')} = %s{sql.fence_sql() if fenced else ''})")


# A row's revision: its place in the part's queue (from 1), less the backfills before it that did not
# apply (their nodes had ended: a stop or a crash closed them first), so revisions stay gap-free.
_REV = "s.rev0 + {row}.rev - (SELECT count(*) FROM dropped WHERE dropped.rev < {row}.rev)"


def _fields_types(fields) -> str:
    return ", ".join(f"{_quote(field.name)} {_record_type(field)}" for field in fields)


def _insert_cte() -> str:
    fields = [field for field in Node._meta.concrete_fields if field.name != "session"]
    relative = {"seq": "s.seq0 + r.{}", "rev": _REV.format(row="r")}
    columns = ", ".join(_quote(field.column) for field in (Node._meta.get_field("session"), *fields))
    values = ", ".join(["%s", *(relative.get(field.name, "r.{}").format(_quote(field.name)) for field in fields)])
    return (f"INSERT INTO {_quote(Node._meta.db_table)} ({columns}) SELECT {values} "
            f"FROM s, json_to_recordset(%s::json) AS r({_fields_types(fields)})")


def _update_cte(names: tuple[str, ...]) -> str:
    fields = [Node._meta.get_field(name) for name in names]
    assignments = ", ".join([*(f"{_quote(field.column)} = b.{_quote(field.name)}" for field in fields),
                             f"{_quote('rev')} = {_REV.format(row='b')}"])
    types = ", ".join([f"{_quote('id')} bigint, {_quote('rev')} bigint", _fields_types(fields)])
    return (f"UPDATE {_quote(Node._meta.db_table)} AS n SET {assignments} "
            f"FROM s, json_to_recordset(%s::json) AS b({types}) "
            f"WHERE n.{_quote('id')} = b.{_quote('id')} AND n.{_quote('status')} = 'running' "
            f"RETURNING n.{_quote('id')}")


@lru_cache(maxsize=64)
def _write_sql(fenced: bool, inserts: bool, updates: tuple[tuple[str, ...], ...]) -> str:
    """One statement writing a part: `s` the counters, `dropped` the backfills that will not apply, the
    INSERT, one UPDATE per set of backfilled fields, the revisions of dropped backfills given back.
    It returns the pks it backfilled."""
    ctes = [f"s AS {_counters_sql(fenced)}"]
    if updates:
        table, pk = _quote(Node._meta.db_table), _quote("id")
        ctes += [f"k AS (SELECT * FROM json_to_recordset(%s::json) AS k({pk} bigint, {_quote('rev')} bigint))",
                 f"dropped AS (SELECT k.{_quote('rev')} FROM k WHERE NOT EXISTS (SELECT 1 FROM {table} AS n "
                 f"WHERE n.{pk} = k.{pk} AND n.{_quote('status')} = 'running'))"]
    else:
        ctes.append(f"dropped AS (SELECT NULL::bigint AS {_quote('rev')} WHERE false)")
    if inserts:
        ctes.append(f"inserted AS ({_insert_cte()})")
    ctes += [f"backfilled_{index} AS ({_update_cte(names)})" for index, names in enumerate(updates)]
    if updates:
        session, rev = _quote(Session._meta.db_table), _quote("rev")
        ctes.append(f"given_back AS (UPDATE {session} SET {rev} = {rev} - (SELECT count(*) FROM dropped) "
                    f"WHERE {_quote('id')} = %s AND EXISTS (SELECT 1 FROM s) AND EXISTS (SELECT 1 FROM dropped))")
    returned = " UNION ALL ".join(f"SELECT {_quote('id')} FROM backfilled_{index}" for index in range(len(updates)))
    return f"WITH {', '.join(ctes)} {returned or 'SELECT NULL WHERE false'}"


def part_statements(tx, session_id, lease: Optional[str], records: list[str],
                    backfills: list[tuple[int, int, dict]]) -> list[tuple[str, list]]:
    """The two statements that write one session's part: its advance (for `records` new nodes and every
    backfill), then the rows: `records` (each a node's `as_dict()` JSON, `seq` and `rev` relative)
    inserted, and `backfills` ((pk, relative rev, fields) each) applied to the nodes still running.
    The advance returns the session's new (rev, node_count), or no row if it was refused (then the
    second writes nothing either); the second returns the pks it backfilled. A row's revision is its
    relative one less the backfills before it that did not apply."""
    key = sql._key(tx, session_id)
    revs, nodes = len(records) + len(backfills), len(records)
    fenced = lease is not None
    counters = sql._advance_params(key, revs, nodes, lease)
    by_fields: dict[tuple[str, ...], list[str]] = {}
    for pk, rev, fields in backfills:
        by_fields.setdefault(tuple(fields), []).append(json_text.dumps_compact({**fields, "id": pk, "rev": rev}))
    params = [*counters]
    if backfills:
        params.append(json_text.dumps_compact([{"id": pk, "rev": rev} for pk, rev, _ in backfills]))
    if records:
        params += [key, f"[{','.join(records)}]"]
    for rows in by_fields.values():
        params.append(f"[{','.join(rows)}]")
    if backfills:
        params.append(key)
    return [(sql._advance_sql("postgresql", True, fenced)[0], sql._advance_params(key, revs, nodes, lease)),
            (_write_sql(fenced, bool(records), tuple(by_fields)), params)]
