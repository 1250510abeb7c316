"""A launch form generated from a function's spec and `input` metadata, validated with the same schema.

Widget rules, per parameter in signature order (hidden parameters are not in the spec, so never here;
their defaults apply): `options` -> select, `multiline` -> textarea, bool -> checkbox, int/float -> number
input, list -> textarea with one item per line, anything else structured -> JSON textarea, otherwise a
text input. `placeholder` and `description` (help text) come from the metadata, defaults are prefilled,
and for an Optional parameter an empty field means None.

Django only reads the raw text here; turning text into JSON values and every check after that is ours, so
the form reports exactly what the API and a model would be told (`runtime.spec.argument_errors`).
"""
from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass, field
from typing import Any

from django import forms

from ..api.parsers import MAX_DEPTH, nested_deeper_than
from ..runs.launch import argument_problems

OMIT = object()  # "leave this argument out" (a required one: the schema check then says so)

_NUMBER_WORDS = {"integer": "an integer", "number": "a number"}


class FormValueError(ValueError):
    pass


@dataclass(frozen=True)
class Param:
    """One parameter as the form sees it."""

    name: str
    schema: dict
    meta: dict = field(default_factory=dict)
    required: bool = False

    @property
    def types(self) -> set[str]:
        declared = self.schema.get("type")
        if isinstance(declared, list):
            return set(declared)
        if declared:
            return {declared}
        return {option.get("type") for option in self.schema.get("anyOf", []) if option.get("type")}

    @property
    def nullable(self) -> bool:
        return "null" in self.types

    @property
    def base_type(self) -> str | None:
        """The one non-null JSON type, or None when there is none or several (edited as JSON)."""
        kinds = self.types - {"null"}
        return kinds.pop() if len(kinds) == 1 else None

    @property
    def kind(self) -> str:
        if "enum" in self.schema:
            return "choice"
        return {"boolean": "bool", "integer": "integer", "number": "number", "array": "list",
                "string": "text"}.get(self.base_type, "json")

    @property
    def has_default(self) -> bool:
        return "default" in self.schema

    @property
    def item_type(self) -> str | None:
        items = self.schema.get("items") or _non_null_option(self.schema).get("items") or {}
        return items.get("type") if isinstance(items.get("type"), str) else None


def _non_null_option(schema: dict) -> dict:
    for option in schema.get("anyOf", []):
        if option.get("type") != "null":
            return option
    return {}


def parameters_of(tool) -> list[Param]:
    spec = tool.spec["parameters"]
    required = set(spec.get("required", []))
    return [Param(name, schema, tool.input.get(name, {}), name in required)
            for name, schema in spec.get("properties", {}).items()]


# --- values between JSON and form text ---------------------------------------------------------

def choice_key(value: Any) -> str:
    """The text an option travels as in the page: strings as they are, other values as JSON."""
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value)


def to_form_text(param: Param, value: Any) -> Any:
    """How a JSON value is shown in the parameter's widget (for defaults and "run again")."""
    if param.kind == "bool":
        return bool(value)
    if value is None:
        return ""
    if param.kind == "choice":
        return choice_key(value)
    if param.kind == "list" and isinstance(value, list):
        return "\n".join(item if isinstance(item, str) else json.dumps(item) for item in value)
    if param.kind in ("text", "integer", "number"):
        return str(value)
    return json.dumps(value, indent=2, ensure_ascii=False)


def _number(text: str, json_type: str, where: str = "") -> Any:
    try:
        number = int(text) if json_type == "integer" else float(text)
    except ValueError:
        raise FormValueError(f"{where}expected {_NUMBER_WORDS[json_type]}, got {text!r}") from None
    # float() reads "inf", "nan" and "1e999", which JSON (and so the API and the database) cannot hold.
    if not math.isfinite(number):
        raise FormValueError(f"{where}expected a finite number, got {text!r}")
    return number


def _json(text: str, where: str = "") -> Any:
    def not_finite(literal: str):
        raise FormValueError(f"{where}expected finite numbers, got {literal}")

    too_deep = f"{where}nested deeper than {MAX_DEPTH} levels of objects and arrays; enter flatter data"
    try:
        # Python's json reads NaN and Infinity, and 1e999 as infinity; the API's strict parser does not.
        value = json.loads(text, parse_constant=not_finite,
                           parse_float=lambda literal: _number(literal, "number", where))
    except json.JSONDecodeError as exc:
        raise FormValueError(f"{where}not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except FormValueError:  # a number refused by the parse hooks above: already says what is wrong
        raise
    except ValueError:  # the only other: an integer longer than Python converts (sys.get_int_max_str_digits)
        raise FormValueError(f"{where}a whole number longer than {sys.get_int_max_str_digits():,} digits; "
                             f"enter a shorter one") from None
    except RecursionError:
        raise FormValueError(too_deep) from None
    # The API's limit: deeper data overflows the stack in the checks and writes after parsing.
    if nested_deeper_than(value, MAX_DEPTH):
        raise FormValueError(too_deep)
    return value


def _list_item(line: str, item_type: str | None, number: int) -> Any:
    where = f"line {number}: "
    if item_type in _NUMBER_WORDS:
        return _number(line, item_type, where)
    if item_type in ("string", None):
        return line
    if item_type == "boolean":
        return {"true": True, "false": False}.get(line.lower(), line)  # anything else: the schema says why
    return _json(line, where)


def from_form_text(param: Param, text: Any) -> Any:
    """The JSON value a widget's text stands for, OMIT to leave the argument out, or FormValueError."""
    if param.kind == "bool":
        return bool(text)
    text = "" if text is None else text
    if text.strip() == "":
        if param.nullable:
            return None
        if param.required:
            return OMIT  # the schema check reports it as required, in the same words as the API
        if not param.has_default:
            return OMIT  # its default is not JSON, so the form could not show it: the function's applies
        if param.kind == "text":
            return text  # an emptied text field is an edit, not a request for the default
        if param.kind == "list":
            return []
        # A cleared number or JSON field has no "empty" value; quietly running with the default would
        # ignore the edit, so say what to enter instead.
        raise FormValueError(f"enter a value; the default is {json.dumps(param.schema['default'])}")
    if param.kind == "choice":
        for option in param.schema["enum"]:
            if choice_key(option) == text:
                return option
        allowed = ", ".join(repr(option) for option in param.schema["enum"])
        raise FormValueError(f"must be one of {allowed}; got {text!r}")  # the schema's own wording
    if param.kind in _NUMBER_WORDS:
        return _number(text.strip(), param.kind if param.kind == "integer" else "number")
    if param.kind == "list":
        lines = [line.strip() for line in text.splitlines()]
        return [_list_item(line, param.item_type, i) for i, line in enumerate(lines, 1) if line]
    if param.kind == "json":
        return _json(text)
    return text


# --- the form ----------------------------------------------------------------------------------

def _widget(param: Param) -> forms.Widget:
    attrs: dict[str, Any] = {}
    if param.meta.get("placeholder"):
        attrs["placeholder"] = param.meta["placeholder"]
    if param.required and param.kind != "bool":
        attrs["required"] = True
    if param.kind == "bool":
        return forms.CheckboxInput(attrs=attrs)
    if param.kind == "choice":
        choices = [(choice_key(option), choice_key(option) or "(none)") for option in param.schema["enum"]]
        if param.required and not param.has_default:
            choices.insert(0, ("", "— choose —"))
        return forms.Select(attrs=attrs, choices=choices)
    if param.kind in _NUMBER_WORDS:
        attrs["step"] = "1" if param.kind == "integer" else "any"
        for bound, keyword in (("min", "minimum"), ("max", "maximum")):
            if keyword in param.schema:
                attrs[bound] = param.schema[keyword]
        return forms.NumberInput(attrs=attrs)
    if "maxLength" in param.schema:
        attrs["maxlength"] = param.schema["maxLength"]
    if param.kind in ("list", "json") or param.meta.get("multiline"):
        attrs.setdefault("rows", 4 if param.kind == "list" else 6)
        return forms.Textarea(attrs=attrs)
    return forms.TextInput(attrs=attrs)


def _help_text(param: Param) -> str:
    parts = [param.meta.get("description") or param.schema.get("description") or ""]
    if param.kind == "list":
        parts.append("One item per line.")
    elif param.kind == "json":
        parts.append("A JSON value.")
    if param.nullable and param.kind != "bool":
        parts.append("Leave empty for none.")
    return " ".join(part for part in parts if part)


def _form_field(param: Param) -> forms.Field:
    common = {"required": False, "label": param.name.replace("_", " ").capitalize(),
              "help_text": _help_text(param), "widget": _widget(param)}
    if param.kind == "bool":
        return forms.BooleanField(**common)
    # Single-line text is trimmed; textareas keep what was typed (indentation can matter there).
    strip = not isinstance(common["widget"], forms.Textarea)
    return forms.CharField(strip=strip, **common)


class LaunchForm(forms.Form):
    """The launch form of one function. After `is_valid()`, `args` holds the JSON arguments to launch with."""

    def __init__(self, tool, data=None, initial_args: dict | None = None):
        self.tool = tool
        self.params = parameters_of(tool)
        prefill = {param.name: param.schema["default"] for param in self.params if param.has_default}
        prefill.update({k: v for k, v in (initial_args or {}).items()
                        if any(param.name == k for param in self.params)})
        initial = {param.name: to_form_text(param, prefill[param.name])
                   for param in self.params if param.name in prefill}
        super().__init__(data=data, initial=initial)
        for param in self.params:
            self.fields[param.name] = _form_field(param)
        self.args: dict[str, Any] = {}

    def clean(self):
        cleaned = super().clean()
        args: dict[str, Any] = {}
        for param in self.params:
            if param.name not in cleaned:
                continue
            try:
                value = from_form_text(param, cleaned[param.name])
            except FormValueError as exc:
                self.add_error(param.name, str(exc))
                continue
            if value is not OMIT:
                args[param.name] = value
        for name, messages in argument_problems(self.tool, args).items():
            if name in self.errors:
                continue  # its text could not be read; that error says more than the schema would
            for message in messages:
                self.add_error(name if name in self.fields else None, message)
        self.args = args
        return cleaned
