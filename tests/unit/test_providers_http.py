"""The openai and anthropic providers, driven through their official SDKs against a local fake server.

Every test runs once per protocol. Backoff is kept tiny; the SDKs' own retries are off.
"""
import threading

import pytest

from runtime import CancelledError, add_pre_invocation_hook, function, remove_pre_invocation_hook
from runtime.messages import ModelRequest
from runtime.providers.anthropic_provider import AnthropicProvider
from runtime.providers.openai_provider import OpenAIProvider
from runtime.retry import ProviderError, RetryPolicy
from runtime.runtime import Runtime

from .fakes.protocols import AnthropicWire, OpenAIWire
from .fakes.server import FakeServer, hang, slow

FAST_RETRY = RetryPolicy(max_retries=2, base_delay_s=0.001, max_delay_s=0.002, max_total_s=5)
PROVIDERS = {"openai": (OpenAIProvider, OpenAIWire), "anthropic": (AnthropicProvider, AnthropicWire)}


@pytest.fixture(params=sorted(PROVIDERS))
def wire(request):
    return request.param


def make(wire_name, server, **kwargs):
    cls, wire = PROVIDERS[wire_name]
    kwargs.setdefault("retry", FAST_RETRY)
    kwargs.setdefault("timeout_s", 10)
    return cls("fake-model", api_key="test-key", base_url=wire.base_url(server.url), **kwargs), wire


def ask(provider, text="hi", tools=()):
    return provider.complete(ModelRequest(system="constant system", tools=list(tools),
                                          messages=[{"role": "user", "content": [{"type": "text", "text": text}]}]))


def test_plain_answer_with_usage(wire):
    _, w = PROVIDERS[wire]
    with FakeServer([w.answer("hello there", 13, 5)]) as server:
        provider, w = make(wire, server)
        reply = ask(provider, "say hello")
    assert reply.text == "hello there"
    assert reply.tool_calls == []
    assert reply.usage == {"input_tokens": 13, "output_tokens": 5}
    body = server.requests[0]
    assert body["_path"] == w.path
    assert w.system(body) == "constant system"
    assert body["model"] == "fake-model"


def test_tool_calls_over_several_turns_and_in_parallel(wire):
    calls_seen = []

    @function
    def lookup(city: str) -> str:
        """Look up the weather for a city."""
        calls_seen.append(city)
        return f"sunny in {city}"

    _, w = PROVIDERS[wire]
    script = [w.tool_calls(("c1", "lookup", {"city": "Oslo"}), ("c2", "lookup", {"city": "Lima"})),
              w.tool_calls(("c3", "lookup", {"city": "Pune"})),
              w.answer("Oslo, Lima and Pune are sunny")]
    with FakeServer(script) as server:
        provider, w = make(wire, server)
        answer = Runtime(provider=provider).exec("weather in three cities", tools=[lookup])
    assert answer == "Oslo, Lima and Pune are sunny"
    assert sorted(calls_seen) == ["Lima", "Oslo", "Pune"]
    assert w.tool_names(server.requests[0]) == ["lookup"]
    assert w.tool_results(server.requests[1]) == {"c1": "sunny in Oslo", "c2": "sunny in Lima"}
    assert w.tool_results(server.requests[2])["c3"] == "sunny in Pune"
    assert len(server.requests) == 3


def test_500_then_success_is_retried(wire):
    _, w = PROVIDERS[wire]
    with FakeServer([w.error(500, "boom"), w.error(429, "slow down"), w.answer("fine now")]) as server:
        provider, _ = make(wire, server)
        assert ask(provider).text == "fine now"
    assert len(server.requests) == 3


def test_400_is_not_retried_and_the_error_names_provider_status_and_message(wire):
    _, w = PROVIDERS[wire]
    with FakeServer([w.error(400, "messages: field required"), w.answer("never sent")]) as server:
        provider, _ = make(wire, server)
        with pytest.raises(ProviderError) as info:
            ask(provider)
    assert len(server.requests) == 1
    message = str(info.value)
    assert wire in message and "HTTP 400" in message and "messages: field required" in message
    assert info.value.status == 400


def test_persistent_5xx_gives_up_after_the_retry_bound(wire):
    _, w = PROVIDERS[wire]
    with FakeServer([w.error(503, "overloaded")] * 5) as server:
        provider, _ = make(wire, server)
        with pytest.raises(ProviderError, match=r"after 3 attempts.*HTTP 503.*overloaded"):
            ask(provider)
    assert len(server.requests) == 3  # one attempt + max_retries=2


def test_a_hang_times_out_and_is_retried_boundedly(wire):
    with FakeServer([hang, hang]) as server:
        provider, _ = make(wire, server, timeout_s=0.2, retry=RetryPolicy(max_retries=1, base_delay_s=0.001))
        with pytest.raises(ProviderError, match=r"timed out after 0.2s") as info:
            ask(provider)
    assert info.value.status is None and info.value.attempts == 2
    # An attempt is abandoned at its timeout whether or not it reached the server (on a busy machine it
    # may not have), so the server saw at most the attempts made.
    assert len(server.requests) <= 2


def test_malformed_tool_call_arguments_become_an_error_result_and_the_loop_continues(wire):
    @function
    def lookup(city: str) -> str:
        """Look up a city."""
        raise AssertionError("must not run with unparsable arguments")

    _, w = PROVIDERS[wire]
    bad = "{'city': Oslo" if wire == "openai" else "{'city': Oslo"
    script = [w.tool_calls(("c1", "lookup", bad), raw=True), w.answer("sorry")]
    with FakeServer(script) as server:
        provider, w = make(wire, server)
        assert Runtime(provider=provider).exec("weather", tools=[lookup]) == "sorry"
    result = w.tool_results(server.requests[1])["c1"]
    assert result.startswith("Error: invalid arguments") and "lookup" in result and "JSON" in result


def test_a_stop_during_a_slow_response_abandons_the_request(wire):
    _, w = PROVIDERS[wire]
    stop = threading.Event()

    def stop_button(event):
        if stop.is_set():
            raise CancelledError("stopped by the user")

    with FakeServer([slow(w.answer("too late"))]) as server:
        provider, _ = make(wire, server)
        threading.Thread(target=lambda: server.arrived.wait(10) and stop.set(), daemon=True).start()
        add_pre_invocation_hook(stop_button)
        try:
            with pytest.raises(CancelledError):
                Runtime(provider=provider).llm("write a long essay")
            # the server is still holding the response: the call was abandoned, not waited out
            assert server.arrived.is_set() and not server.release.is_set()
        finally:
            remove_pre_invocation_hook(stop_button)
    assert len(server.requests) == 1


def test_the_callers_deadline_bounds_the_attempts_and_the_retries(wire):
    with FakeServer([hang, hang, hang]) as server:
        provider, _ = make(wire, server, timeout_s=30, retry=RetryPolicy(max_retries=2, base_delay_s=0.5))
        request = ModelRequest(system="", timeout_s=0.2,
                               messages=[{"role": "user", "content": [{"type": "text", "text": "hi"}]}])
        with pytest.raises(ProviderError, match=r"timed out after 0.2s") as info:
            provider.complete(request)
    assert info.value.attempts == 1  # a retry would start after the 0.2 s the caller has left
    assert len(server.requests) <= 1  # the attempt may be abandoned before it reached the server


def test_an_openai_answer_without_choices_is_an_error_naming_the_provider():
    body = {"id": "chatcmpl-fake", "object": "chat.completion", "created": 1700000000, "model": "fake-model",
            "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 0, "total_tokens": 3}}
    with FakeServer([(200, body)]) as server:
        provider, _ = make("openai", server)
        with pytest.raises(ProviderError, match=r"openai model call failed: HTTP 200: the response has no choices"):
            ask(provider)
    assert len(server.requests) == 1
