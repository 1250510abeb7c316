"""Every request shape the openai provider sends passes the request schemas of real compatible servers.

The bodies are what the SDK put on the wire in real runs against a local fake server: a tool-using run
over several turns (malformed arguments, text beside tool calls, a failing tool), forced tool choices,
an image block, a plain `llm()` call, a reply cap. Each body is checked against llama-cpp-python's own
pydantic request model (the server the issue saw refuse `"content": null` with a 500), and against the
rules vLLM's and Ollama's OpenAI-compatible endpoints apply, written out below from their sources
(docs/model-servers.md names the files).
"""
import json

import pytest

from runtime import Runtime, function
from runtime.providers.openai_provider import OpenAIProvider

from .fakes.protocols import OpenAIWire, _openai_body
from .fakes.server import FakeServer
from .test_providers_http import FAST_RETRY

ROLES = ("system", "user", "assistant", "tool")


@function(register_globally=False)
def lookup(city: str) -> str:
    """Look up the weather for a city."""
    if city == "Atlantis":
        raise ValueError("no such city")
    return f"sunny in {city}"


@function(register_globally=False)
def convert(celsius: float) -> float:
    """Celsius to Fahrenheit."""
    return celsius * 9 / 5 + 32


def _calls_with_text(text, *calls):
    message = {"role": "assistant", "content": text, "tool_calls": [
        {"id": cid, "type": "function", "function": {"name": name, "arguments": args}} for cid, name, args in calls]}
    return 200, _openai_body(message, "tool_calls", 20, 9)


def _bodies(script, run, max_tokens=None):
    with FakeServer(script) as server:
        provider = OpenAIProvider("served-model", base_url=OpenAIWire.base_url(server.url), retry=FAST_RETRY,
                                  timeout_s=10, max_tokens=max_tokens)
        run(Runtime(provider=provider))
    return [{k: v for k, v in body.items() if k != "_path"} for body in server.requests]


def _tool_using_run():
    script = [_calls_with_text(None, ("c1", "lookup", '{"city": "Oslo"}'), ("c2", "lookup", '{"city": ')),
              _calls_with_text("Let me check Atlantis too.", ("c3", "lookup", '{"city": "Atlantis"}'),
                               ("c4", "not_offered", "{}")),
              OpenAIWire.answer("Oslo is sunny")]
    return _bodies(script, lambda rt: rt.exec("weather in Oslo and Atlantis", tools=[lookup]), max_tokens=64)


SCENARIOS = {
    "tool-using run": _tool_using_run,
    "required, one tool": lambda: _bodies(
        [OpenAIWire.tool_calls(("c1", "lookup", {"city": "Oslo"})), OpenAIWire.answer("done")],
        lambda rt: rt.exec("weather", tools=[lookup], tool_choice="required")),
    "required, two tools": lambda: _bodies(
        [OpenAIWire.tool_calls(("c1", "convert", {"celsius": 3})), OpenAIWire.answer("done")],
        lambda rt: rt.exec("convert 3", tools=[lookup, convert], tool_choice="required")),
    "a named tool": lambda: _bodies(
        [OpenAIWire.tool_calls(("c1", "convert", {"celsius": 3})), OpenAIWire.answer("done")],
        lambda rt: rt.exec("convert 3", tools=[lookup, convert], tool_choice="convert")),
    "an image block": lambda: _bodies(
        [OpenAIWire.answer("a cat")],
        lambda rt: rt.exec([{"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
                            "what is this?"], tools=[])),
    "llm() without tools": lambda: _bodies([OpenAIWire.answer("hi")], lambda rt: rt.llm("say hi")),
}


@pytest.fixture(scope="module", params=sorted(SCENARIOS))
def bodies(request):
    return SCENARIOS[request.param]()


def test_every_request_passes_llama_cpp_pythons_own_request_model(bodies):
    types = pytest.importorskip("llama_cpp.server.types", reason="llama-cpp-python is not installed: `make "
                                "model-server` installs it (docs/model-servers.md)")
    for body in bodies:
        types.CreateChatCompletionRequest(**json.loads(json.dumps(body)))


def test_every_request_follows_vllms_rules(bodies):
    for body in bodies:
        _check_vllm(body)


def test_every_request_follows_ollamas_rules(bodies):
    for body in bodies:
        _check_ollama(body)


def test_the_tool_using_run_sends_the_shapes_that_were_refused_before():
    second, third = _tool_using_run()[1:]
    assistant = [m for m in second["messages"] if m["role"] == "assistant"][0]
    assert assistant["content"] == "" and len(assistant["tool_calls"]) == 2
    assert [c["function"]["arguments"] for c in assistant["tool_calls"]] == ['{"city": "Oslo"}', "{}"]
    assert [m for m in third["messages"] if m["role"] == "assistant"][1]["content"] == "Let me check Atlantis too."
    assert isinstance(second["messages"][1]["content"], str)  # a user turn of text alone: one string
    assert second["max_tokens"] == 64 and "max_completion_tokens" not in second


def test_required_with_one_tool_is_sent_as_that_tool_named_and_with_several_as_required():
    assert SCENARIOS["required, one tool"]()[0]["tool_choice"] == {"type": "function", "function": {"name": "lookup"}}
    assert SCENARIOS["required, two tools"]()[0]["tool_choice"] == "required"


# --- the rules, from the servers' sources ------------------------------------------------------------

def _check_vllm(body):
    """vllm/entrypoints/openai/protocol.py (ChatCompletionRequest) and chat_utils' _postprocess_messages."""
    offered = [tool["function"]["name"] for tool in body.get("tools") or ()]
    for tool in body.get("tools") or ():
        assert tool["type"] == "function" and isinstance(tool["function"]["name"], str)
        assert isinstance(tool["function"].get("description", ""), str)
        assert isinstance(tool["function"].get("parameters", {}), dict)
    choice = body.get("tool_choice", "none")
    assert choice in ("none", "auto", "required") or (
        choice["type"] == "function" and choice["function"]["name"] in offered), choice
    for message in body["messages"]:
        assert message["role"] in ROLES
        for call in message.get("tool_calls") or ():
            assert call["type"] == "function" and isinstance(call["function"], dict)
            assert isinstance(json.loads(call["function"]["arguments"]), dict)  # older releases parse unguarded
        if message["role"] == "tool":
            assert isinstance(message["tool_call_id"], str) and isinstance(message["content"], str)


def _check_ollama(body):
    """ollama openai/openai.go: FromChatRequest and FromCompletionToolCall."""
    assert "max_completion_tokens" not in body  # Ollama reads max_tokens only: the other would be ignored
    for message in body["messages"]:
        content = message.get("content")
        if isinstance(content, list):
            assert all(part["type"] in ("text", "image_url") for part in content)
            # Each text part becomes a message of its own: text alone must go as one string.
            assert any(part["type"] == "image_url" for part in content)
        else:
            assert isinstance(content, str), f"content {content!r} is only allowed beside tool calls"
        for call in message.get("tool_calls") or ():
            assert isinstance(json.loads(call["function"]["arguments"]), dict)
        if message["role"] == "tool":
            call_ids = {call["id"] for m in body["messages"] for call in m.get("tool_calls") or ()}
            assert message["tool_call_id"] in call_ids  # how Ollama finds the tool's name
