"""Values JSON lets a launch send that no response, page or database could carry, found wherever they hide.

A lone UTF-16 surrogate (`"\\ud800"`) is a valid JSON escape but not Unicode: UTF-8 cannot encode it, so
a message quoting it could not be sent. A number beyond the largest float (`1e400`) is valid JSON that
Python reads as infinity, which JSON cannot write back. NUL is valid in JSON text but not in PostgreSQL's.
The launch checks (`dag.runs.launch`, `dag.runs.model_choice`) use these to name the field that holds one.
"""
from __future__ import annotations

import math
import sys
from typing import Any, Callable, Optional

# The words of Django's own check on form fields, which the form gets before this.
NUL_PROBLEM = "Null characters are not allowed."
SURROGATE_PROBLEM = "is not valid Unicode: it holds a lone surrogate (half of a UTF-16 pair); send whole characters"
_LARGEST = f"{sys.float_info.max:.6g}"
NOT_FINITE_NUMBER = f"must be a finite number, from -{_LARGEST} to {_LARGEST}"
NOT_FINITE_INSIDE = f"must hold only finite numbers, from -{_LARGEST} to {_LARGEST}"


# The deepest nesting of objects and arrays any door takes (a launch's body, its arguments, a form's JSON).
MAX_DEPTH = 100


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


def first_leaf(value: Any, test: Callable[[Any], bool]) -> Any:
    """The first string, number or other scalar in `value` (keys included, at any depth) for which `test`
    is true, or None."""
    if isinstance(value, (dict, list, tuple)):
        items = value.items() if isinstance(value, dict) else value
        for item in items:
            found = first_leaf(list(item) if isinstance(value, dict) else item, test)
            if found is not None:
                return found
        return None
    return value if test(value) else None


def _not_unicode(item: Any) -> bool:
    """Whether `item` is a string holding a lone surrogate."""
    if not isinstance(item, str):
        return False
    try:
        item.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def lone_surrogate(value: Any) -> Optional[str]:
    """The first string in `value` that is not valid Unicode, quoted so the quote itself can be sent
    (repr() escapes surrogates), or None."""
    found = first_leaf(value, _not_unicode)
    return None if found is None else (repr(found) if len(found) <= 60 else repr(found[:60]) + "...")


def holds_nul(value: Any) -> bool:
    return first_leaf(value, lambda item: isinstance(item, str) and "\x00" in item) is not None


def _not_finite(item: Any) -> bool:
    return isinstance(item, float) and not math.isfinite(item)


def holds_non_finite(value: Any) -> bool:
    return first_leaf(value, _not_finite) is not None


def non_finite_problem(value: Any) -> Optional[str]:
    """Why `value` cannot be carried because it is, or holds, an infinite or NaN number; None if it need not.

    The number is quoted by repr(): the API's parser keeps the text that was sent (`1e400`, see
    `dag.api.parsers`), so the message quotes what the caller wrote rather than `inf`.
    """
    found = first_leaf(value, _not_finite)
    if found is None:
        return None
    return f"{NOT_FINITE_NUMBER if found is value else NOT_FINITE_INSIDE}, got {found!r}"
