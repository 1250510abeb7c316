"""A plain function that plays the model: `Runtime(call=fn, model=...)`, the reference's constructor.

`fn(content, model=..., response_format=...)` gets the conversation as one list of content blocks (the
system prompt first, as `{"type": "text", "text": ..., "role": "system"}` like the reference's; then the
user turns' blocks as they are, the model's earlier replies and tool results as text blocks), `model` as
the Runtime was given it, and returns the reply text. Keyword arguments it does not declare are not passed, so `fn(content)` works
too. It answers in text only: it cannot ask for tool calls.
"""
from __future__ import annotations

import inspect
from typing import Callable, Optional

from ..messages import ModelReply, ModelRequest, text_block, to_text
from .base import Provider


def _accepted_keywords(fn: Callable) -> frozenset:
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return frozenset()
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        return frozenset({"model", "response_format"})
    return frozenset(p.name for p in parameters
                     if p.name in ("model", "response_format") and p.kind is not p.POSITIONAL_ONLY)


def conversation_blocks(request: ModelRequest) -> list[dict]:
    """The request's system prompt and turns as one list of content blocks, oldest first."""
    blocks: list[dict] = [{"type": "text", "text": request.system, "role": "system"}] if request.system else []
    for message in request.messages:
        role = message["role"]
        if role == "user":
            # The runtime's "source" marker goes from text blocks only: other blocks keep their own data.
            blocks += [{k: v for k, v in b.items() if k != "source"} if b.get("type") == "text" else b
                       for b in message["content"]]
        elif role == "assistant" and message.get("content"):
            blocks.append(text_block(f"[your earlier reply] {message['content']}"))
        elif role == "tool":
            blocks.append(text_block(f"[result of tool {message['name']}] {to_text(message['content'])}"))
    return blocks


class CallableProvider(Provider):
    """Wraps `call`, a function that plays the model, as a provider."""

    name = "call"
    default_model = "default"

    def __init__(self, call: Callable, model: Optional[str] = None):
        if not callable(call):
            raise TypeError(f"Runtime(call=...) takes a function that returns the reply text, got {call!r}")
        if inspect.iscoroutinefunction(call):
            raise TypeError("Runtime(call=...) takes a plain function; an async one is not supported here")
        super().__init__(model)
        self.call = call
        self._keywords = _accepted_keywords(call)

    def complete(self, request: ModelRequest, check: Optional[Callable[[], None]] = None) -> ModelReply:
        keywords = {"model": self.model, "response_format": None}
        reply = self.call(conversation_blocks(request), **{k: v for k, v in keywords.items() if k in self._keywords})
        if not isinstance(reply, str):
            raise TypeError(f"Runtime(call={getattr(self.call, '__name__', self.call)!r}) returned "
                            f"{type(reply).__name__}; it must return the reply text (a str)")
        return ModelReply(text=reply)
