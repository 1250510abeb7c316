"""OpenAI chat completions with tools, through the official `openai` SDK.

`OPENAI_BASE_URL` points it at any server speaking the protocol (Ollama, vLLM, llama.cpp).
"""
from __future__ import annotations

import json
from typing import Any

from ..messages import ModelReply, ModelRequest, parse_arguments
from ..retry import ProviderError
from .sdk import SDKProvider, http_client


class OpenAIProvider(SDKProvider):
    name = "openai"
    default_model = "gpt-4o-mini"
    api_key_env = "OPENAI_API_KEY"
    base_url_env = "OPENAI_BASE_URL"

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
        if request.tools:
            kwargs["tools"] = [{"type": "function", "function": spec} for spec in request.tools]
            kwargs["tool_choice"] = openai_tool_choice(request.tool_choice)
        return client.chat.completions.create(**kwargs)

    def parse(self, response: Any) -> ModelReply:
        if not response.choices:  # some servers answer a filtered or failed generation with none
            raise ProviderError(self.name, "the response has no choices (nothing was generated)", status=200)
        message = response.choices[0].message
        if message is None:
            raise ProviderError(self.name, "the reply's first choice has no message", status=200)
        for index, call in enumerate(message.tool_calls or []):
            if call.function is None or not call.function.name:
                raise ProviderError(self.name, f"tool call {index} of the reply names no function", status=200)
        # Some local servers send no call ids; the protocol needs one to pair each result with its call.
        calls = [parse_arguments(call.id or f"call_{index}", call.function.name, call.function.arguments)
                 for index, call in enumerate(message.tool_calls or [])]
        usage = getattr(response, "usage", None)
        return ModelReply(text=message.content or "", tool_calls=calls,
                          usage={"input_tokens": getattr(usage, "prompt_tokens", 0) or 0,
                                 "output_tokens": getattr(usage, "completion_tokens", 0) or 0})


def openai_tool_choice(choice: Any) -> Any:
    if choice in ("auto", "none", "required"):
        return choice
    return {"type": "function", "function": {"name": choice}}


def _user_content(blocks: Any) -> Any:
    if isinstance(blocks, str):
        return blocks
    return [{"type": "text", "text": b["text"]} if b.get("type") == "text" else
            {k: v for k, v in b.items() if k != "source"} for b in blocks]


def to_openai_messages(request: ModelRequest) -> list[dict]:
    messages: list[dict] = [{"role": "system", "content": request.system}] if request.system else []
    for message in request.messages:
        role = message["role"]
        if role == "user":
            messages.append({"role": "user", "content": _user_content(message["content"])})
        elif role == "assistant":
            out: dict = {"role": "assistant", "content": message.get("content") or None}
            if message.get("tool_calls"):
                out["tool_calls"] = [
                    {"id": c["id"], "type": "function",
                     "function": {"name": c["name"],
                                  "arguments": c.get("raw_arguments") or json.dumps(c["arguments"])}}
                    for c in message["tool_calls"]]
            messages.append(out)
        elif role == "tool":
            messages.append({"role": "tool", "tool_call_id": message["tool_call_id"],
                             "content": message["content"]})
    return messages
