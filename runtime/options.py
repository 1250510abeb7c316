"""Decorator arguments: their defaults, and checks that fail at decoration time with a clear message."""
from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Optional

from .spec import INPUT_KEYS, is_number, short_repr

DEFAULT_MAX_RESULT_CHARS = 30_000
DEFAULT_HEAD_RATIO = 0.7
EXPOSE_VALUES = ("io", "llm", "full", "hidden")
# What OpenAI and Anthropic accept as a tool name.
TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


@dataclass(frozen=True)
class ToolOptions:
    """How a function is offered to models as a tool (shared by @agentic_function and @function)."""

    as_tool: bool = True
    name: Optional[str] = None
    description: Optional[str] = None
    parameters: Optional[dict] = None
    label: Optional[str] = None
    toolset: tuple = ()
    unsafe_in: tuple = ()
    check_fn: Optional[Callable] = None
    requires_env: tuple = ()
    can_use: Optional[Callable] = None
    max_result_chars: int = DEFAULT_MAX_RESULT_CHARS
    persist_full: bool = False
    head_ratio: float = DEFAULT_HEAD_RATIO
    requires_approval: Any = None
    cache: bool = False
    cache_ttl: float = 300.0
    timeout: Optional[float] = None
    available_if: Optional[Callable] = None
    defer: bool = False
    register_globally: bool = True


TOOL_OPTION_NAMES = tuple(f.name for f in dataclasses.fields(ToolOptions))


def _names_tuple(value: Any, field: str) -> tuple:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (list, tuple, set, frozenset)) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ValueError(f"{field} must be a tuple of names (strings), got {value!r}")


def _callable_or_none(value: Any, field: str) -> None:
    if value is not None and not callable(value):
        raise ValueError(f"{field} must be a callable or None, got {value!r}")


def build_tool_options(given: dict) -> ToolOptions:
    unknown = sorted(set(given) - set(TOOL_OPTION_NAMES))
    if unknown:
        raise TypeError(f"unknown decorator argument(s) {', '.join(unknown)}; "
                        f"allowed: expose, render_range, input, system, budget, {', '.join(TOOL_OPTION_NAMES)}")
    values = dict(given)
    if values.get("max_result_chars") is None:
        values["max_result_chars"] = DEFAULT_MAX_RESULT_CHARS
    if values.get("head_ratio") is None:
        values["head_ratio"] = DEFAULT_HEAD_RATIO
    if values.get("cache_ttl") is None:
        values["cache_ttl"] = 300.0
    for field in ("toolset", "unsafe_in", "requires_env"):
        if field in values:
            values[field] = _names_tuple(values[field], field)
    for field in ("check_fn", "can_use", "available_if"):
        _callable_or_none(values.get(field), field)
    for field in ("as_tool", "persist_full", "cache", "defer", "register_globally"):
        if field in values and not isinstance(values[field], bool):
            raise ValueError(f"{field} must be True or False, got {values[field]!r}")
    for field in ("name", "description", "label"):
        if values.get(field) is not None and not isinstance(values[field], str):
            raise ValueError(f"{field} must be a string, got {values[field]!r}")
    name = values.get("name")
    if name is not None and not TOOL_NAME.fullmatch(name):
        raise ValueError(f"name must be 1 to 64 ASCII letters, digits, '_' or '-' (what model APIs accept "
                         f"as a tool name), got {name!r}")
    chars = values["max_result_chars"]
    if isinstance(chars, bool) or not isinstance(chars, int) or chars < 1:
        raise ValueError(f"max_result_chars must be a positive integer, got {chars!r}")
    ratio = values["head_ratio"]
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 <= ratio <= 1:
        raise ValueError(f"head_ratio must be a number from 0 to 1, got {ratio!r}")
    for field in ("cache_ttl", "timeout"):
        value = values.get(field)
        if value is not None and not (is_number(value) and value > 0):
            raise ValueError(f"{field} must be a positive number of seconds, got {short_repr(value)}")
    params = values.get("parameters")
    if params is not None and (not isinstance(params, dict) or params.get("type", "object") != "object"):
        raise ValueError("parameters must be a JSON-schema object ({'type': 'object', 'properties': {...}})")
    return ToolOptions(**values)


def check_expose(expose: Any) -> str:
    if expose not in EXPOSE_VALUES:
        raise ValueError(f"expose must be one of {', '.join(repr(v) for v in EXPOSE_VALUES)}; got {expose!r}")
    return expose


def _is_count(value: Any, minimum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def check_render_range(render_range: Any) -> Optional[dict]:
    """None, or {"callers": None | N >= 0, "subcalls": -1 | N >= 0} with missing keys defaulted."""
    if render_range is None:
        return None
    shape = 'render_range must be a dict like {"callers": None or N >= 0, "subcalls": -1 or N >= 0}'
    if not isinstance(render_range, dict):
        raise ValueError(f"{shape}; got {render_range!r}")
    unknown = set(render_range) - {"callers", "subcalls"}
    if unknown:
        raise ValueError(f"{shape}; unknown key(s) {', '.join(sorted(map(str, unknown)))}")
    callers = render_range.get("callers")
    subcalls = render_range.get("subcalls", -1)
    if callers is not None and not _is_count(callers, 0):
        raise ValueError(f"{shape}; callers={callers!r}")
    if not _is_count(subcalls, -1):
        raise ValueError(f"{shape}; subcalls={subcalls!r}")
    return {"callers": callers, "subcalls": subcalls}


def _check_range(param: str, meta: dict) -> None:
    for bound in ("minimum", "maximum"):
        value = meta.get(bound)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not math.isfinite(value)):
            raise ValueError(f"input[{param!r}][{bound!r}] must be a finite number, got {value!r}")
    if meta.get("minimum") is not None and meta.get("maximum") is not None and meta["minimum"] > meta["maximum"]:
        raise ValueError(f"input[{param!r}]: minimum {meta['minimum']!r} is above maximum {meta['maximum']!r}")
    length = meta.get("max_length")
    if length is not None and (isinstance(length, bool) or not isinstance(length, int) or length < 1):
        raise ValueError(f"input[{param!r}]['max_length'] must be a positive whole number, got {length!r}")


def check_input(input_meta: Any, parameter_names: list[str], defaults: dict) -> dict:
    """Per-parameter UI metadata: known keys only, each naming a real parameter."""
    if input_meta is None:
        return {}
    if not isinstance(input_meta, dict):
        raise ValueError(f"input must be a dict of parameter name -> metadata dict, got {input_meta!r}")
    for param, meta in input_meta.items():
        if param not in parameter_names:
            raise ValueError(f"input[{param!r}] names no parameter; parameters are: {', '.join(parameter_names) or 'none'}")
        if not isinstance(meta, dict):
            raise ValueError(f"input[{param!r}] must be a dict with keys {', '.join(sorted(INPUT_KEYS))}")
        unknown = set(meta) - INPUT_KEYS
        if unknown:
            raise ValueError(f"input[{param!r}] has unknown key(s) {', '.join(sorted(map(str, unknown)))}; "
                             f"allowed: {', '.join(sorted(INPUT_KEYS))}")
        for flag in ("multiline", "hidden"):
            if flag in meta and not isinstance(meta[flag], bool):
                raise ValueError(f"input[{param!r}][{flag!r}] must be True or False")
        for text in ("description", "placeholder"):
            if text in meta and not isinstance(meta[text], str):
                raise ValueError(f"input[{param!r}][{text!r}] must be a string")
        _check_range(param, meta)
        if "options" in meta and (not isinstance(meta["options"], (list, tuple)) or not meta["options"]):
            raise ValueError(f"input[{param!r}]['options'] must be a non-empty list of allowed values")
        if meta.get("hidden") and param not in defaults:
            raise ValueError(f"input[{param!r}] is hidden but the parameter has no default; "
                             f"a hidden parameter is never filled by a form or a model, so give it one")
    return {param: dict(meta) for param, meta in input_meta.items()}
