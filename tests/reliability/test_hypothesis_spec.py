"""Hypothesis on spec generation and validation (`runtime/spec.py`), through real decorated functions.

Signatures are generated (parameter types, defaults, `input` ranges and options), each made into a
`@function`; arguments are then generated two ways: from the Python types the signature names, shaped by
the ranges (what the schema should admit), and from any JSON at all (what it may refuse). Properties:
what the schema admits `validate`/`execute` accept and return unchanged in meaning; what it refuses is
refused with a ToolArgumentError naming the parameter; ranges and `max_length` are honoured at their
edges; the spec survives a JSON round trip and validates the same after it. Derandomized (the same
examples every run, so a failure reproduces) and bounded.
"""
from __future__ import annotations

import inspect
import json
from typing import Literal, Optional

import pytest
from hypothesis import HealthCheck, event, given, settings, strategies as st

from runtime import function
from runtime.errors import ToolArgumentError
from runtime.spec import argument_errors
from tests.reliability.figures import record

EXAMPLES = 300
BOUNDED = settings(max_examples=EXAMPLES, derandomize=True, database=None, deadline=None,
                   suppress_health_check=[HealthCheck.too_slow])

INTS = st.integers(min_value=-10**6, max_value=10**6)
FLOATS = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)
TEXT = st.text(max_size=30)
# Any JSON value: what a model or an API client may send for any parameter.
JSON = st.recursive(st.none() | st.booleans() | INTS | FLOATS | TEXT,
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
                    max_leaves=10)

tried = {"inputs": 0}


@pytest.fixture(scope="module", autouse=True)
def record_inputs():
    yield
    record("hypothesis-spec", inputs=tried["inputs"])


# --- a parameter: its annotation, `input` metadata, and the values the schema must admit ----------------

@st.composite
def parameters(draw, name: str):
    """(annotation, input metadata, strategy of admitted values) for one parameter called `name`."""
    kind = draw(st.sampled_from(["int", "float", "str", "bool", "list_int", "list_str", "optional_int",
                                 "literal", "dict", "tuple", "options"]))
    if kind in ("int", "float", "optional_int"):
        # Whole-number bounds, so a float parameter's range always holds whole numbers too (JSON's 3 is a float).
        low, high = draw(st.one_of(st.none(), INTS)), draw(st.one_of(st.none(), INTS))
        if low is not None and high is not None and low > high:
            low, high = high, low
        meta = {key: bound for key, bound in (("minimum", low), ("maximum", high)) if bound is not None}
        if kind == "float":
            admitted = st.floats(min_value=low, max_value=high, allow_nan=False, allow_infinity=False)
            return float, meta, admitted | st.integers(min_value=low, max_value=high)
        ints = st.integers(min_value=low, max_value=high)
        return (int, meta, ints) if kind == "int" else (Optional[int], meta, st.none() | ints)
    if kind == "str":
        limit = draw(st.one_of(st.none(), st.integers(min_value=1, max_value=20)))  # max_length is positive
        return str, {} if limit is None else {"max_length": limit}, st.text(max_size=limit if limit is not None else 30)
    if kind == "bool":
        return bool, {}, st.booleans()
    if kind == "list_int":
        return list[int], {}, st.lists(INTS, max_size=5)
    if kind == "list_str":
        return list[str], {}, st.lists(TEXT, max_size=5)
    if kind == "literal":
        return Literal["a", "b", 3], {}, st.sampled_from(["a", "b", 3])
    if kind == "dict":
        return dict[str, int], {}, st.dictionaries(TEXT, INTS, max_size=4)
    if kind == "tuple":
        return tuple[int, str], {}, st.tuples(INTS, TEXT).map(list)  # JSON has no tuples: a list of two
    options = draw(st.lists(TEXT, min_size=1, max_size=4, unique=True))
    return str, {"options": options}, st.sampled_from(options)


@st.composite
def signatures(draw):
    """A decorated function of 1-4 generated parameters, and a strategy of arguments its schema admits."""
    count = draw(st.integers(min_value=1, max_value=4))
    params, annotations, input_meta, admitted, required = [], {}, {}, {}, []
    for index in range(count):
        name = f"p{index}"
        annotation, meta, values = draw(parameters(name))
        default = inspect.Parameter.empty
        if draw(st.booleans()):
            default = draw(values)
            default = tuple(default) if annotation == tuple[int, str] else default
        else:
            required.append(name)
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation))
        annotations[name], admitted[name] = annotation, values
        if meta:
            input_meta[name] = meta

    def echo(**kwargs):
        return kwargs

    echo.__signature__ = inspect.Signature(params)
    echo.__annotations__ = annotations
    echo.__doc__ = "Return the arguments."
    tool = function(register_globally=False, input=input_meta)(echo)
    optional = [name for name in admitted if name not in required]
    arguments = st.fixed_dictionaries({name: admitted[name] for name in required},
                                      optional={name: admitted[name] for name in optional})
    return tool, annotations, input_meta, arguments


# --- properties ----------------------------------------------------------------------------------

@BOUNDED
@given(st.data())
def test_every_value_the_schema_admits_is_accepted_and_comes_back(data):
    tool, annotations, _, arguments = data.draw(signatures())
    args = data.draw(arguments)
    tried["inputs"] += 1
    assert argument_errors(tool.spec["parameters"], args) == {}
    result = tool.execute(**args)
    for name, value in args.items():
        expected = tuple(value) if annotations[name] == tuple[int, str] else value
        assert result[name] == expected and type(result[name]) is (float if annotations[name] is float else
                                                                     type(expected)), name


refusals = {"refused": 0, "admitted": 0}


@BOUNDED
@given(st.data())
def check_refused_values_are_refused_naming_the_parameter(data):
    tool, _, _, arguments = data.draw(signatures())
    args = data.draw(arguments)
    name = data.draw(st.sampled_from(sorted(tool.spec["parameters"]["properties"])))
    args[name] = data.draw(JSON)
    tried["inputs"] += 1
    errors = argument_errors(tool.spec["parameters"], args)
    event("refused" if errors else "admitted")
    if not errors:
        refusals["admitted"] += 1
        tool.execute(**args)  # admitted: it runs
        return
    refusals["refused"] += 1
    assert set(errors) == {name}
    with pytest.raises(ToolArgumentError) as refused:
        tool.execute(**args)
    assert refused.value.param == name and f"argument {name!r}" in str(refused.value)


def test_every_value_the_schema_refuses_is_refused_naming_the_parameter():
    refusals.update(refused=0, admitted=0)
    check_refused_values_are_refused_naming_the_parameter()
    # Both branches were exercised: a validation that admitted everything (or nothing) fails here.
    assert refusals["refused"] > 0 and refusals["admitted"] > 0, refusals


@BOUNDED
@given(low=INTS, width=st.integers(min_value=0, max_value=1000), outside=st.integers(min_value=1, max_value=10**6))
def test_a_range_is_honoured_at_its_edges(low, width, outside):
    high = low + width
    tool = function(register_globally=False, name="ranged",
                    input={"n": {"minimum": low, "maximum": high}})(lambda n: n)
    tried["inputs"] += 4
    assert tool.execute(n=low) == low and tool.execute(n=high) == high
    for value in (low - outside, high + outside):
        with pytest.raises(ToolArgumentError, match=f"argument 'n' .*must be from {low} to {high}, got {value}"):
            tool.execute(n=value)


@BOUNDED
@given(limit=st.integers(min_value=1, max_value=50), text=st.text(max_size=80))
def test_max_length_is_honoured(limit, text):
    tool = function(register_globally=False, name="bounded", input={"s": {"max_length": limit}})(lambda s: s)
    tried["inputs"] += 1
    if len(text) <= limit:
        assert tool.execute(s=text) == text
    else:
        with pytest.raises(ToolArgumentError, match=f"argument 's' .*at most {limit} characters, got {len(text)}"):
            tool.execute(s=text)


@BOUNDED
@given(st.data())
def test_the_spec_and_arguments_survive_a_json_round_trip(data):
    tool, _, _, arguments = data.draw(signatures())
    args = data.draw(arguments)
    tried["inputs"] += 1
    spec = json.loads(json.dumps(tool.spec))
    assert spec == tool.spec
    sent = json.loads(json.dumps(args))  # what a model or the API sends: JSON text
    assert argument_errors(spec["parameters"], sent) == {}
    assert tool.execute(**sent) == tool.execute(**args)
