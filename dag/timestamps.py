"""A recorded time as text, made cheaply: as Django's SQLite backend stores it, and as ISO 8601.

Every recorded node carries two timestamps, and on SQLite each becomes naive text in its row. Django's
adapter (and converting it by hand: `astimezone`, `replace`, `str`) took 2-5 us a value here, which made
these conversions a fifth of the group-commit writer's work. A node's times fall within a few seconds of
each other, so the text of the whole second is kept (up to `KEPT_SECONDS` seconds, all dropped at once
when full) and only the microseconds are formatted per value. Aware UTC datetimes from 1970 to 2106 (the
recorder's clock) take that way; any other value is formatted whole.

The ISO text of a record's times (`Node.as_dict`, two a recorded node, made in the writer's series of
work) is orjson's for aware UTC values (`iso`): the same text as `isoformat()` in a third of its time,
with no cache, since read paths (a snapshot of an old session) ask for seconds no cache would hold.
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Optional

import orjson

UTC = timezone.utc
KEPT_SECONDS = 64
# Seconds since the epoch within which a float timestamp tells a value's whole second: below 2**32
# (the year 2106) a double's spacing is under a microsecond, so N s + 999,999 us stays below N + 1.
_KEYED_UNTIL = 2 ** 32

# Whole seconds since the epoch -> "YYYY-MM-DD HH:MM:SS". Read and written from several threads: a
# dict's get, set and clear are atomic, and a lost entry is only made again.
_seconds: dict[int, str] = {}


def _second_text(value: datetime) -> Optional[str]:
    """The text of `value`'s whole second (an aware UTC value); None outside the keyed range."""
    stamp = value.timestamp()
    if not 0 <= stamp < _KEYED_UNTIL:
        return None
    key = int(stamp)
    text = _seconds.get(key)
    if text is None:
        if len(_seconds) >= KEPT_SECONDS:
            _seconds.clear()
        text = _seconds[key] = str(value.replace(microsecond=0, tzinfo=None))
    return text


def sqlite_utc(value: datetime) -> str:
    """An aware UTC `value` as Django's SQLite backend stores it in a UTC database: naive text,
    `str(value.replace(tzinfo=None))`."""
    second = _second_text(value)
    if second is None:
        return str(value.replace(tzinfo=None))
    micro = value.microsecond
    return "%s.%06d" % (second, micro) if micro else second


def iso(value: Optional[datetime]) -> Optional[str]:
    """`value.isoformat()`, None for None. An aware UTC datetime's is written by orjson, whose RFC 3339 text
    is isoformat's for it ("+00:00", microseconds only when not 0) in a third of the time; any other
    value (another offset, a naive one, a subclass) by `isoformat()` itself."""
    if value is None:
        return None
    if type(value) is datetime and value.tzinfo is UTC:
        return orjson.dumps(value)[1:-1].decode()
    return value.isoformat()
