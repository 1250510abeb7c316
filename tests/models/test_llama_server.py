"""Agentic functions run through the project's OpenAI provider against a real server and a real model.

llama-cpp-python's OpenAI-compatible server (conftest.py) serving SmolLM2-135M-Instruct, a model too
small to do a task well but real: its tool calls, its replies and the server's refusals are what a user
with a local model gets. Every test makes at most a few model calls with a small reply cap (the model
runs on one thread of a shared machine); what the model says is never asserted, only what the runtime
does with it.
"""
from typing import Literal

import pytest

from runtime import CancelledError, ExecLimitExceeded, Recorder, Runtime, agentic_function, function, use_recorder
from runtime.messages import ModelReply
from runtime.retry import ProviderError, RetryPolicy

from .llama_server import CONTEXT_TOKENS, CountingProvider, provider_on


@function(register_globally=False)
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return f"It is sunny in {city}."


def test_a_tool_using_run_reaches_its_second_model_call_and_ends_for_a_model_reason(model):
    # The first turn must call the tool (the one tool, required), so the second request carries the
    # assistant turn with its tool call and the tool's result: the request this server refused before.
    try:
        outcome = Runtime(provider=model).exec("What is the weather in Paris? Use the get_weather tool.",
                                               tools=[get_weather], tool_choice="required", max_iterations=2)
    except ExecLimitExceeded as exc:  # the model kept calling the tool: a model's reason
        outcome = exc
    assert [type(o) for o in model.outcomes] == [ModelReply, ModelReply], model.outcomes
    assert [call.name for call in model.outcomes[0].tool_calls] == ["get_weather"]
    assert isinstance(outcome, (str, ExecLimitExceeded))


def test_a_stop_during_a_model_call_abandons_the_request(model, install_hook):
    stopped = []

    def stop_while_in_flight(event):
        if getattr(event, "in_flight", False):  # the request is at the server, the reply not back
            stopped.append(event)
            raise CancelledError("stopped while the model was answering")
    install_hook(stop_while_in_flight)
    with pytest.raises(CancelledError, match="stopped while the model was answering"):
        Runtime(provider=model).llm("Write a long story about a dragon and a knight.")
    assert len(stopped) == 1 and [type(o) for o in model.outcomes] == [CancelledError]


def test_the_guard_refuses_a_model_forced_to_call_itself_at_depth_6(model, install_hook):
    refusals = []

    class Refusals(Recorder):
        def function_refused(self, frame, error):
            refusals.append((frame.name, frame.name_depth, error))

    # The argument is one of two words, so a forced call always fits the reply cap: a free string the
    # model may run on past it, and a call cut short has no valid arguments and opens no frame.
    @agentic_function(register_globally=False)
    def delegate(topic: Literal["news", "weather"], runtime=None) -> str:
        """Summarise the latest on a topic, by handing it on."""
        return runtime.exec(f"Summarise the latest {topic}.", tools=[delegate], tool_choice="required",
                            max_iterations=2)

    def stop_after_the_refusal(event):
        # What the model does once refused is the unit tests' (tests/unit/test_runaway.py); here a
        # person presses stop then, which keeps this test at five model calls.
        if refusals and getattr(event, "kind", None) == "model_call":
            raise CancelledError("stopped after the refusal")
    install_hook(stop_after_the_refusal)
    with use_recorder(Refusals()), pytest.raises(CancelledError):
        delegate("news", runtime=Runtime(provider=model))
    assert [(name, depth) for name, depth, _ in refusals] == [("delegate", 6)]
    assert isinstance(refusals[0][2], RecursionError)
    assert len(model.outcomes) == 5
    assert all([call.name for call in reply.tool_calls] == ["delegate"] for reply in model.outcomes)


def test_a_reply_cut_at_the_output_limit_names_the_setting_that_raises_it(model_server):
    # max_tokens=1 reaches the server as max_tokens, which it honours (max_completion_tokens it ignores).
    model = provider_on(model_server, max_tokens=1)
    with pytest.raises(ProviderError) as info:
        Runtime(provider=model).llm("Tell me about the sea.")
    assert "finish_reason 'length'; max_tokens=1" in str(info.value)
    assert "raise OPENPROGRAM_MAX_TOKENS" in str(info.value)


def test_a_prompt_past_the_models_context_ends_the_run_naming_the_context_and_the_prompts_size(model):
    with pytest.raises(ProviderError) as info:
        Runtime(provider=model).llm("sea " * (CONTEXT_TOKENS + 200))
    message = str(info.value)
    assert info.value.status == 400 and info.value.attempts == 1
    assert f"(the model's context: {CONTEXT_TOKENS} tokens; the prompt: " in message
    assert "not said by the server" not in message


def test_a_request_the_server_calls_invalid_is_tried_once_and_its_complaint_named(model_server):
    class NullContent(CountingProvider):
        """Sends what the provider sent before: an assistant turn with content null beside its tool call."""

        def send(self, client, request, model):
            return client.chat.completions.create(model=model, max_tokens=1, messages=[
                {"role": "user", "content": "weather?"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "sunny"}])

    model = provider_on(model_server, NullContent, retry=RetryPolicy(max_retries=3, base_delay_s=0.01))
    with pytest.raises(ProviderError) as info:
        Runtime(provider=model).llm("weather?")
    assert info.value.status == 500 and info.value.attempts == 1
    assert "ChatCompletionRequestAssistantMessage.content: Input should be a valid string" in str(info.value)
