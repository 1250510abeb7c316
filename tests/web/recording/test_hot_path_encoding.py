"""The recording hot path's shortcuts give exactly what the general code they stand in for gives: the
prebuilt JSON encoders (`json_text`), the node field adapters (`write_path.sql`), the flat-dict walk
of `json_safe`."""
from __future__ import annotations

import collections
import dataclasses
import json
import math
import uuid
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from django.db import connection, connections
from django.db.models import signals
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dag import timestamps
from dag.models import Node
from dag.recording import values
from dag.recording.json_text import dumps, dumps_compact
from dag.recording.write_path import sql

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20)


def _finite(value):
    """`value` with every NaN and infinity as None: what a JSON parser reads back from the stream's text."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, list):
        return [_finite(item) for item in value]
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    return value


@settings(max_examples=300, derandomize=True, deadline=None)
@given(JSON)
def test_the_prebuilt_encoders_write_what_json_dumps_writes(value):
    assert dumps(value) == json.dumps(value)
    compact = dumps_compact(value)
    # The stream's encoder: compact ASCII JSON that a strict parser reads back as the value (the
    # spelling of a float's exponent may differ from json.dumps'; NaN and infinities are null).
    assert compact.isascii()
    assert json.loads(compact, parse_constant=_refuse_constant) == _finite(value)
    assert compact == json.dumps(_finite(value), ensure_ascii=True, separators=(",", ":")) or _has_float(value)


def _refuse_constant(name):
    raise AssertionError(f"{name} is not JSON")


def _has_float(value) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, (list, dict)):
        return any(_has_float(item) for item in (value.values() if isinstance(value, dict) else value))
    return False


class Score(float):
    pass


Point = collections.namedtuple("Point", "x y")


@pytest.mark.parametrize("value", [
    {"text": "caf\u00e9 \u2028 \U0001f600"},  # not ASCII: escaped, as json.dumps escapes it
    {"score": Score(1.5), "point": Point(1, 2)},  # subclasses of float and tuple: a number and a list
    {"huge": 2 ** 64, "small": -(2 ** 63) - 1},  # beyond 64 bits
    {7: 1, None: 2, 1.5: 3, True: 4},  # keys that are not text
    {"nested": [{"deep": [1, 2.5, "x", None, False]}]},
])
def test_the_compact_encoder_writes_what_json_dumps_writes_where_orjson_would_not(value):
    assert dumps_compact(value) == json.dumps(value, ensure_ascii=True, separators=(",", ":"), default=str)


def test_a_non_finite_key_is_written_as_its_text_and_a_non_finite_value_as_null():
    assert json.loads(dumps_compact({float("nan"): float("inf"), "n": [float("-inf")]})) == {"nan": None, "n": [None]}


def test_the_compact_encoder_writes_what_it_cannot_encode_as_text_and_the_other_refuses_it():
    marker = datetime(2026, 12, 1, tzinfo=timezone.utc)
    assert dumps_compact({"at": marker}) == '{"at":"%s"}' % marker

    @dataclasses.dataclass
    class Point:
        x: int

    assert dumps_compact([Point(1), uuid.UUID(int=1)]) == '["%s","%s"]' % (Point(1), uuid.UUID(int=1))
    with pytest.raises(TypeError, match="datetime is not JSON serializable"):
        dumps({"at": marker})


FLAT = st.dictionaries(
    st.text(max_size=6),
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6) | st.lists(st.integers(), max_size=2),
    max_size=6)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(FLAT)
def test_json_safe_of_a_flat_dict_is_the_general_walks_answer(value):
    fast, general = values.json_safe(value), values._convert(value, 0)
    assert json.dumps(fast) == json.dumps(general)  # NaN becomes the same text either way
    assert list(fast) == list(general)


def test_json_safe_cleans_text_keys_and_values_and_leaves_int_subclasses_to_the_general_walk():
    class Count(int):
        def __repr__(self):
            return "Count!"

    assert values.json_safe({"a\x00": "b\x00", "n": float("nan")}) == {"a\ufffd": "b\ufffd", "n": "nan"}
    converted = values.json_safe({"count": Count(3)})
    assert converted == {"count": 3} and type(converted["count"]) is int


def _comparable(value):
    """A prepared value as it can be compared: psycopg's Jsonb wrapper (PostgreSQL) by what it holds."""
    return ("json", value.obj) if hasattr(value, "obj") else value


def _django_prepared(field_name: str, value):
    return Node._meta.get_field(field_name).get_db_prep_save(value, connection)


@pytest.mark.parametrize("value", [
    datetime(2026, 12, 1, 15, 39, 19, 123456, tzinfo=timezone.utc),
    datetime(2026, 12, 1, 15, 39, 19, tzinfo=timezone.utc),  # no fraction: none written
    datetime(2026, 6, 1, 8, 0, tzinfo=ZoneInfo("Europe/Paris")),
    datetime(2026, 12, 1, 23, 30, tzinfo=timezone(timedelta(hours=-5))),
    datetime(2026, 12, 1, 12, 0),  # naive
])
def test_node_timestamps_are_prepared_as_the_orm_prepares_them(value, db):
    fast = sql._adapt_datetime(value, connection)
    assert fast == connection.ops.adapt_datetimefield_value(value)
    if value.tzinfo is not None:
        assert fast == _django_prepared("started_at", value)


@given(st.one_of(
    st.datetimes(timezones=st.just(timezone.utc)),
    st.datetimes(timezones=st.just(ZoneInfo("UTC"))),
    st.datetimes(timezones=st.builds(timezone, st.timedeltas(min_value=timedelta(hours=-23, minutes=-59),
                                                             max_value=timedelta(hours=23, minutes=59)))),
    st.datetimes(),  # naive
))
def test_a_record_s_time_is_written_as_isoformat_writes_it(value):
    # A record's times are read back with fromisoformat (durations, imports): the text must not differ.
    assert timestamps.iso(value) == value.isoformat()


def test_a_record_s_missing_time_is_none_and_its_utc_times_are_written_by_orjson(monkeypatch):
    assert timestamps.iso(None) is None
    moment = datetime(2026, 12, 6, 23, 1, 2, 3, tzinfo=timezone.utc)
    monkeypatch.setattr(timestamps.orjson, "dumps", lambda value: b'"written by orjson"')
    assert timestamps.iso(moment) == "written by orjson"  # the fast way is the one taken
    assert timestamps.iso(moment.astimezone(timezone(timedelta(hours=1)))) == "2026-12-07T00:01:02.000003+01:00"


@pytest.mark.parametrize("value", [{"i": 3, "note": "a short argument"}, [1, "two", None], "text", 3, math.pi, True])
def test_node_json_is_prepared_as_the_orm_prepares_it(value, db):
    fast = sql._adapt_json(None, value, connection)
    expected = _django_prepared("input", value)
    if connection.vendor == "postgresql":  # psycopg's Jsonb wrapper: compare what it holds and writes
        assert (fast.obj, fast.dumps(fast.obj)) == (expected.obj, expected.dumps(expected.obj))
    else:
        assert fast == expected


def test_the_recording_clock_follows_use_tz_as_timezone_now_does(settings):
    from django.utils import timezone as django_timezone

    from dag.recording import clock

    assert clock.now().tzinfo is timezone.utc and django_timezone.now().tzinfo is timezone.utc
    settings.USE_TZ = False
    assert clock.now().tzinfo is None and django_timezone.now().tzinfo is None


def test_a_batch_prepares_each_sessions_key_once_and_as_the_orm_does(db, user, monkeypatch):
    from dag.models import Session
    from dag.recording.write_path.write_transaction import WriteTransaction

    prepared = []
    orm = sql._SESSION_PK.get_db_prep_save

    def counted(value, connection):
        prepared.append(value)
        return orm(value, connection)

    first, second = (str(Session.objects.create(owner=user, function="f").pk) for _ in range(2))
    monkeypatch.setattr(sql._SESSION_PK, "get_db_prep_save", counted)
    order = [first, second, first, first, second]
    with WriteTransaction() as tx:
        ids = sql.reserve_node_ids(tx, len(order))
        nodes = [sql.new_node(id=pk, session_id=key, seq=seq, kind="code", name="step")
                 for seq, (pk, key) in enumerate(zip(ids, order))]
        sql.insert_nodes(tx, [(node, node.as_dict()) for node in nodes])
    assert prepared == [first, second]
    assert [str(key) for key in Node.objects.filter(pk__in=ids).order_by("seq").values_list("session_id", flat=True)
            ] == order


MOMENTS = [datetime(2026, 12, 2, 8, 0, 0, 250000, tzinfo=timezone.utc),
           datetime(2026, 12, 2, 8, 0, 0, tzinfo=timezone.utc),  # no fraction: none written
           datetime(2026, 12, 2, 9, 0, 0, 1, tzinfo=ZoneInfo("Europe/Paris")),
           datetime(2026, 12, 2, 8, 0, 0, 1, tzinfo=ZoneInfo("Europe/London")),  # offset 0, not UTC itself
           None]


@pytest.mark.skipif(connection.vendor != "sqlite", reason="rows are inserted from records on SQLite "
                                                            "(PostgreSQL's batches: write_path.numbered_sql)")
@pytest.mark.parametrize("moment", MOMENTS)
@pytest.mark.parametrize("output, usage", [(17, None), (None, {"input_tokens": 3, "output_tokens": 4})])
def test_a_node_row_read_from_its_record_is_what_the_orm_prepares_of_each_field(db, output, usage, moment):
    node = sql.new_node(id=41, session_id="8c4bd3a0-8f2e-4a41-9a53-5fd0c5a2f3b1", parent_id=5, seq=3, kind="code",
                        name="step", status="completed", input={"i": 3, "note": "caf\u00e9"}, output=output,
                        usage=usage, render_range={"callers": 2}, started_at=moment, finished_at=moment, rev=9)
    row = sql._record_row(node, node.as_dict(), {}, connection)
    orm = [field.get_db_prep_save(getattr(node, field.attname), connection) for field in sql._ROW_FIELDS]
    assert [_comparable(value) for value in row] == [_comparable(value) for value in orm]


@pytest.mark.parametrize("output, usage", [(17, None), (None, {"input_tokens": 3, "output_tokens": 4})])
def test_a_node_row_is_prepared_as_the_orm_prepares_each_field(db, output, usage):
    moment = datetime(2026, 12, 2, 8, 0, 0, 250000, tzinfo=timezone.utc)
    node = sql.new_node(session_id="8c4bd3a0-8f2e-4a41-9a53-5fd0c5a2f3b1", parent_id=5, seq=3, kind="code",
                        name="step", status="completed", input={"i": 3}, output=output, usage=usage,
                        started_at=moment, finished_at=moment, rev=9)
    fast = sql._prepare(sql._node_values(node), sql._NODE_PREPARING, connection)
    orm = [field.get_db_prep_save(getattr(node, field.attname), connection) for field in sql._NODE_FIELDS]
    assert [_comparable(value) for value in fast] == [_comparable(value) for value in orm]


def test_a_backfill_is_prepared_as_the_orm_prepares_each_field(db):
    moment = datetime(2026, 12, 2, 8, 0, 5, tzinfo=timezone.utc)
    values = {"status": "completed", "output": {"n": [1, 2]}, "usage": None, "error": "", "finished_at": moment}
    _, preparing = sql._update_sql(connection.vendor, tuple(values))
    fast = sql._prepare(values.values(), preparing, connection)
    orm = [Node._meta.get_field(name).get_db_prep_save(value, connection) for name, value in values.items()]
    assert [_comparable(value) for value in fast] == [_comparable(value) for value in orm]


ZONES = st.sampled_from([timezone.utc, ZoneInfo("Europe/Paris"), timezone(timedelta(hours=-5))])
# Every year there is (a day short of each end, where a zone's offset would leave the calendar), and
# the edges of the range whose seconds are kept: the epoch, and 2**32 seconds after it.
AWARE_TIMES = st.one_of(
    st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=ZONES),
    st.datetimes(min_value=datetime(1969, 12, 31, 23, 59), max_value=datetime(1970, 1, 1, 0, 1), timezones=ZONES),
    st.datetimes(min_value=datetime(2106, 2, 7, 6, 27), max_value=datetime(2106, 2, 7, 6, 29), timezones=ZONES))
LAST_MICROSECONDS = st.sampled_from([
    datetime(2026, 12, 2, 8, 0, 59, 999999), datetime(1969, 12, 31, 23, 59, 59, 999999),
    datetime(1970, 1, 1, 0, 0, 0, 1), datetime(2106, 2, 7, 6, 28, 15, 999999)])


@settings(max_examples=500, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # `db` only opens the connection
@given(st.one_of(AWARE_TIMES, LAST_MICROSECONDS.map(lambda value: value.replace(tzinfo=timezone.utc))))
def test_a_recorded_time_is_adapted_as_djangos_adapter_adapts_it(db, value):
    assert sql._adapt_datetime(value, connection) == connection.ops.adapt_datetimefield_value(value)
    if value.tzinfo is timezone.utc:
        assert timestamps.sqlite_utc(value) == str(value.replace(tzinfo=None))


def test_a_database_in_another_zone_takes_djangos_conversion(db, monkeypatch):
    """SQLite's DATABASES["default"]["TIME_ZONE"] makes stored times local to it: no shortcut applies."""
    wrapper = connections["default"]  # not the `connection` proxy: its cached zone is the wrapper's
    if wrapper.vendor != "sqlite":
        pytest.skip("TIME_ZONE of the connection is what SQLite's adapter converts to")
    monkeypatch.setitem(wrapper.settings_dict, "TIME_ZONE", "Europe/Paris")
    monkeypatch.delitem(wrapper.__dict__, "timezone", raising=False)  # a cached_property
    try:
        moment = datetime(2026, 12, 2, 8, 0, 0, 250000, tzinfo=timezone.utc)
        assert sql._adapt_datetime(moment, wrapper) == "2026-12-02 09:00:00.250000"
        assert sql._adapt_datetime(moment, wrapper) == wrapper.ops.adapt_datetimefield_value(moment)
    finally:
        wrapper.__dict__.pop("timezone", None)


def test_the_kept_seconds_are_used_and_stay_bounded():
    start = datetime(2026, 12, 2, tzinfo=timezone.utc)
    for second in range(3 * timestamps.KEPT_SECONDS):
        moment = start + timedelta(seconds=second, microseconds=second)
        assert timestamps.sqlite_utc(moment) == str(moment.replace(tzinfo=None))
    assert 0 < len(timestamps._seconds) <= timestamps.KEPT_SECONDS


def test_a_node_built_on_the_hot_path_is_the_node_the_orm_builds(db):
    fields = {"id": 41, "session_id": "8c4bd3a0-8f2e-4a41-9a53-5fd0c5a2f3b1", "parent_id": 5, "kind": "code",
              "name": "step", "status": "running", "input": {"i": 3}, "depth": 2,
              "started_at": datetime(2026, 12, 2, 8, 0, tzinfo=timezone.utc)}
    given = dict(fields)
    built, orm = sql.node_from(given), Node(**fields)
    assert {field.attname: getattr(built, field.attname) for field in Node._meta.concrete_fields} == \
           {field.attname: getattr(orm, field.attname) for field in Node._meta.concrete_fields}
    assert built._state.adding and built._state.db is None
    built.status = "completed"  # the node's fields are its own: the caller's dict is read, not kept
    assert given == fields
    assert sql.new_node(**fields).__dict__.keys() == built.__dict__.keys()


def test_a_name_that_is_no_node_field_is_refused_by_name():
    with pytest.raises(TypeError, match=r"Node has no field\(s\) colour, size; fields are: id, "):
        sql.node_from({"kind": "code", "colour": "red", "size": 3})


def test_a_node_is_built_through_the_orm_while_something_listens_to_its_init():
    seen = []

    def listener(sender, instance, **kwargs):
        seen.append(instance)

    signals.post_init.connect(listener, sender=Node)
    try:
        node = sql.node_from({"id": 7, "kind": "code", "name": "step"})
    finally:
        signals.post_init.disconnect(listener, sender=Node)
    assert seen == [node] and (node.pk, node.name, node.status) == (7, "step", Node._meta.get_field("status").default)
