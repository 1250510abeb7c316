"""Anthropic messages with tools, through the official `anthropic` SDK."""
from __future__ import annotations

import os
from typing import Any, Optional

from ..messages import ModelReply, ModelRequest, clean_usage, parse_arguments
from .sdk import DEFAULT_MAX_TOKENS, SDKProvider, http_client

# Stop reasons meaning the reply was cut short, its text partial and its last tool_use's input perhaps too.
CUT_OFF = ("max_tokens", "model_context_window_exceeded")


class AnthropicProvider(SDKProvider):
    name = "anthropic"
    default_model = "claude-sonnet-4-5"
    api_key_env = "ANTHROPIC_API_KEY"
    base_url_env = "ANTHROPIC_BASE_URL"

    def reply_token_cap(self) -> int:
        return self.max_tokens or DEFAULT_MAX_TOKENS  # the Messages API requires one

    @classmethod
    def missing_credentials(cls, api_key: Optional[str], base_url: Optional[str]) -> Optional[str]:
        if api_key or os.environ.get("ANTHROPIC_AUTH_TOKEN"):
            return None
        return "no API key: set ANTHROPIC_API_KEY (or pass api_key=)"

    def make_client(self, timeout_s: float) -> Any:
        import anthropic
        return anthropic.Anthropic(api_key=self.api_key, base_url=self.base_url, timeout=timeout_s,
                                   max_retries=0, http_client=http_client(timeout_s))

    def sdk_errors(self):
        import anthropic
        return anthropic.APIStatusError, anthropic.APITimeoutError, anthropic.APIConnectionError

    def send(self, client: Any, request: ModelRequest, model: str) -> Any:
        kwargs: dict = {"model": model, "max_tokens": self.reply_token_cap(), "messages": to_anthropic_messages(request)}
        if request.system:
            kwargs["system"] = request.system
        if request.tools:
            kwargs["tools"] = [{"name": t["name"], "description": t.get("description") or "",
                                "input_schema": t.get("parameters") or {"type": "object", "properties": {}}}
                               for t in request.tools]
            kwargs["tool_choice"] = anthropic_tool_choice(request.tool_choice)
        return client.messages.create(**kwargs)

    def parse(self, response: Any) -> ModelReply:
        text = "".join(block.text for block in response.content if block.type == "text")
        if response.stop_reason == "refusal":
            raise self.refused(text, "stop_reason 'refusal'")
        if response.stop_reason in CUT_OFF:
            raise self.cut_off(f"stop_reason {response.stop_reason!r}")
        calls = []
        for index, block in enumerate(b for b in response.content if b.type == "tool_use"):
            call_id, name = self.call_identity(index, block.id, block.name)
            calls.append(parse_arguments(call_id, name, block.input))
        usage = getattr(response, "usage", None)
        return ModelReply(text=text, tool_calls=calls,
                          usage=clean_usage({"input_tokens": getattr(usage, "input_tokens", None),
                                             "output_tokens": getattr(usage, "output_tokens", None)}))


def anthropic_tool_choice(choice: Any) -> dict:
    named = {"auto": {"type": "auto"}, "none": {"type": "none"}, "required": {"type": "any"}}
    return named.get(choice) or {"type": "tool", "name": choice}


def _blocks(content: Any) -> list[dict]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    # Rebuilt text blocks drop the runtime's "source" marker; image and document blocks carry their data
    # under a "source" of their own, so they go as they are.
    return [{"type": "text", "text": b["text"]} if b.get("type") == "text" else b for b in content]


def to_anthropic_messages(request: ModelRequest) -> list[dict]:
    """Tool results go back as one user turn of tool_result blocks, as the protocol requires; a user turn
    right after them (the runtime's note on a refusal) joins that turn after its tool_result blocks."""
    messages: list[dict] = []
    for message in request.messages:
        role = message["role"]
        if role == "user":
            if messages and messages[-1]["role"] == "user":
                messages[-1]["content"].extend(_blocks(message["content"]))
            else:
                messages.append({"role": "user", "content": _blocks(message["content"])})
        elif role == "assistant":
            # Anthropic refuses a text block of only whitespace, which its own replies beside a tool_use can hold.
            text = message.get("content") or ""
            content = [{"type": "text", "text": text}] if text.strip() else []
            content += [{"type": "tool_use", "id": c["id"], "name": c["name"],
                         "input": c["arguments"] if isinstance(c["arguments"], dict) else {}}
                        for c in message.get("tool_calls") or ()]
            messages.append({"role": "assistant", "content": content})
        elif role == "tool":
            block = {"type": "tool_result", "tool_use_id": message["tool_call_id"],
                     "content": message["content"], "is_error": bool(message.get("is_error"))}
            if messages and messages[-1]["role"] == "user" and messages[-1]["content"] and \
                    messages[-1]["content"][-1].get("type") == "tool_result":
                messages[-1]["content"].append(block)
            else:
                messages.append({"role": "user", "content": [block]})
    return messages
