"""JSON text of recorded values, as `json.dumps` writes it, for the recording hot path.

Every recorded node is encoded three times: its input and output for the database, and the whole node
for the live stream. `json.dumps` builds a new encoder for every call, which costs more than encoding a
small value; the encoders here are built once. They skip the circular-reference check: what they are
given is either `values.json_safe` output (fresh containers, nesting capped, so no cycle can occur) or
a node or session record built from it; a cycle anyway would end in RecursionError, not a hang.

Without CPython's C encoder (another interpreter), `json.dumps` itself is used.
"""
from __future__ import annotations

import json
from functools import partial
from json import encoder as _encoder
from typing import Any, Callable


def _c_encoder(*, default: Callable, separators: tuple[str, str]) -> Callable[[Any], str] | None:
    make = getattr(_encoder, "c_make_encoder", None)
    if make is None:
        return None
    key_separator = separators[1]
    item_separator = separators[0]
    encode = make(None, default, _encoder.encode_basestring_ascii, None, key_separator, item_separator,
                  False, False, True)  # sort_keys, skipkeys off; NaN allowed, as json.dumps
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
# `json.dumps(value, ensure_ascii=True, separators=(",", ":"), default=str)`: the live stream's frames.
dumps_compact = _with_fallback(_c_encoder(default=str, separators=(",", ":")),
                               partial(json.dumps, ensure_ascii=True, separators=(",", ":"), default=str))
