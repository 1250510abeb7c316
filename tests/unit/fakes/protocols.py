"""Response bodies in each provider's wire format, and how to read what the SDK sent."""
from __future__ import annotations

import json


class OpenAIWire:
    name = "openai"
    path = "/v1/chat/completions"

    @staticmethod
    def base_url(server_url: str) -> str:
        return server_url + "/v1"

    @staticmethod
    def answer(text: str, input_tokens: int = 11, output_tokens: int = 7) -> tuple:
        return 200, _openai_body({"role": "assistant", "content": text}, "stop", input_tokens, output_tokens)

    @staticmethod
    def tool_calls(*calls, raw: bool = False) -> tuple:
        """calls: (id, name, arguments dict, or a raw argument string when raw=True)."""
        message = {"role": "assistant", "content": None, "tool_calls": [
            {"id": cid, "type": "function",
             "function": {"name": name, "arguments": args if raw else json.dumps(args)}}
            for cid, name, args in calls]}
        return 200, _openai_body(message, "tool_calls", 20, 9)

    @staticmethod
    def error(status: int, message: str) -> tuple:
        return status, {"error": {"message": message, "type": "invalid_request_error", "code": None}}

    @staticmethod
    def tool_results(body: dict) -> dict:
        """{tool_call_id: content} of the tool results the SDK sent."""
        return {m["tool_call_id"]: m["content"] for m in body["messages"] if m["role"] == "tool"}

    @staticmethod
    def tool_names(body: dict) -> list[str]:
        return [t["function"]["name"] for t in body.get("tools", [])]

    @staticmethod
    def system(body: dict):
        return next((m["content"] for m in body["messages"] if m["role"] == "system"), None)


def _openai_body(message: dict, finish: str, input_tokens: int, output_tokens: int) -> dict:
    return {"id": "chatcmpl-fake", "object": "chat.completion", "created": 1700000000, "model": "fake-model",
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": {"prompt_tokens": input_tokens, "completion_tokens": output_tokens,
                      "total_tokens": input_tokens + output_tokens}}


class AnthropicWire:
    name = "anthropic"
    path = "/v1/messages"

    @staticmethod
    def base_url(server_url: str) -> str:
        return server_url

    @staticmethod
    def answer(text: str, input_tokens: int = 11, output_tokens: int = 7) -> tuple:
        return 200, _anthropic_body([{"type": "text", "text": text}], "end_turn", input_tokens, output_tokens)

    @staticmethod
    def tool_calls(*calls, raw: bool = False) -> tuple:
        content = [{"type": "tool_use", "id": cid, "name": name, "input": args} for cid, name, args in calls]
        return 200, _anthropic_body(content, "tool_use", 20, 9)

    @staticmethod
    def error(status: int, message: str) -> tuple:
        kind = {400: "invalid_request_error", 429: "rate_limit_error"}.get(status, "api_error")
        return status, {"type": "error", "error": {"type": kind, "message": message}}

    @staticmethod
    def tool_results(body: dict) -> dict:
        return {b["tool_use_id"]: b["content"] for m in body["messages"] if m["role"] == "user"
                for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_result"}

    @staticmethod
    def tool_names(body: dict) -> list[str]:
        return [t["name"] for t in body.get("tools", [])]

    @staticmethod
    def system(body: dict):
        return body.get("system")


def _anthropic_body(content: list, stop: str, input_tokens: int, output_tokens: int) -> dict:
    return {"id": "msg_fake", "type": "message", "role": "assistant", "model": "fake-model",
            "content": content, "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens}}
