"""JSON text of recorded values, as `json.dumps` writes it, for the recording hot path.

Every recorded node is encoded three times: its input and output for the database, and the whole node
for the live stream. `json.dumps` builds a new encoder for every call, which costs more than encoding a
small value; the encoders here are built once. They skip the circular-reference check: what they are
given is either `values.json_safe` output (fresh containers, nesting capped, so no cycle can occur) or
a node or session record built from it; a cycle anyway would end in RecursionError, not a hang.

Without CPython's C encoder (another interpreter), `json.dumps` itself is used.

The live stream's compact JSON (`dumps_compact`: every node record a viewer is sent, encoded once per
change) is written by orjson, about five times faster than the C encoder on a record; where orjson
would write something else than ASCII JSON of the same value (non-ASCII text, which the frames must
escape to keep a frame's size in characters its size in bytes; an integer beyond 64 bits; a key that is
not text) the standard encoder writes it. Both give the same value back when parsed; the text may
differ in how a float's exponent is spelled (1e-07 or 1e-7), and a NaN or an infinity, which no JSON
parser takes (a browser's `JSON.parse` refuses the whole frame), is written as null.
"""
from __future__ import annotations

import json
import math
from functools import partial
from json import encoder as _encoder
from typing import Any, Callable

import orjson


def _c_encoder(*, default: Callable, separators: tuple[str, str], allow_nan: bool = True
               ) -> Callable[[Any], str] | None:
    make = getattr(_encoder, "c_make_encoder", None)
    if make is None:
        return None
    key_separator = separators[1]
    item_separator = separators[0]
    encode = make(None, default, _encoder.encode_basestring_ascii, None, key_separator, item_separator,
                  False, False, allow_nan)  # sort_keys, skipkeys off; NaN allowed unless told, as json.dumps
    return lambda value: "".join(encode(value, 0))


def _refuse(value: Any):
    raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")


def _with_fallback(fast: Callable[[Any], str] | None, slow: Callable[[Any], str]) -> Callable[[Any], str]:
    if fast is None:
        return slow

    def dumps(value: Any) -> str:
        # A bare string is encoded by the C encoder's caller in `json.dumps`, not by the encoder itself.
        if isinstance(value, str):
            return _encoder.encode_basestring_ascii(value)
        return fast(value)
    return dumps


# `json.dumps(value)`: what Django's JSONField stores ("a": 1, spaces after separators, ASCII).
dumps = _with_fallback(_c_encoder(default=_refuse, separators=(", ", ": ")), json.dumps)


def _as_standard(value: Any) -> Any:
    """`default` of the stream's encoders: a float or tuple subclass (which orjson hands here, and the
    standard encoder writes as a number or a list) as the standard encoder writes it; anything else
    unknown as its `str()`."""
    if isinstance(value, float):
        return float(value)
    if isinstance(value, tuple):
        return list(value)
    return str(value)


# `json.dumps(value, ensure_ascii=True, separators=(",", ":"), default=str)`: the live stream's frames.
# NaN and the infinities refused (ValueError), to be written as null.
_standard_compact = _with_fallback(
    _c_encoder(default=_as_standard, separators=(",", ":"), allow_nan=False),
    partial(json.dumps, ensure_ascii=True, separators=(",", ":"), default=_as_standard, allow_nan=False))
# Types orjson writes itself that `default=str` writes otherwise (a datetime's str has a space, not a
# T; a dataclass is its repr): handed to `default` as the standard encoder would.
_ORJSON_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS


def dumps_compact(value: Any) -> str:
    """`value` as compact ASCII JSON, unknown types as their `str()`: what `_standard_compact` writes,
    parsed back (see the module), at orjson's speed. Made for JSON values (what `values.json_safe`
    gives, and records built from it): an Enum is written as its value here, as its `str()` where the
    standard encoder writes it."""
    try:
        encoded = orjson.dumps(value, default=_as_standard, option=_ORJSON_OPTIONS)
    except TypeError:  # orjson's JSONEncodeError: an int beyond 64 bits, a key that is not text, ...
        return _standard(value)
    if encoded.isascii():
        return encoded.decode("ascii")
    return _standard(value)  # escapes what is not ASCII


def _standard(value: Any) -> str:
    try:
        return _standard_compact(value)
    except ValueError:  # a NaN or an infinity: null, as orjson writes it
        return _standard_compact(_finite(value))


def _finite(value: Any) -> Any:
    """`value` with every NaN and infinity in its lists and dicts as None, and as text where it is a key
    (a rare value: the encoder met one); other types as they are, for `default`."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    if isinstance(value, dict):
        return {(repr(key) if isinstance(key, float) and not math.isfinite(key) else key): _finite(item)
                for key, item in value.items()}
    return value
