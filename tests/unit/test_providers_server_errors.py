"""What a real server's refusals turn into: tried once, the server's complaint named, the fix said.

The error bodies are the ones llama-cpp-python's server (0.3.36) sends, copied from its answers.
"""
import pytest

from runtime import Runtime, function
from runtime.environment import environment_problems
from runtime.providers.anthropic_provider import AnthropicProvider
from runtime.providers.openai_provider import OpenAIProvider
from runtime.retry import ProviderError

from .fakes.protocols import AnthropicWire, OpenAIWire
from .fakes.server import FakeServer
from .test_providers_http import ask, make

# llama-cpp-python's 500 for an assistant message with "content": null (abridged: 3 of its 7 errors).
VALIDATION_500 = (500, {"error": {"message": (
    "7 validation errors:\n  {'type': 'literal_error', 'loc': ('body', 'messages', 2, "
    "'ChatCompletionRequestSystemMessage', 'role'), 'msg': \"Input should be 'system'\", 'input': 'assistant', "
    "'ctx': {'expected': \"'system'\"}}\n  {'type': 'string_type', 'loc': ('body', 'messages', 2, "
    "'ChatCompletionRequestAssistantMessage', 'content'), 'msg': 'Input should be a valid string', 'input': None}\n"
    "  {'type': 'missing', 'loc': ('body', 'messages', 2, 'ChatCompletionRequestToolMessage', 'tool_call_id'), "
    "'msg': 'Field required', 'input': {}}\n\n  File \"llama_cpp/server/app.py\", line 376, in "
    "create_chat_completion\n    POST /v1/chat/completions"), "type": "internal_server_error", "param": None,
    "code": None}})
CONTEXT_400 = (400, {"error": {"message": (
    "This model's maximum context length is 512 tokens. However, you requested 913 tokens (913 in the messages, "
    "None in the completion). Please reduce the length of the messages or completion."),
    "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}})
KEYS = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENPROGRAM_MODEL")


@pytest.fixture
def no_keys(monkeypatch):
    for name in KEYS:
        monkeypatch.delenv(name, raising=False)


def test_a_500_listing_validation_errors_is_tried_once_and_names_the_field_the_server_refused():
    with FakeServer([VALIDATION_500, OpenAIWire.answer("never sent")]) as server:
        with pytest.raises(ProviderError) as info:
            ask(make("openai", server)[0])
    assert len(server.requests) == 1 and info.value.attempts == 1 and info.value.status == 500
    message = str(info.value)
    assert ("HTTP 500: 7 validation errors in the request: "
            "messages.2.ChatCompletionRequestAssistantMessage.content: Input should be a valid string") in message
    assert "Input should be 'system'" not in message and "File" not in message  # the union's noise, the trace


def test_fastapis_own_422_names_its_fields_too():
    body = {"detail": [{"type": "missing", "loc": ["body", "messages"], "msg": "Field required", "input": {}}]}
    with FakeServer([(422, body)]) as server:
        with pytest.raises(ProviderError, match=r"HTTP 422: 1 validation error in the request: messages: Field "
                                                r"required$"):
            ask(make("openai", server)[0])
    assert len(server.requests) == 1


@pytest.mark.parametrize("status", [400, 401, 404, 413, 422])
def test_a_4xx_but_408_409_429_is_tried_once_with_the_servers_words(status):
    with FakeServer([OpenAIWire.error(status, "the server's words"), OpenAIWire.answer("never sent")]) as server:
        with pytest.raises(ProviderError, match=rf"HTTP {status}: the server's words$"):
            ask(make("openai", server)[0])
    assert len(server.requests) == 1


def test_a_server_error_with_an_empty_message_says_the_server_gave_no_reason():
    with FakeServer([OpenAIWire.error(500, "")] * 3) as server:
        with pytest.raises(ProviderError, match=r"after 3 attempts\): HTTP 500: the server gave no reason$"):
            ask(make("openai", server)[0])


@pytest.mark.parametrize("status", [408, 409])
def test_a_408_or_409_is_tried_again(status):
    with FakeServer([OpenAIWire.error(status, "try later"), OpenAIWire.answer("fine")]) as server:
        assert ask(make("openai", server)[0]).text == "fine"
    assert len(server.requests) == 2


def test_a_context_length_refusal_ends_the_run_naming_the_models_context_and_the_prompts_size():
    @function(register_globally=False)
    def noop() -> str:
        """Nothing."""
        return ""

    with FakeServer([CONTEXT_400, OpenAIWire.answer("never sent")]) as server:
        provider, _ = make("openai", server)
        with pytest.raises(ProviderError) as info:
            Runtime(provider=provider).exec("a long conversation", tools=[noop])
    assert len(server.requests) == 1 and info.value.status == 400
    message = str(info.value)
    assert "the prompt does not fit the model's context (the model's context: 512 tokens; the prompt: 913 tokens)" \
        in message
    assert "shorten the conversation" in message and "The server said: This model's maximum" in message


@pytest.mark.parametrize("body", [
    {"error": {"message": "request (913 tokens) exceeds the available context size (512 tokens), try increasing it",
               "type": "exceed_context_size_error", "code": 400}},  # llama.cpp's llama-server
    {"error": {"message": "This model's maximum context length is 512 tokens. However, your messages resulted in "
                          "913 tokens. Please reduce the length of the messages.", "code": "context_length_exceeded"}},
])
def test_other_servers_context_refusals_are_read_alike(body):
    with FakeServer([(400, body)]) as server:
        with pytest.raises(ProviderError, match=r"\(the model's context: 512 tokens; the prompt: 913 tokens\)"):
            ask(make("openai", server)[0])


def test_anthropics_context_refusal_is_read_alike():
    refusal = AnthropicWire.error(400, "prompt is too long: 913 tokens > 512 maximum")
    with FakeServer([refusal, AnthropicWire.answer("never sent")]) as server:
        with pytest.raises(ProviderError, match=r"\(the model's context: 512 tokens; the prompt: 913 tokens\)"):
            ask(make("anthropic", server)[0])
    assert len(server.requests) == 1


def test_a_context_refusal_with_room_asked_for_the_reply_names_the_cap_setting():
    body = {"error": {"message": "This model's maximum context length is 4096 tokens. However, you requested "
                                 "5000 tokens (3000 in the messages, 2000 in the completion).", "code": None}}
    with FakeServer([(400, body)]) as server:
        with pytest.raises(ProviderError, match=r"context: 4096 tokens; the prompt: 3000 tokens\); lower "
                                                r"OPENPROGRAM_MAX_TOKENS \(now 2000"):
            ask(make("openai", server, max_tokens=2000)[0])


def test_a_missing_openai_key_and_base_url_is_named_at_the_first_call_with_no_attempt(no_keys):
    with pytest.raises(ProviderError) as info:
        ask(OpenAIProvider("gpt-4o-mini"))
    assert str(info.value) == ("openai model call failed: no response: no API key and no base URL: set "
                               "OPENAI_API_KEY for OpenAI, or OPENAI_BASE_URL for a compatible server that "
                               "takes no key (Ollama, vLLM, llama.cpp)")
    assert info.value.attempts == 1 and not info.value.retryable


def test_a_base_url_alone_or_a_key_alone_is_enough(no_keys):
    assert OpenAIProvider.missing_credentials(None, "http://127.0.0.1:11434/v1") is None
    assert OpenAIProvider.missing_credentials("sk-x", None) is None
    assert AnthropicProvider.missing_credentials(None, "http://proxy") is not None


@pytest.mark.parametrize("spec, env, words", [
    ("openai:gpt-4o-mini", {}, "OPENPROGRAM_MODEL names the openai provider, but there is no API key and no "
                               "base URL: set OPENAI_API_KEY"),
    ("anthropic:claude-haiku-4-5", {}, "OPENPROGRAM_MODEL names the anthropic provider, but there is no API key: "
                                       "set ANTHROPIC_API_KEY"),
    ("openai:llama3.1:8b", {"OPENAI_BASE_URL": "http://127.0.0.1:11434/v1"}, None),
    ("openai:gpt-4o-mini", {"OPENAI_API_KEY": "sk-x"}, None),
    ("sim", {}, None),
])
def test_the_start_up_check_names_a_missing_key_of_the_provider_the_model_setting_names(
        no_keys, monkeypatch, spec, env, words):
    monkeypatch.setenv("OPENPROGRAM_MODEL", spec)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    problems = [p for p in environment_problems() if p.startswith("OPENPROGRAM_MODEL")]
    assert (problems == []) if words is None else (len(problems) == 1 and words in problems[0])
