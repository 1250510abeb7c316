"""The text of a timestamp, as `datetime.isoformat` writes it and as Django's SQLite backend stores it.

Every recorded node carries two timestamps, each written twice: as ISO text in its record (the API, the
live stream) and as SQLite's text in its row. CPython formats a datetime in 2-5 us, which made these
four conversions a fifth of the group-commit writer's work. A node's times fall within a few seconds
of each other, so the text of the whole second is kept (for the last `KEPT_SECONDS` seconds seen) and
only the microseconds are formatted per value. Aware UTC datetimes from 1970 to 2106 (the recorder's
clock, Django's `timezone.now()`) take that way; any other value is formatted whole.
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Optional

UTC = timezone.utc
KEPT_SECONDS = 64
# Seconds since the epoch within which a float timestamp tells a value's whole second: below 2**32
# (the year 2106) a double's spacing is under a microsecond, so N s + 999,999 us stays below N + 1.
# Earlier and later values are formatted whole.
_KEYED_UNTIL = 2 ** 32

# Whole seconds since the epoch -> ("YYYY-MM-DDTHH:MM:SS", "YYYY-MM-DD HH:MM:SS"). Read and written
# from several threads: a dict's get and set are atomic, and a lost entry is only made again.
_seconds: dict[int, tuple[str, str]] = {}


def _second_texts(value: datetime) -> Optional[tuple[str, str]]:
    """The texts of `value`'s whole second (an aware UTC value); None outside the keyed range."""
    stamp = value.timestamp()
    if not 0 <= stamp < _KEYED_UNTIL:
        return None
    key = int(stamp)
    texts = _seconds.get(key)
    if texts is None:
        if len(_seconds) >= KEPT_SECONDS:
            _seconds.clear()
        iso = value.replace(microsecond=0, tzinfo=None).isoformat()
        texts = _seconds[key] = (iso, f"{iso[:10]} {iso[11:]}")
    return texts


def iso(value: Optional[datetime]) -> Optional[str]:
    """`value.isoformat()` (None for None)."""
    if value is None:
        return None
    if value.tzinfo is not UTC:
        return value.isoformat()
    texts = _second_texts(value)
    if texts is None:
        return value.isoformat()
    micro = value.microsecond
    return "%s.%06d+00:00" % (texts[0], micro) if micro else texts[0] + "+00:00"


def sqlite_utc(value: datetime) -> str:
    """An aware UTC `value` as Django's SQLite backend stores it in a UTC database: naive text,
    `str(value.replace(tzinfo=None))`."""
    texts = _second_texts(value)
    if texts is None:
        return str(value.replace(tzinfo=None))
    micro = value.microsecond
    return "%s.%06d" % (texts[1], micro) if micro else texts[1]
