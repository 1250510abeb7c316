"""JSON-schema tool specs from Python signatures, and validation of arguments against them.

One schema serves three readers: the model (tool spec), the web form (widgets and server-side
validation) and `fn.execute` (arguments from a model). Validation returns *all* problems by parameter,
so a form can show each beside its field, and coerces JSON values to the Python types the signature
asks for (a list to a tuple, a string to an Enum member).
"""
from __future__ import annotations

import enum
import inspect
import math
import types
import typing
from typing import Any, Literal, Optional, Union, get_args, get_origin

from .errors import ToolArgumentError

RUNTIME_PARAMS = ("runtime", "exec_runtime", "review_runtime")
INPUT_KEYS = frozenset({"description", "placeholder", "multiline", "options", "hidden", "minimum", "maximum",
                        "max_length"})
# `input` range keys and the JSON-schema keywords they become.
RANGE_KEYWORDS = {"minimum": "minimum", "maximum": "maximum", "max_length": "maxLength"}

_SIMPLE = {str: "string", int: "integer", float: "number", bool: "boolean", dict: "object",
           list: "array", tuple: "array", type(None): "null"}


def schema_for(annotation: Any) -> dict:
    """The JSON schema of one Python annotation (inspect.Parameter.empty and Any: unconstrained)."""
    if annotation is inspect.Parameter.empty or annotation is Any:
        return {}
    if annotation in _SIMPLE:
        return {"type": _SIMPLE[annotation]}
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        values = [member.value for member in annotation]
        return {**_type_of_values(values), "enum": values}
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Literal:
        values = list(args)
        return {**_type_of_values(values), "enum": values}
    if origin in (Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        nullable = len(members) < len(args)
        inner = schema_for(members[0]) if len(members) == 1 else {"anyOf": [schema_for(a) for a in members]}
        return _nullable(inner) if nullable else inner
    if origin in (list, typing.List, set, frozenset):
        return {"type": "array", "items": schema_for(args[0])} if args else {"type": "array"}
    if origin in (tuple, typing.Tuple):
        if len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": schema_for(args[0])}
        if args:
            return {"type": "array", "prefixItems": [schema_for(a) for a in args],
                    "minItems": len(args), "maxItems": len(args)}
        return {"type": "array"}
    if origin in (dict, typing.Dict):
        if len(args) == 2:
            return {"type": "object", "additionalProperties": schema_for(args[1])}
        return {"type": "object"}
    if isinstance(annotation, type):
        raise ValueError(f"no JSON schema for type {annotation.__name__}; use str, int, float, bool, "
                         f"list, tuple, dict, Optional, Literal or an Enum")
    return {}


def _type_of_values(values: list) -> dict:
    kinds = {_SIMPLE.get(type(v)) for v in values}
    return {"type": kinds.pop()} if len(kinds) == 1 and None not in kinds else {}


def _nullable(schema: dict) -> dict:
    if isinstance(schema.get("type"), str) and "anyOf" not in schema:
        out = {**schema, "type": [schema["type"], "null"]}
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
        return out
    return {"anyOf": [schema, {"type": "null"}]}


def coerce_option(value: Any, annotation: Any, where: str) -> Any:
    """Coerce one `options` entry to the parameter's type, or say why it cannot be."""
    target = _base_type(annotation)
    if target is None or isinstance(value, target) and not (target is int and isinstance(value, bool)):
        return value.value if isinstance(value, enum.Enum) else value
    try:
        if isinstance(target, type) and issubclass(target, enum.Enum):
            return target(value).value
        if target is bool:
            if str(value).lower() in ("true", "1", "yes", "on"):
                return True
            if str(value).lower() in ("false", "0", "no", "off"):
                return False
            raise ValueError(value)
        return target(value)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: option {value!r} is not a valid {getattr(target, '__name__', target)}")


def _base_type(annotation: Any):
    origin, args = get_origin(annotation), get_args(annotation)
    if origin in (Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        return _base_type(members[0]) if len(members) == 1 else None
    if annotation in (str, int, float, bool) or (isinstance(annotation, type) and issubclass(annotation, enum.Enum)):
        return annotation
    return None


def build_parameters(signature: inspect.Signature, hints: dict, input_meta: dict, skip_first: bool) -> dict:
    """The `parameters` object of a tool spec."""
    properties: dict[str, dict] = {}
    required: list[str] = []
    additional = False
    for index, (name, param) in enumerate(signature.parameters.items()):
        if skip_first and index == 0:
            continue
        if param.kind is param.VAR_KEYWORD:
            additional = True
            continue
        if param.kind is param.VAR_POSITIONAL or name in RUNTIME_PARAMS:
            continue
        meta = input_meta.get(name, {})
        if meta.get("hidden"):
            continue
        annotation = hints.get(name, param.annotation)
        try:
            prop = dict(schema_for(annotation))
        except ValueError as exc:
            raise ValueError(f"parameter {name!r}: {exc}") from None
        if meta.get("description"):
            prop["description"] = meta["description"]
        prop.update({keyword: meta[key] for key, keyword in RANGE_KEYWORDS.items() if key in meta})
        if "options" in meta:
            values = [coerce_option(v, annotation, f"input[{name!r}]") for v in meta["options"]]
            prop["enum"] = values
            if "type" not in prop:
                prop.update(_type_of_values(values))
        if param.default is not param.empty:
            default = param.default.value if isinstance(param.default, enum.Enum) else param.default
            if isinstance(default, tuple):
                default = list(default)
            if _is_json(default):
                prop["default"] = default
        else:
            required.append(name)
        properties[name] = prop
    parameters = {"type": "object", "properties": properties, "required": required}
    if not additional:
        parameters["additionalProperties"] = False
    return parameters


def _is_json(value: Any) -> bool:
    if value is None or isinstance(value, (str, int, float, bool)):
        return True
    if isinstance(value, list):
        return all(_is_json(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_json(v) for k, v in value.items())
    return False


# --- validation -------------------------------------------------------------------------------

def is_number(value: Any) -> bool:
    """A finite number a float can hold: Python's JSON reader takes NaN and Infinity, which JSON has not,
    and an integer of 400 digits would fail its conversion to float."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


_TYPE_CHECKS = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": is_number,
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, (list, tuple)),
    "object": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
}
_TYPE_WORDS = {"string": "a string", "integer": "an integer", "number": "a number",
               "boolean": "true or false", "array": "a list", "object": "an object", "null": "null"}


def schema_problem(value: Any, schema: dict) -> Optional[str]:
    """Why `value` does not fit `schema` (a JSON-schema subset), or None if it fits."""
    if "anyOf" in schema:
        problems = [schema_problem(value, option) for option in schema["anyOf"]]
        if all(p is not None for p in problems):
            return " or ".join(p for p in problems if p)
        return range_problem(value, schema)
    expected = schema.get("type")
    if expected is not None:
        kinds = expected if isinstance(expected, list) else [expected]
        if not any(_TYPE_CHECKS[k](value) for k in kinds if k in _TYPE_CHECKS):
            words = " or ".join(_TYPE_WORDS.get(k, k) for k in kinds)
            return f"expected {words}, got {_describe(value)}"
    if "enum" in schema and value not in schema["enum"]:
        allowed = ", ".join(repr(v) for v in schema["enum"])
        return f"must be one of {allowed}; got {value!r}"
    problem = range_problem(value, schema)
    if problem:
        return problem
    if isinstance(value, (list, tuple)):
        if "prefixItems" in schema:
            items = schema["prefixItems"]
            if len(value) != len(items):
                return f"expected a list of {len(items)} items, got {len(value)}"
            for i, (item, sub) in enumerate(zip(value, items)):
                problem = schema_problem(item, sub)
                if problem:
                    return f"item {i}: {problem}"
        elif "items" in schema:
            for i, item in enumerate(value):
                problem = schema_problem(item, schema["items"])
                if problem:
                    return f"item {i}: {problem}"
    if isinstance(value, dict) and isinstance(schema.get("additionalProperties"), dict):
        for key, item in value.items():
            problem = schema_problem(item, schema["additionalProperties"])
            if problem:
                return f"key {key!r}: {problem}"
    return None


def range_problem(value: Any, schema: dict) -> Optional[str]:
    """Why a number is outside `minimum`..`maximum`, or a string longer than `maxLength`; None if neither."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        low, high = schema.get("minimum"), schema.get("maximum")
        if (low is not None and value < low) or (high is not None and value > high):
            if low is not None and high is not None:
                return f"must be from {_num(low)} to {_num(high)}, got {_num(value)}"
            return f"must be at least {_num(low)}, got {_num(value)}" if low is not None else \
                f"must be at most {_num(high)}, got {_num(value)}"
    if isinstance(value, str) and schema.get("maxLength") is not None and len(value) > schema["maxLength"]:
        return f"must be at most {schema['maxLength']} characters, got {len(value)}"
    return None


def _num(value: float) -> str:
    return str(value) if isinstance(value, int) else f"{value:g}"


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    return f"{type(value).__name__} {short_repr(value)}"


def about_digits(value: int) -> int:
    """About how many decimal digits `value` has, without the conversion to text (refused past 4,300)."""
    return math.floor(value.bit_length() * math.log10(2))


def short_repr(value: Any, limit: int = 40) -> str:
    """`repr(value)` cut to `limit` characters; an int too long for repr (past 4,300 digits) by its size."""
    if isinstance(value, int) and value.bit_length() > 14_000:
        return f"<about {about_digits(value):,} digits>"
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def argument_errors(parameters: dict, arguments: Any) -> dict[str, list[str]]:
    """Every problem with `arguments` against a tool's `parameters` schema, by parameter name.

    Problems not about one parameter (arguments not an object) are filed under "__all__".
    """
    if not isinstance(arguments, dict):
        return {"__all__": [f"arguments must be an object of parameter names to values, got {_describe(arguments)}"]}
    properties = parameters.get("properties", {})
    errors: dict[str, list[str]] = {}
    for name in parameters.get("required", []):
        if name not in arguments:
            errors.setdefault(name, []).append("this argument is required")
    allow_extra = parameters.get("additionalProperties", True) is not False
    for name, value in arguments.items():
        if name not in properties:
            if not allow_extra:
                known = ", ".join(properties) or "none"
                errors.setdefault(name, []).append(f"unknown argument; expected one of: {known}")
            continue
        problem = schema_problem(value, properties[name])
        if problem:
            errors.setdefault(name, []).append(problem)
    return errors


def raise_for_errors(tool_name: str, errors: dict[str, list[str]]) -> None:
    """Raise ToolArgumentError for the first problem, naming the tool and parameter."""
    if not errors:
        return
    param, messages = next(iter(errors.items()))
    where = f"tool {tool_name!r}" if param == "__all__" else f"argument {param!r} of tool {tool_name!r}"
    more = f" (and {sum(len(m) for m in errors.values()) - 1} more problem(s))" if len(errors) > 1 or len(messages) > 1 else ""
    raise ToolArgumentError(f"{where}: {messages[0]}{more}", tool=tool_name,
                            param=None if param == "__all__" else param)


def to_python(value: Any, annotation: Any) -> Any:
    """Turn a validated JSON value into what the annotation asks for (tuples, Enum members)."""
    if value is None or annotation is inspect.Parameter.empty or annotation is Any:
        return value
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return value if isinstance(value, annotation) else annotation(value)
    origin, args = get_origin(annotation), get_args(annotation)
    if origin in (Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        return to_python(value, members[0]) if len(members) == 1 else value
    if annotation is tuple and isinstance(value, list):
        return tuple(value)
    if origin in (tuple, typing.Tuple) and isinstance(value, (list, tuple)):
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(to_python(v, args[0]) for v in value)
        if args:
            return tuple(to_python(v, a) for v, a in zip(value, args))
        return tuple(value)
    if origin in (list, typing.List) and isinstance(value, (list, tuple)) and args:
        return [to_python(v, args[0]) for v in value]
    if origin in (set, frozenset) and isinstance(value, (list, tuple)):
        return origin(to_python(v, args[0]) if args else v for v in value)
    if annotation is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value
