"""A launch form generated from a function's spec and `input` metadata, validated with the same schema.

Widget rules, per parameter in signature order (hidden parameters are not in the spec, so never here;
their defaults apply): `options` -> select, `multiline` -> textarea, bool -> checkbox (an Optional bool:
a select of none / yes / no), int/float -> number input, a list of one plain type (str, int, float or
bool items) -> textarea with one item per line, anything else structured (tuples of fixed size, lists
of mixed or Optional items, untyped lists, objects) -> JSON textarea, otherwise a text input.
`placeholder` and `description` (help text) come from the metadata, defaults are prefilled, and for an
Optional parameter an empty field means None (a select offers "(none)" for it instead; when "" is
itself one of the options, that option wins the empty value).

"Run again" must send back exactly what the session ran with, so a list value is shown one item per
line only if reading those lines back gives the same list (`_lines_read_back`); otherwise, such as a
string item holding a line break, padded with spaces, or empty, that list is shown as a JSON textarea,
and a hidden `lists-as-json` input naming the parameter tells the submitted form to read it as JSON.

Django only reads the raw text here; turning text into JSON values and every check after that is ours, so
the form reports exactly what the API and a model would be told (`runtime.spec.argument_errors`). Numbers
are read as JSON writes them: ASCII digits, no `1_000`, no `inf`.
"""
from __future__ import annotations

import json
import math
import re
import sys
from dataclasses import dataclass, field, replace
from typing import Any

from django import forms

from runtime.spec import short_repr

from ..runs.launch import argument_problems
from ..runs.launch_values import MAX_DEPTH, nested_deeper_than

OMIT = object()  # "leave this argument out" (a required one: the schema check then says so)

_NUMBER_WORDS = {"integer": "an integer", "number": "a number"}
# Numbers as JSON writes them (a sign and leading zeros allowed, which say nothing else): int() and
# float() also read "1_000", non-ASCII digits and "inf", which the API never receives as numbers.
_NUMBER_TEXT = {"integer": re.compile(r"[+-]?[0-9]+"),
                "number": re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?")}
_NOT_FINITE_WORDS = {"inf", "infinity", "nan"}
# The item types a list can be edited as one item per line; any other list is edited as JSON.
_LINE_ITEM_TYPES = {"string", "integer", "number", "boolean"}
# The hidden input naming the list parameters a form shows as JSON (a hyphen: no parameter is called so).
LISTS_AS_JSON = "lists-as-json"
# A nullable bool's select: its values as they travel in the page.
_NULLABLE_BOOL_KEYS = {"": None, "true": True, "false": False}


class FormValueError(ValueError):
    pass


@dataclass(frozen=True)
class Param:
    """One parameter as the form sees it."""

    name: str
    schema: dict
    meta: dict = field(default_factory=dict)
    required: bool = False
    # A list of plain items whose value one item per line would change: edited as JSON instead.
    list_as_json: bool = False

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
        if self.base_type == "array":
            return "list" if self.item_type in _LINE_ITEM_TYPES and not self.list_as_json else "json"
        return {"boolean": "bool", "integer": "integer", "number": "number",
                "string": "text"}.get(self.base_type, "json")

    @property
    def has_default(self) -> bool:
        return "default" in self.schema

    @property
    def item_type(self) -> str | None:
        """The one JSON type of every item, or None (untyped, mixed or Optional items, or a tuple of fixed
        size, whose `prefixItems` type each place)."""
        array = _non_null_option(self.schema) if "anyOf" in self.schema else self.schema
        items = array.get("items")
        if "prefixItems" in array or not isinstance(items, dict):
            return None
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


def choice_options(param: Param) -> list[tuple[str, Any]]:
    """(text in the page, option) for each option whose text no earlier option took: None travels as "",
    so where "" is itself an option, that option is the one an empty select means."""
    options: dict[str, Any] = {}
    for option in param.schema["enum"]:
        options.setdefault(choice_key(option), option)
    return list(options.items())


def to_form_text(param: Param, value: Any) -> Any:
    """How a JSON value is shown in the parameter's widget (for defaults and "run again")."""
    if param.kind == "bool":
        if param.nullable:  # a value of another type (an edited session's) shows as none
            return "true" if value is True else "false" if value is False else ""
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


def _lines_read_back(param: Param, value: Any) -> bool:
    """Whether showing `value` one item per line and reading the lines back gives `value` again: not for
    a string item with a line break, spaces at either end or no text (lines are split, trimmed, and empty
    ones skipped), nor for a value that is not a list of the item type."""
    try:
        return from_form_text(param, to_form_text(param, value)) == value
    except FormValueError:
        return False


def _number(text: str, json_type: str, where: str = "") -> Any:
    if not _NUMBER_TEXT[json_type].fullmatch(text):
        if json_type == "number" and text.lstrip("+-").lower() in _NOT_FINITE_WORDS:
            raise FormValueError(f"{where}expected a finite number, got {short_repr(text)}")
        raise FormValueError(f"{where}expected {_NUMBER_WORDS[json_type]}, got {short_repr(text)}")
    if json_type == "integer":
        try:
            return int(text)
        except ValueError:  # more digits than Python converts (sys.get_int_max_str_digits)
            raise FormValueError(f"{where}expected an integer of at most {sys.get_int_max_str_digits():,} "
                                 f"digits, got one of {len(text.lstrip('+-')):,} digits") from None
    number = float(text)
    # float() makes "1e999" infinity, which JSON (and so the API and the database) cannot hold.
    if not math.isfinite(number):
        raise FormValueError(f"{where}expected a finite number, got {short_repr(text)}")
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
    if item_type == "boolean":
        return {"true": True, "false": False}.get(line.lower(), line)  # anything else: the schema says why
    return line  # a string (the only other type a list is edited one item per line as)


def _nullable_bool(text: str) -> Any:
    try:
        return _NULLABLE_BOOL_KEYS[text.lower()]  # any case: `run_function` sends its on/off as True/False
    except KeyError:
        raise FormValueError(f"must be true, false or empty for none; got {short_repr(text)}") from None


def from_form_text(param: Param, text: Any) -> Any:
    """The JSON value a widget's text stands for, OMIT to leave the argument out, or FormValueError."""
    if param.kind == "bool" and not param.nullable:
        return bool(text)
    # A browser sends a text area's line breaks as CRLF (HTML's form encoding); the function gets the
    # "\n" the same text would have from the API, a file or the CLI.
    text = "" if text is None else text.replace("\r\n", "\n")
    if param.kind == "bool":
        return _nullable_bool(text)
    if param.kind == "choice":
        # Matched exactly, before any trimming: "" and " a" can be options too.
        for key, option in choice_options(param):
            if key == text:
                return option
        if text != "":
            allowed = ", ".join(repr(option) for option in param.schema["enum"])
            raise FormValueError(f"must be one of {allowed}; got {short_repr(text)}")  # the schema's own wording
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
        # A cleared number, choice or JSON field has no "empty" value; quietly running with the default
        # would ignore the edit, so say what to enter instead.
        raise FormValueError(f"enter a value; the default is {json.dumps(param.schema['default'])}")
    if param.kind in _NUMBER_WORDS:
        return _number(text.strip(), param.kind)
    if param.kind == "list":
        lines = [line.strip() for line in text.splitlines()]
        return [_list_item(line, param.item_type, i) for i, line in enumerate(lines, 1) if line]
    if param.kind == "json":
        return _json(text)
    return text


# --- the form ----------------------------------------------------------------------------------

def _empty_is_a_value(param: Param) -> bool:
    """Whether an empty field stands for a value (None, or the option ""), so it may be left empty."""
    return param.nullable or (param.kind == "choice" and "" in param.schema["enum"])


def _widget(param: Param) -> forms.Widget:
    attrs: dict[str, Any] = {}
    if param.meta.get("placeholder"):
        attrs["placeholder"] = param.meta["placeholder"]
    if param.required and param.kind != "bool" and not _empty_is_a_value(param):
        attrs["required"] = True
    if param.kind == "bool" and param.nullable:
        return forms.Select(attrs=attrs, choices=[("", "(none)"), ("true", "Yes"), ("false", "No")])
    if param.kind == "bool":
        return forms.CheckboxInput(attrs=attrs)
    if param.kind == "choice":
        choices = [(key, key or ("(none)" if option is None else "(empty text)"))
                   for key, option in choice_options(param)]
        if param.required and not param.has_default and not _empty_is_a_value(param):
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
    elif param.list_as_json:
        parts.append("A JSON list: one item per line would change some of these items (a line break, "
                     "spaces at either end, or an empty item).")
    elif param.kind == "json":
        parts.append("A JSON value.")
    if param.nullable and param.kind not in ("bool", "choice"):  # a select says "(none)" itself
        parts.append("Leave empty for none.")
    return " ".join(part for part in parts if part)


def _form_field(param: Param) -> forms.Field:
    common = {"required": False, "label": param.name.replace("_", " ").capitalize(),
              "help_text": _help_text(param), "widget": _widget(param)}
    if param.kind == "bool" and not param.nullable:
        return forms.BooleanField(**common)
    # Single-line text is trimmed; textareas keep what was typed (indentation can matter there), and a
    # select's values come from the page, exactly (" a" can be an option).
    strip = not isinstance(common["widget"], (forms.Textarea, forms.Select))
    return forms.CharField(strip=strip, **common)


def _posted_names(data, key: str) -> list[str]:
    """Every value posted under `key` (a QueryDict from a request, or a plain dict in code and tests)."""
    if hasattr(data, "getlist"):
        return data.getlist(key)
    value = data.get(key, [])
    return [value] if isinstance(value, str) else list(value)


class LaunchForm(forms.Form):
    """The launch form of one function. After `is_valid()`, `args` holds the JSON arguments to launch with.

    `lists_as_json` names the list parameters shown as JSON (see the module docstring); the page posts
    them back under `LISTS_AS_JSON`."""

    lists_as_json_key = LISTS_AS_JSON  # for the template

    def __init__(self, tool, data=None, initial_args: dict | None = None):
        self.tool = tool
        params = parameters_of(tool)
        prefill = {param.name: param.schema["default"] for param in params if param.has_default}
        prefill.update({k: v for k, v in (initial_args or {}).items() if any(param.name == k for param in params)})
        if data is not None:  # as the page showed them
            as_json = set(_posted_names(data, LISTS_AS_JSON))
        else:
            as_json = {param.name for param in params
                       if param.kind == "list" and param.name in prefill and not _lines_read_back(param, prefill[param.name])}
        self.params = [replace(param, list_as_json=True) if param.kind == "list" and param.name in as_json else param
                       for param in params]
        self.lists_as_json = [param.name for param in self.params if param.list_as_json]
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
