"""Turning whatever a function was called with or returned into something a JSON column accepts.

A recorded run must never fail because an argument was a Runtime, a socket or a set, so anything that
is not JSON becomes a short readable stand-in ("<Runtime>", a truncated repr). Containers are walked;
tuples and sets become lists because that is what a reader of the DAG expects to see. Big values are
stored whole; `preview` is for the places that list many of them.
"""
from __future__ import annotations

import itertools
import json
import math
import sys
from typing import Any

from runtime.spec import about_digits

# Past this nesting depth a value is summarised, which also stops self-referencing structures.
MAX_DEPTH = 32
REPR_LIMIT = 200

_SCALARS = (str, bool, type(None))
# Python turns an int of more digits than this into text only with a process-wide setting changed
# (sys.set_int_max_str_digits), so a larger one could not be encoded as JSON: it is stored as a stand-in.
_MAX_INT_BITS = math.floor((sys.get_int_max_str_digits() or 10**9) * math.log2(10)) - 1


def json_safe(value: Any) -> Any:
    """`value` if it is JSON already, else a copy where every non-JSON part is a readable stand-in."""
    kind = type(value)
    if kind is str:
        return clean_text(value)
    if kind is int:
        return value if value.bit_length() <= _MAX_INT_BITS else _big_int(value)
    if kind in _SCALARS:
        return value
    if kind is dict:
        flat = _flat_dict(value)
        if flat is not None:
            return flat
    return _convert(value, 0)


def _flat_dict(value: dict) -> Any:
    """`_convert(value, 0)` for the commonest value recorded, a call's arguments: a dict of text keys and
    scalar values, in one loop; None for anything else (the general walk then takes it)."""
    copy = {}
    for key, item in value.items():
        if type(key) is not str:
            return None
        kind = type(item)
        if kind is str:
            item = clean_text(item)
        elif kind is float:
            if not math.isfinite(item):
                return None
        elif kind is int:
            if item.bit_length() > _MAX_INT_BITS:
                return None
        elif kind is not bool and item is not None:
            return None
        copy[clean_text(key)] = item
    return copy


def _convert(value: Any, depth: int) -> Any:
    if isinstance(value, str):
        return clean_text(str.__str__(value))  # a subclass's own __str__ may say something else
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        value = int(value)
        return value if value.bit_length() <= _MAX_INT_BITS else _big_int(value)
    if isinstance(value, float):
        # NaN and the infinities are not JSON; PostgreSQL's jsonb refuses them outright.
        return float(value) if math.isfinite(value) else repr(float(value))
    if depth >= MAX_DEPTH:
        return _stand_in(value)
    if isinstance(value, dict):
        return {_key(k): _convert(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_convert(item, depth + 1) for item in value]
    if isinstance(value, (set, frozenset)):
        items = [_convert(item, depth + 1) for item in value]
        try:
            return sorted(items)
        except TypeError:  # mixed types: keep a stable textual order instead
            return sorted(items, key=repr)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return f"<{type(value).__name__}: {len(bytes(value))} bytes>"
    return _stand_in(value)


def _big_int(value: int) -> str:
    return f"<int of about {about_digits(value):,} digits>"


def _key(key: Any) -> str:
    if isinstance(key, str):
        return clean_text(str.__str__(key))
    if isinstance(key, int) and not isinstance(key, bool) and key.bit_length() > _MAX_INT_BITS:
        return _big_int(key)
    if key is None or isinstance(key, (bool, int, float)):
        return json.dumps(key)  # what json.dumps would have made of it: "null", "true", "3"
    return _stand_in(key)


def clean_text(text: str) -> str:
    """`text` as PostgreSQL text (and so jsonb strings) can hold it: NUL and lone UTF-16 surrogates
    (invalid Unicode, e.g. half of a cut "\\ud83d\\ude00") become U+FFFD; the rest intact."""
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            # Through UTF-16, a pair of separate surrogates becomes its character; a lone one U+FFFD.
            text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def _stand_in(value: Any) -> str:
    """`<TypeName>` for objects with the default repr, else their own repr, truncated."""
    cls = type(value)
    if cls.__repr__ is object.__repr__:
        return f"<{cls.__name__}>"
    try:
        text = repr(value)
    except Exception:  # a broken __repr__ must not break recording
        return f"<{cls.__name__}>"
    return clean_text(truncate(text, REPR_LIMIT))


def truncate(text: str, limit: int) -> str:
    """`text` cut to about `limit` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit} more chars)"


def preview(value: Any, limit: int = 120) -> str:
    """One line of compact JSON for `value`, at most about `limit` characters, for lists and tables."""
    if isinstance(value, str):
        # Twice the limit leaves room for whitespace that collapses below.
        text, clipped = value[: limit * 2], len(value) > limit * 2
    else:
        # A clipped container still serialises to more than `limit` characters, so the cut shows.
        text = json.dumps(json_safe(_head(value, limit)), ensure_ascii=False, separators=(",", ":"))
        clipped = False
    text = " ".join(text.split())
    if clipped or len(text) > limit:
        return text[:limit] + "…"
    return text


def _head(value: Any, limit: int, depth: int = 0) -> Any:
    """The start of `value`, enough to fill `limit` characters, so a preview of a huge value is cheap."""
    if depth >= MAX_DEPTH:
        return value
    if isinstance(value, str):
        return value[: limit + 1]
    if isinstance(value, dict):
        return {k: _head(v, limit, depth + 1) for k, v in itertools.islice(value.items(), limit)}
    if isinstance(value, (list, tuple)):
        return [_head(item, limit, depth + 1) for item in value[: limit]]
    return value
