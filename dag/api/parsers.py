"""The API's JSON parser: DRF's, refusing JSON nested too deep with a 400 that says so, and keeping the text
of a number too large for a float.

Python's JSON decoder raises RecursionError at about 1,000 levels, and data a little less deep still
overflows the stack in the recursive checks and writes after parsing: a 500 either way. No launch
argument or login needs more than a few levels, so the whole body is limited to MAX_DEPTH.

An integer longer than Python converts from text (4,300 digits, sys.get_int_max_str_digits) is a 400
naming where it is in the body; Python's own message tells the server's operator to raise the limit.
"""
from __future__ import annotations

import codecs
import math
import sys

from rest_framework import parsers
from rest_framework.exceptions import ParseError
from rest_framework.utils import json

from ..runs.launch_values import MAX_DEPTH, nested_deeper_than

TOO_DEEP = f"JSON parse error - nested deeper than {MAX_DEPTH} levels of objects and arrays; send flatter data"


class OutOfRangeNumber(float):
    """A JSON number beyond a float's range, e.g. 1e400: infinity, as Python reads it, but written as sent, so
    the launch checks that refuse it (`dag.runs.launch_values`) quote what the caller wrote, not "inf"."""

    def __new__(cls, literal: str):
        number = super().__new__(cls, literal)
        number.literal = literal
        return number

    def __repr__(self) -> str:
        return self.literal

    __str__ = __repr__


def parse_float(literal: str) -> float:
    number = float(literal)
    return number if math.isfinite(number) else OutOfRangeNumber(literal)


class TooManyDigits:
    """Stands, while the body is parsed, for an integer with more digits than int() reads from text."""

    def __init__(self, literal: str):
        self.digits = len(literal.lstrip("-"))


def parse_int(literal: str) -> int | TooManyDigits:
    limit = sys.get_int_max_str_digits()
    return TooManyDigits(literal) if limit and len(literal.lstrip("-")) > limit else int(literal)


def too_many_digits(data) -> str | None:
    """The 400's text if `data` holds a TooManyDigits: which value it is (e.g. "args.text") and its size."""
    pending = [(data, "")]
    while pending:
        item, where = pending.pop()
        if isinstance(item, TooManyDigits):
            return (f"JSON parse error - the number at {where or 'the top of the body'} has {item.digits:,} digits; "
                    f"the most this server reads is {sys.get_int_max_str_digits():,}")
        if isinstance(item, dict):
            pending.extend((child, f"{where}.{key}" if where else str(key)) for key, child in item.items())
        elif isinstance(item, list):
            pending.extend((child, f"{where}[{index}]") for index, child in enumerate(item))
    return None


class JSONParser(parsers.JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        # DRF's parse, with parse_float: where Python's json turns 1e400 into infinity; and parse_int,
        # where it raises for an integer past the digit limit.
        encoding = parsers.get_encoding((parser_context or {}))
        found_too_long = []

        def parse_int_noting(literal: str):
            number = parse_int(literal)
            if isinstance(number, TooManyDigits):
                found_too_long.append(number)
            return number

        try:
            data = json.load(codecs.getreader(encoding)(stream), parse_float=parse_float, parse_int=parse_int_noting,
                             parse_constant=json.strict_constant if self.strict else None)
        except RecursionError:
            raise ParseError(TOO_DEEP) from None
        except ValueError as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
        if nested_deeper_than(data, MAX_DEPTH):
            raise ParseError(TOO_DEEP)
        if found_too_long:
            raise ParseError(too_many_digits(data))
        return data
