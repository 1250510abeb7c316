"""Tool specs from signatures and `input` metadata, and validation of model-given arguments."""
import enum
from typing import Literal, Optional

import pytest

from runtime import ToolArgumentError, agentic_function, function


class Tone(enum.Enum):
    FORMAL = "formal"
    CASUAL = "casual"


def props(tool):
    return tool.spec["parameters"]["properties"]


def test_each_type_hint_maps_to_its_json_schema():
    @function
    def f(s: str, i: int, x: float, b: bool, words: list[str], pair: tuple[int, str],
          many: tuple[int, ...], plain_tuple: tuple, table: dict[str, int], anything: dict,
          maybe: Optional[int], mode: Literal["fast", "slow"], tone: Tone, free=None):
        pass

    p = props(f)
    assert p["s"] == {"type": "string"}
    assert p["i"] == {"type": "integer"}
    assert p["x"] == {"type": "number"}
    assert p["b"] == {"type": "boolean"}
    assert p["words"] == {"type": "array", "items": {"type": "string"}}
    assert p["pair"] == {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}],
                         "minItems": 2, "maxItems": 2}
    assert p["many"] == {"type": "array", "items": {"type": "integer"}}
    assert p["plain_tuple"] == {"type": "array"}
    assert p["table"] == {"type": "object", "additionalProperties": {"type": "integer"}}
    assert p["anything"] == {"type": "object"}
    assert p["maybe"] == {"type": ["integer", "null"]}
    assert p["mode"] == {"type": "string", "enum": ["fast", "slow"]}
    assert p["tone"] == {"type": "string", "enum": ["formal", "casual"]}
    assert p["free"] == {"default": None}


def test_required_defaults_and_description_from_docstring():
    @agentic_function
    def f(topic: str, depth: int = 2, tone: Tone = Tone.CASUAL, tags: tuple = ("a",)):
        """Research a topic.

        Longer text.
        """

    spec = f.spec
    assert spec["name"] == "f"
    assert spec["description"] == "Research a topic.\n\nLonger text."
    params = spec["parameters"]
    assert params["required"] == ["topic"]
    assert params["additionalProperties"] is False
    assert params["properties"]["depth"]["default"] == 2
    assert params["properties"]["tone"]["default"] == "casual"
    assert params["properties"]["tags"]["default"] == ["a"]


def test_input_metadata_shapes_the_schema_and_hidden_and_runtime_params_are_excluded():
    @agentic_function(input={
        "question": {"description": "What to ask", "placeholder": "e.g. Who?", "multiline": True},
        "mode": {"options": ["quick", "deep"], "description": "How hard to look"},
        "api_token": {"hidden": True},
    })
    def ask(question: str, mode: str = "quick", api_token: str = "", runtime=None,
            exec_runtime=None, review_runtime=None):
        pass

    p = props(ask)
    assert list(p) == ["question", "mode"]
    assert p["question"]["description"] == "What to ask"
    assert p["mode"] == {"type": "string", "description": "How hard to look", "enum": ["quick", "deep"],
                         "default": "quick"}
    assert ask.spec["parameters"]["required"] == ["question"]


def test_unsupported_type_fails_at_decoration():
    class Custom:
        pass

    # The message says where: which function, which parameter.
    with pytest.raises(ValueError, match="test_unsupported_type_fails_at_decoration.<locals>.f: "
                                         "parameter 'c': no JSON schema for type Custom"):
        @function
        def f(c: Custom):
            pass


def test_description_override_wins_over_docstring():
    @function(description="Short.")
    def f():
        """Long docstring."""

    assert f.spec["description"] == "Short."


@pytest.mark.parametrize("arguments, param, message", [
    ({"topic": 3}, "topic", "expected a string, got int 3"),
    ({}, "topic", "this argument is required"),
    ({"topic": "x", "colour": 1}, "colour", "unknown argument; expected one of: topic, depth, tone, ids, maybe"),
    ({"topic": "x", "depth": "2"}, "depth", "expected an integer"),
    ({"topic": "x", "depth": True}, "depth", "expected an integer, got bool True"),
    ({"topic": "x", "tone": "loud"}, "tone", "must be one of 'formal', 'casual'; got 'loud'"),
    ({"topic": "x", "ids": [1, "2"]}, "ids", "item 1: expected an integer"),
    ({"topic": "x", "maybe": "n"}, "maybe", "expected an integer or null"),
])
def test_execute_rejects_bad_arguments_naming_the_parameter(arguments, param, message):
    @function
    def research(topic: str, depth: int = 1, tone: Tone = Tone.FORMAL, ids: list[int] = (),
                 maybe: Optional[int] = None):
        return topic

    with pytest.raises(ToolArgumentError) as info:
        research.execute(**arguments)
    assert info.value.param == param and info.value.tool == "research"
    assert f"argument {param!r} of tool 'research'" in str(info.value)
    assert message in str(info.value)


def test_execute_converts_json_values_to_the_annotated_python_types():
    @function
    def f(tone: Tone, pair: tuple[int, str], ratio: float, maybe: Optional[Tone] = None):
        return tone, pair, ratio, maybe

    tone, pair, ratio, maybe = f.execute(tone="formal", pair=[1, "a"], ratio=2, maybe="casual")
    assert tone is Tone.FORMAL and pair == (1, "a") and ratio == 2.0 and isinstance(ratio, float)
    assert maybe is Tone.CASUAL


def test_hidden_parameter_keeps_its_default_when_executed():
    @function(input={"token": {"hidden": True}})
    def f(q: str, token: str = "default-token"):
        return token

    assert f.execute(q="x") == "default-token"
    with pytest.raises(ToolArgumentError, match="'token'"):
        f.execute(q="x", token="from-the-model")


def test_a_model_cannot_set_hidden_or_runtime_parameters_through_kwargs():
    # **extra opens the spec to extra properties; the parameters the spec and the form keep from models
    # (hidden ones, the runtime the call is injected) stay closed all the same.
    @function(register_globally=False, input={"to": {"hidden": True}})
    def send(body: str, to: str = "team@example.com", runtime=None, **extra) -> str:
        """Send a note."""
        return f"sent {body!r} to {to} with {sorted(extra)}"

    assert send.execute(body="hi", cc="x") == "sent 'hi' to team@example.com with ['cc']"
    for name in ("to", "runtime"):
        with pytest.raises(ToolArgumentError, match=f"argument '{name}' of tool 'send': not an argument a model may set"):
            send.execute(body="hi", **{name: "attacker@evil.example"})


def test_a_model_cannot_set_a_methods_self():
    class Mailer:
        @function(register_globally=False)
        def send(self, body: str, **extra) -> str:
            """Send a note."""
            return body

    with pytest.raises(ToolArgumentError, match="argument 'self' of tool 'send': not an argument a model may set"):
        Mailer().send.execute(body="hi", self="other")


@pytest.mark.parametrize("value, shown", [(float("nan"), "float nan"), (float("-inf"), "float -inf"),
                                          (10**400, "int 1000000000")], ids=["nan", "-inf", "400 digits"])
def test_a_number_argument_must_be_one_a_float_can_hold(value, shown):
    # Python's JSON reader takes NaN and Infinity from a model; NaN passes every range check.
    @function(register_globally=False, input={"x": {"minimum": 0, "maximum": 1}})
    def scale(x: float) -> float:
        """Scale."""
        return x

    with pytest.raises(ToolArgumentError, match=f"argument 'x' of tool 'scale': expected a number, got {shown}"):
        scale.execute(x=value)
    assert scale.execute(x=1) == 1.0
