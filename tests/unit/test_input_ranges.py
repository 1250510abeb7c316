"""`input` ranges: minimum / maximum for numbers and max_length for strings, in the spec and enforced."""
import re
from typing import Optional

import pytest

from runtime import ToolArgumentError, agentic_function


@agentic_function(register_globally=False, input={
    "n": {"minimum": 1, "maximum": 10_000},
    "ratio": {"minimum": 0.0},
    "limit": {"maximum": 5},
    "name": {"max_length": 8},
})
def ranged(n: int, ratio: float = 0.5, limit: Optional[int] = None, name: str = "x") -> dict:
    """Take ranged arguments."""
    return {"n": n, "ratio": ratio, "limit": limit, "name": name}


def test_ranges_are_in_the_json_schema():
    properties = ranged.spec["parameters"]["properties"]
    assert (properties["n"]["minimum"], properties["n"]["maximum"]) == (1, 10_000)
    assert properties["ratio"]["minimum"] == 0.0 and properties["limit"]["maximum"] == 5
    assert properties["name"]["maxLength"] == 8


@pytest.mark.parametrize("arguments, param, words", [
    ({"n": 0}, "n", "must be from 1 to 10000, got 0"),
    ({"n": 10_001}, "n", "must be from 1 to 10000, got 10001"),
    ({"n": 2, "ratio": -0.5}, "ratio", "must be at least 0, got -0.5"),
    ({"n": 2, "limit": 6}, "limit", "must be at most 5, got 6"),
    ({"n": 2, "name": "much too long"}, "name", "must be at most 8 characters, got 13"),
])
def test_execute_refuses_out_of_range_arguments_naming_the_parameter_and_range(arguments, param, words):
    with pytest.raises(ToolArgumentError) as caught:
        ranged.execute(**arguments)
    assert caught.value.param == param and words in str(caught.value)


def test_in_range_and_optional_none_pass():
    assert ranged.execute(n=10_000, ratio=0, limit=None, name="12345678")["n"] == 10_000


@pytest.mark.parametrize("meta, words", [
    ({"n": {"minimum": "1"}}, "input['n']['minimum'] must be a finite number"),
    ({"n": {"maximum": float("nan")}}, "input['n']['maximum'] must be a finite number"),
    ({"n": {"minimum": 5, "maximum": 1}}, "minimum 5 is above maximum 1"),
    ({"n": {"max_length": 0}}, "input['n']['max_length'] must be a positive whole number"),
])
def test_bad_range_metadata_fails_at_decoration(meta, words):
    with pytest.raises(ValueError, match=re.escape(words)):
        @agentic_function(register_globally=False, input=meta)
        def f(n: int) -> int:
            return n
