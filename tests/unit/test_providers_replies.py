"""Replies the openai and anthropic providers must not take at face value, served by a local fake server:
nesting past the recursion limit, tool names that are not strings, refusals and cut-off replies, usage
that is not a count, repeated tool-call ids, and content blocks that carry data under "source"."""
import json

import pytest

from runtime import Budget, Recorder, agentic_function, function, use_recorder
from runtime.messages import ModelRequest
from runtime.providers.openai_provider import OpenAIProvider
from runtime.retry import ProviderError
from runtime.runtime import Runtime

from .fakes.protocols import AnthropicWire, OpenAIWire
from .fakes.server import FakeServer, Raw
from .test_providers_http import PROVIDERS, ask, make, wire  # noqa: F401 (wire is a fixture)

DEEP = "[" * 100_000 + "]" * 100_000  # far past Python's recursion limit for json.loads


def lookup_tool(ran):
    @function
    def lookup(city: str) -> str:
        """Look up a city."""
        ran.append(city)
        return "sunny in " + city
    return lookup


def first_call(wire_name, response):
    """The wire-format dict of the first tool call in a scripted response, to bend it out of shape."""
    body = response[1]
    if wire_name == "openai":
        return body["choices"][0]["message"]["tool_calls"][0]
    return body["content"][0]


def test_openai_tool_arguments_nested_too_deeply_become_an_error_result_and_the_loop_continues():
    ran = []
    script = [OpenAIWire.tool_calls(("c1", "lookup", '{"city": ' + DEEP + "}"), raw=True), OpenAIWire.answer("sorry")]
    with FakeServer(script) as server:
        provider, w = make("openai", server)
        assert Runtime(provider=provider).exec("weather", tools=[lookup_tool(ran)]) == "sorry"
    result = w.tool_results(server.requests[1])["c1"]
    assert result.startswith("Error: invalid arguments") and "nested too deeply" in result
    assert ran == []


def test_an_anthropic_body_nested_too_deeply_is_a_provider_error_not_a_recursion_error():
    body = ('{"id":"msg","type":"message","role":"assistant","model":"m","stop_reason":"tool_use",'
            '"stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1},"content":[{"type":"tool_use",'
            '"id":"t1","name":"lookup","input":{"city":' + DEEP + "}}]}")
    with FakeServer([(200, Raw(body.encode()))]) as server:
        provider, _ = make("anthropic", server)
        with pytest.raises(ProviderError, match="nested too deeply") as info:
            Runtime(provider=provider).exec("weather", tools=[lookup_tool([])])
    assert not isinstance(info.value, RecursionError) and not info.value.retryable
    assert len(server.requests) == 1


@pytest.mark.parametrize("name", [["lookup"], 7, ""])
def test_a_tool_name_that_is_not_a_non_empty_string_is_refused_by_the_provider(wire, name):
    _, w = PROVIDERS[wire]
    response = w.tool_calls(("c1", "lookup", {"city": "Oslo"}))
    call = first_call(wire, response)
    (call["function"] if wire == "openai" else call)["name"] = name
    ran = []
    with FakeServer([response, w.answer("never sent")]) as server:
        provider, _ = make(wire, server)
        with pytest.raises(ProviderError, match=r"tool call 0 of the reply names no function: its name "
                                                r"must be a non-empty string, got " + type(name).__name__):
            Runtime(provider=provider).exec("weather", tools=[lookup_tool(ran)])
    assert ran == [] and len(server.requests) == 1


def test_a_tool_call_id_that_is_not_a_string_is_refused_by_the_provider(wire):
    _, w = PROVIDERS[wire]
    response = w.tool_calls(("c1", "lookup", {"city": "Oslo"}))
    first_call(wire, response)["id"] = {"id": "c1"}
    with FakeServer([response]) as server:
        provider, _ = make(wire, server)
        with pytest.raises(ProviderError, match=r"tool call 0 \('lookup'\) of the reply has an id that is not a string"):
            ask(provider)


def test_a_numbered_tool_call_id_is_taken_as_its_text(wire):
    # Some local servers number their calls; the number pairs the result with its call as well as text.
    _, w = PROVIDERS[wire]
    response = w.tool_calls(("c1", "lookup", {"city": "Oslo"}))
    first_call(wire, response)["id"] = 7
    with FakeServer([response]) as server:
        reply = make(wire, server)[0].complete(ModelRequest(
            system="", messages=[{"role": "user", "content": [{"type": "text", "text": "hi"}]}]))
    assert [(call.id, call.name) for call in reply.tool_calls] == [("7", "lookup")]


def _openai_refusal():
    status, body = OpenAIWire.answer("")
    body["choices"][0]["message"].update(content=None, refusal="I can't help with that.")
    return status, body


def _with_stop(wire, response, reason):
    status, body = response
    if wire is OpenAIWire:
        body["choices"][0]["finish_reason"] = reason
    else:
        body["stop_reason"] = reason
    return status, body


STOPS = {
    "openai refusal": (OpenAIWire, _openai_refusal, r"refused to answer \(message.refusal\): \"I can't help with that.\""),
    "openai content filter": (OpenAIWire, lambda: _with_stop(OpenAIWire, OpenAIWire.answer(""), "content_filter"),
                              r"refused to answer \(finish_reason 'content_filter'"),
    "openai length": (OpenAIWire, lambda: _with_stop(OpenAIWire, OpenAIWire.answer("The answer is: the"), "length"),
                      r"cut off at the output-token limit \(finish_reason 'length'; the server's own limit, "
                      r"as none was sent\).*set OPENPROGRAM_MAX_TOKENS"),
    "openai length with a tool call": (
        OpenAIWire, lambda: _with_stop(OpenAIWire, OpenAIWire.tool_calls(("c1", "lookup", '{"city": "Os'), raw=True),
                                       "length"), r"no tool call in it was run"),
    "anthropic refusal": (AnthropicWire, lambda: _with_stop(AnthropicWire, AnthropicWire.answer("I won't."), "refusal"),
                          r"refused to answer \(stop_reason 'refusal'\): \"I won't.\""),
    "anthropic max_tokens": (AnthropicWire, lambda: _with_stop(AnthropicWire, AnthropicWire.answer("The answer is"),
                                                               "max_tokens"),
                             r"cut off at the output-token limit \(stop_reason 'max_tokens'.*OPENPROGRAM_MAX_TOKENS"),
    "anthropic max_tokens inside a tool_use": (
        AnthropicWire, lambda: _with_stop(AnthropicWire, AnthropicWire.tool_calls(("t1", "lookup", {})), "max_tokens"),
        r"no tool call in it was run"),
}


@pytest.mark.parametrize("case", sorted(STOPS))
def test_refusals_and_cut_off_replies_are_non_retryable_errors_and_no_tool_runs(case):
    w, response, message = STOPS[case]
    ran = []
    with FakeServer([response(), w.answer("never sent")]) as server:
        provider, _ = make(w.name, server)
        with pytest.raises(ProviderError, match=message) as info:
            Runtime(provider=provider).exec("weather", tools=[lookup_tool(ran)])
    assert not info.value.retryable and len(server.requests) == 1
    assert ran == []


class Events(Recorder):
    def __init__(self):
        self.events = []

    def llm_started(self, frame, request):
        self.events.append("started")
        return len(self.events)

    def llm_finished(self, handle, status, reply=None, usage=None, error=None):
        self.events.append(("finished", status, usage))


@pytest.mark.parametrize("reported", ["n/a", -100, 2.5, None])
def test_usage_that_is_not_a_count_counts_as_zero_and_the_call_is_settled(wire, reported):
    _, w = PROVIDERS[wire]
    status, body = w.answer("hi", 13, 5)
    body["usage"]["prompt_tokens" if wire == "openai" else "input_tokens"] = reported
    budget = Budget(max_tokens=1000)

    @agentic_function(budget=budget)
    def agent(runtime) -> str:
        """Agent."""
        return runtime.exec("go")

    recorder = Events()
    with FakeServer([(status, body)]) as server, use_recorder(recorder):
        provider, _ = make(wire, server)
        assert agent(runtime=Runtime(provider=provider)) == "hi"
    usage = {"input_tokens": 0, "output_tokens": 5}
    assert recorder.events == ["started", ("finished", "completed", usage)]
    assert budget.snapshot()["spend"]["llm_calls"] == 1 and budget.snapshot()["spend"]["tokens"] == 5


def test_repeated_tool_call_ids_in_one_reply_are_made_unique_and_each_result_pairs_with_its_call(wire):
    _, w = PROVIDERS[wire]
    script = [w.tool_calls(("same", "lookup", {"city": "Oslo"}), ("same", "lookup", {"city": "Lima"})),
              w.answer("done")]
    with FakeServer(script) as server:
        provider, w = make(wire, server)
        Runtime(provider=provider).exec("weather", tools=[lookup_tool([])])
    results = w.tool_results(server.requests[1])
    assert sorted(results.values()) == ["sunny in Lima", "sunny in Oslo"]
    assert set(results) == set(sent_call_ids(wire, server.requests[1]))


def test_openai_calls_without_ids_get_ids_unique_across_the_turns_of_an_exec():
    script = [OpenAIWire.tool_calls((None, "lookup", {"city": "Oslo"})),
              OpenAIWire.tool_calls((None, "lookup", {"city": "Lima"})), OpenAIWire.answer("done")]
    with FakeServer(script) as server:
        provider, w = make("openai", server)
        Runtime(provider=provider).exec("weather", tools=[lookup_tool([])])
    ids = sent_call_ids("openai", server.requests[2])
    assert len(ids) == 2 and len(set(ids)) == 2
    assert sorted(w.tool_results(server.requests[2])) == sorted(ids)


def sent_call_ids(wire_name, body):
    """The ids of the tool calls the request sends back as the model's earlier turns."""
    if wire_name == "openai":
        return [c["id"] for m in body["messages"] if m["role"] == "assistant" for c in m.get("tool_calls") or ()]
    return [b["id"] for m in body["messages"] if m["role"] == "assistant" for b in m["content"]
            if b["type"] == "tool_use"]


def test_anthropic_image_and_document_blocks_keep_their_source_data():
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
    document = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "contract"}}
    with FakeServer([AnthropicWire.answer("ok")]) as server:
        provider, _ = make("anthropic", server)
        Runtime(provider=provider).exec([image, document, "describe these"])
    assert server.requests[0]["messages"][0]["content"] == [image, document, {"type": "text", "text": "describe these"}]


def test_openai_requests_carry_a_reply_cap_only_when_it_is_set_in_the_field_the_server_reads(monkeypatch):
    # Unset, none is sent: a reasoning model's thinking counts against it. Set, a compatible server gets
    # max_tokens (llama-cpp-python and Ollama ignore max_completion_tokens), OpenAI's own API
    # max_completion_tokens (its reasoning models refuse max_tokens). Anthropic's API requires one: 4096.
    monkeypatch.delenv("OPENPROGRAM_MAX_TOKENS", raising=False)
    with FakeServer([OpenAIWire.answer("a"), OpenAIWire.answer("b")]) as server:
        ask(make("openai", server)[0])
        monkeypatch.setenv("OPENPROGRAM_MAX_TOKENS", "123")
        ask(make("openai", server)[0])
    assert "max_tokens" not in server.requests[0] and server.requests[1]["max_tokens"] == 123
    assert "max_completion_tokens" not in json.dumps(server.requests)
    assert OpenAIProvider(api_key="k").reply_cap_field() == "max_completion_tokens"
    assert OpenAIProvider(base_url="https://api.openai.com/v1").reply_cap_field() == "max_completion_tokens"
    assert OpenAIProvider(base_url="http://127.0.0.1:11434/v1").reply_cap_field() == "max_tokens"
    monkeypatch.delenv("OPENPROGRAM_MAX_TOKENS")
    with FakeServer([AnthropicWire.answer("a")]) as server:
        ask(make("anthropic", server)[0])
    assert server.requests[0]["max_tokens"] == 4096


def test_an_anthropic_reply_of_whitespace_beside_its_tool_use_goes_back_without_the_blank_text():
    # Anthropic answers 400 to a text block of only whitespace, and its own replies can hold one.
    from runtime.providers.anthropic_provider import to_anthropic_messages
    request = ModelRequest(system="", messages=[
        {"role": "user", "content": [{"type": "text", "text": "go"}]},
        {"role": "assistant", "content": "\n\n", "tool_calls": [{"id": "t1", "name": "lookup", "arguments": {}}]},
        {"role": "tool", "tool_call_id": "t1", "name": "lookup", "content": "found"}])
    assistant = to_anthropic_messages(request)[1]
    assert assistant == {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "lookup", "input": {}}]}
