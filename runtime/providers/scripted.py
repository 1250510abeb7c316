"""A provider that plays a list of replies in order: for tests and reproducible demos."""
from __future__ import annotations

import copy
import threading
from typing import Any, Callable, Optional

from ..messages import ModelReply, ModelRequest, ToolCall, blocks_text
from .base import Provider


class ScriptedProvider(Provider):
    """Plays `replies` in order across every call made through it, nested calls included.

    A `str` reply is a final answer; `{"tool_calls": [{"name": ..., "arguments": {...}}, ...]}` asks
    for tool calls (an optional "text" key adds text alongside). Every request is recorded in
    `.requests` as {"system": str, "messages": [...], "tools": [tool names]}.
    """

    name = "scripted"
    default_model = "scripted"

    def __init__(self, replies: Optional[list] = None, model: Optional[str] = None):
        super().__init__(model)
        self.replies = list(replies or [])
        self.requests: list[dict] = []
        self._next = 0
        self._lock = threading.Lock()

    def complete(self, request: ModelRequest, check: Optional[Callable[[], None]] = None) -> ModelReply:
        with self._lock:
            index = self._next
            self.requests.append({"system": request.system, "messages": copy.deepcopy(request.messages),
                                  "tools": request.tool_names()})
            if index >= len(self.replies):
                raise RuntimeError(
                    f"ScriptedProvider ran out of replies: call {index + 1} was made but only "
                    f"{len(self.replies)} replies were scripted (last request's user turn: "
                    f"{blocks_text(request.messages[0]['content'])[:120]!r})")
            self._next += 1
            script = self.replies[index]
        return _reply_from_script(script, index, request)

    @property
    def remaining(self) -> int:
        return len(self.replies) - self._next


def _reply_from_script(script: Any, index: int, request: ModelRequest) -> ModelReply:
    usage = {"input_tokens": sum(len(str(m.get("content", ""))) for m in request.messages) // 4,
             "output_tokens": len(str(script)) // 4}
    if isinstance(script, str):
        return ModelReply(text=script, usage=usage)
    if isinstance(script, dict) and isinstance(script.get("tool_calls"), list):
        calls = []
        for n, item in enumerate(script["tool_calls"]):
            if not isinstance(item, dict) or not isinstance(item.get("name"), str):
                raise ValueError(f"scripted reply {index}: tool_calls[{n}] needs a 'name' string, got {item!r}")
            calls.append(ToolCall(item.get("id") or f"call_{index}_{n}", item["name"], item.get("arguments", {})))
        return ModelReply(text=script.get("text", ""), tool_calls=calls, usage=usage)
    raise ValueError(f"scripted reply {index} must be a str or {{'tool_calls': [...]}}, got {script!r:.80}")
