"""Item 15: a 200 reply that does not follow the protocol (an HTML page, `message: null`, a tool call without
`function`, a cut-off JSON body) ends the call with an error naming the provider and the status, never a
bare AttributeError or JSONDecodeError; and a run that gets one ends with that error."""
import json

import pytest

from runtime import function
from runtime.providers.anthropic_provider import AnthropicProvider
from runtime.providers.openai_provider import OpenAIProvider
from runtime.retry import ProviderError, RetryPolicy
from runtime.runtime import Runtime
from tests.unit.fakes.protocols import AnthropicWire, OpenAIWire
from tests.unit.fakes.server import FakeServer, Raw

PROVIDERS = {"openai": (OpenAIProvider, OpenAIWire), "anthropic": (AnthropicProvider, AnthropicWire)}
HTML = (200, Raw(b"<!doctype html><html><body>Sign in to the proxy</body></html>", "text/html"))


def truncated(wire):
    _, body = wire.answer("a complete answer")
    return 200, Raw(json.dumps(body).encode()[:50])


def openai_body(**message):
    _, body = OpenAIWire.answer("x")
    body["choices"][0]["message"] = message.get("message", body["choices"][0]["message"])
    return 200, body


def failure(provider_name, reply) -> ProviderError:
    cls, wire = PROVIDERS[provider_name]
    with FakeServer([reply, wire.answer("not reached")]) as server:
        provider = cls("fake-model", api_key="k", base_url=wire.base_url(server.url),
                       retry=RetryPolicy(max_retries=2, base_delay_s=0.001))
        with pytest.raises(ProviderError) as caught:
            Runtime(provider=provider).llm("hello")
    assert len(server.requests) == 1  # a malformed reply is not retried
    error = caught.value
    assert error.provider == provider_name and error.status == 200
    assert str(error).startswith(f"{provider_name} model call failed: HTTP 200: ")
    return error


@pytest.mark.parametrize("provider_name", sorted(PROVIDERS))
def test_an_html_page(provider_name):
    message = str(failure(provider_name, HTML))
    assert "not JSON" in message and "Sign in to the proxy" in message


@pytest.mark.parametrize("provider_name", sorted(PROVIDERS))
def test_a_cut_off_json_body(provider_name):
    assert "malformed or cut off" in str(failure(provider_name, truncated(PROVIDERS[provider_name][1])))


def test_openai_message_null():
    assert "no message" in str(failure("openai", openai_body(message=None)))


def test_openai_tool_call_without_function():
    message = {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function"}]}
    assert "tool call 0" in str(failure("openai", openai_body(message=message)))


def test_anthropic_content_null():
    _, body = AnthropicWire.answer("x")
    body["content"] = None
    assert "does not follow the protocol" in str(failure("anthropic", (200, body)))


def test_a_tool_loop_run_ends_with_the_named_error():
    @function
    def lookup(city: str) -> str:
        """Look up a city."""
        return "sunny"

    script = [OpenAIWire.tool_calls(("c1", "lookup", {"city": "Oslo"})), HTML]
    with FakeServer(script) as server:
        provider = OpenAIProvider("fake-model", api_key="k", base_url=OpenAIWire.base_url(server.url),
                                  retry=RetryPolicy(max_retries=0))
        with pytest.raises(ProviderError, match=r"^openai model call failed: HTTP 200: the reply is not JSON"):
            Runtime(provider=provider).exec("weather?", tools=[lookup])
    assert len(server.requests) == 2
