"""OpenAI chat completions with tools, through the official `openai` SDK.

`OPENAI_BASE_URL` points it at any server speaking the protocol (Ollama, vLLM, llama.cpp). The requests
are built to pass the strictest of their request schemas (docs/model-servers.md says which were read):
an assistant turn's content is a string even beside tool calls (llama-cpp-python refuses null), a tool
call's arguments are a JSON object (Ollama and vLLM parse them), a user turn of text alone is one string
(Ollama splits a list of parts into separate messages; llama.cpp's templates print a list as it is).
"""
from __future__ import annotations

import json
from typing import Any, Optional
from urllib.parse import urlsplit

from ..messages import ModelReply, ModelRequest, blocks_text, clean_usage, parse_arguments, to_text
from ..retry import ProviderError
from .sdk import SDKProvider, http_client

# Hosts that are OpenAI's own API (anything else behind OPENAI_BASE_URL is a compatible server).
OPENAI_HOSTS = ("api.openai.com",)


class OpenAIProvider(SDKProvider):
    name = "openai"
    default_model = "gpt-4o-mini"
    api_key_env = "OPENAI_API_KEY"
    base_url_env = "OPENAI_BASE_URL"

    @classmethod
    def missing_credentials(cls, api_key: Optional[str], base_url: Optional[str]) -> Optional[str]:
        if api_key or base_url:
            return None
        return ("no API key and no base URL: set OPENAI_API_KEY for OpenAI, or OPENAI_BASE_URL for a "
                "compatible server that takes no key (Ollama, vLLM, llama.cpp)")

    def reply_cap_field(self) -> str:
        """The request field that caps the reply: OpenAI's own API wants max_completion_tokens (its
        reasoning models refuse max_tokens); llama-cpp-python and Ollama read only max_tokens and
        ignore the other, and vLLM reads both."""
        host = urlsplit(self.base_url).hostname if self.base_url else OPENAI_HOSTS[0]
        return "max_completion_tokens" if host in OPENAI_HOSTS else "max_tokens"

    def make_client(self, timeout_s: float) -> Any:
        import openai
        # Local servers (Ollama, llama.cpp) take no key, but the SDK insists on one.
        return openai.OpenAI(api_key=self.api_key or "no-key", base_url=self.base_url,
                             timeout=timeout_s, max_retries=0, http_client=http_client(timeout_s))

    def sdk_errors(self):
        import openai
        return openai.APIStatusError, openai.APITimeoutError, openai.APIConnectionError

    def send(self, client: Any, request: ModelRequest, model: str) -> Any:
        kwargs: dict = {"model": model, "messages": to_openai_messages(request)}
        if self.max_tokens is not None:
            kwargs[self.reply_cap_field()] = self.max_tokens
        if request.tools:
            kwargs["tools"] = [{"type": "function", "function": spec} for spec in request.tools]
            kwargs["tool_choice"] = openai_tool_choice(request.tool_choice, request.tool_names())
        return client.chat.completions.create(**kwargs)

    def parse(self, response: Any) -> ModelReply:
        if not response.choices:  # some servers answer a filtered or failed generation with none
            raise ProviderError(self.name, "the response has no choices (nothing was generated)", status=200)
        choice = response.choices[0]
        message = choice.message
        if message is None:
            raise ProviderError(self.name, "the reply's first choice has no message", status=200)
        text = _text(message.content, self.name)
        if getattr(message, "refusal", None):
            raise self.refused(message.refusal, "message.refusal")
        if choice.finish_reason == "content_filter":
            raise self.refused(text, "finish_reason 'content_filter': the provider's filter stopped the reply")
        if choice.finish_reason == "length":
            raise self.cut_off("finish_reason 'length'")
        calls = []
        for index, call in enumerate(message.tool_calls or []):
            function = call.function
            call_id, name = self.call_identity(index, call.id, getattr(function, "name", None))
            calls.append(parse_arguments(call_id, name, function.arguments))
        usage = getattr(response, "usage", None)
        return ModelReply(text=text, tool_calls=calls,
                          usage=clean_usage({"input_tokens": getattr(usage, "prompt_tokens", None),
                                             "output_tokens": getattr(usage, "completion_tokens", None),
                                             # a gateway's own figure for the call (OpenRouter's), in USD
                                             "cost_usd": getattr(usage, "cost", None)}))


def _text(content: Any, provider: str) -> str:
    """The reply's text: some servers send a list of content parts where the protocol has a string."""
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list):
        parts = [part.get("text") if isinstance(part, dict) else getattr(part, "text", None) for part in content]
        return "".join(part for part in parts if isinstance(part, str))
    raise ProviderError(provider, f"the reply's content must be a string, got {type(content).__name__}", status=200)


def openai_tool_choice(choice: Any, offered: list[str]) -> Any:
    """The wire form of a tool choice. "required" with one tool offered is sent as that tool named: the
    same demand, in the form every server takes (llama-cpp-python's function-calling format fails on
    "required" with a bare 500)."""
    if choice == "required" and len(offered) == 1:
        choice = offered[0]
    if choice in ("auto", "none", "required"):
        return choice
    return {"type": "function", "function": {"name": choice}}


def _user_content(blocks: Any) -> Any:
    if isinstance(blocks, str):
        return blocks
    if all(b.get("type") == "text" for b in blocks):
        return blocks_text(blocks)
    # Rebuilt text blocks drop the runtime's "source" marker; other blocks go as they are.
    return [{"type": "text", "text": b["text"]} if b.get("type") == "text" else b for b in blocks]


def _wire_arguments(call: dict) -> str:
    """A tool call's arguments as the JSON object string servers parse: arguments the model sent
    malformed (the call already failed, and its result says why) go back as {}."""
    arguments = call.get("arguments")
    if call.get("arguments_error") is not None or not isinstance(arguments, dict):
        arguments = {}
    return json.dumps(arguments, ensure_ascii=False, default=str)


def to_openai_messages(request: ModelRequest) -> list[dict]:
    messages: list[dict] = [{"role": "system", "content": request.system}] if request.system else []
    for message in request.messages:
        role = message["role"]
        if role == "user":
            messages.append({"role": "user", "content": _user_content(message["content"])})
        elif role == "assistant":
            out: dict = {"role": "assistant", "content": message.get("content") or ""}
            if message.get("tool_calls"):
                out["tool_calls"] = [{"id": c["id"], "type": "function",
                                      "function": {"name": c["name"], "arguments": _wire_arguments(c)}}
                                     for c in message["tool_calls"]]
            messages.append(out)
        elif role == "tool":
            messages.append({"role": "tool", "tool_call_id": message["tool_call_id"],
                             "content": to_text(message["content"])})
    return messages
