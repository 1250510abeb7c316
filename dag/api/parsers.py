"""The API's JSON parser: DRF's, refusing JSON nested too deep with a 400 that says so.

Python's JSON decoder raises RecursionError at about 1,000 levels, and data a little less deep still
overflows the stack in the recursive checks and writes after parsing: a 500 either way. No launch
argument or login needs more than a few levels, so the whole body is limited to MAX_DEPTH.
"""
from __future__ import annotations

from rest_framework import parsers
from rest_framework.exceptions import ParseError

MAX_DEPTH = 100
TOO_DEEP = f"JSON parse error - nested deeper than {MAX_DEPTH} levels of objects and arrays; send flatter data"


def nested_deeper_than(value, limit: int) -> bool:
    """Whether `value` nests objects and arrays more than `limit` levels deep (without recursing)."""
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, (dict, list)):
            if depth > limit:
                return True
            pending.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return False


class JSONParser(parsers.JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(TOO_DEEP) from None
        if nested_deeper_than(data, MAX_DEPTH):
            raise ParseError(TOO_DEEP)
        return data
