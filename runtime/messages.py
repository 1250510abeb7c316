"""The provider-neutral shapes a model call is made of: content blocks, turns, requests and replies.

Providers translate these to and from their wire formats; the loop, the recorder and the scripted and
simulated models only ever see these. A conversation is a list of plain dicts:

    {"role": "user", "content": [{"type": "text", "text": "..."}, ...]}
    {"role": "assistant", "content": "text", "tool_calls": [{"id", "name", "arguments"}, ...]}
    {"role": "tool", "tool_call_id": "...", "name": "...", "content": "result text", "is_error": bool}

Text blocks the runtime adds itself carry a "source" key ("situational", "context") so that a reader
(the simulated model, a test) can tell them from the caller's own content; providers drop the key from
text blocks only, since other blocks (Anthropic's image and document blocks) carry their data under it.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any, Optional

# The user's content may not be arbitrarily large: a model call is made of it, recorded and shown.
MAX_CONTENT_CHARS = 2_000_000


def text_block(text: str, source: Optional[str] = None) -> dict:
    block = {"type": "text", "text": text}
    if source is not None:
        block["source"] = source
    return block


def normalize_content(content: Any) -> list[dict]:
    """`content` as a list of blocks: a str becomes one text block; blocks are checked, not changed."""
    if isinstance(content, str):
        blocks = [text_block(content)]
    elif isinstance(content, dict):
        blocks = [content]
    elif isinstance(content, (list, tuple)):
        blocks = [text_block(b) if isinstance(b, str) else b for b in content]
    else:
        raise TypeError(f"content must be a str or a list of blocks like {{'type': 'text', 'text': '...'}}, "
                        f"got {type(content).__name__}")
    size = 0
    for index, block in enumerate(blocks):
        if not isinstance(block, dict) or "type" not in block:
            raise TypeError(f"content[{index}] must be a dict with a 'type' key, got {block!r:.80}")
        if block["type"] == "text":
            if not isinstance(block.get("text"), str):
                raise TypeError(f"content[{index}] is a text block, so its 'text' must be a str")
            size += len(block["text"])
    if size > MAX_CONTENT_CHARS:
        raise ValueError(f"content is {size} characters; the limit is {MAX_CONTENT_CHARS}")
    return blocks


def blocks_text(blocks: Any, include_sources: bool = True) -> str:
    """The text of a turn's content, text blocks joined by blank lines."""
    if isinstance(blocks, str):
        return blocks
    return "\n\n".join(b["text"] for b in blocks or ()
                       if b.get("type") == "text" and (include_sources or "source" not in b))


def to_text(value: Any) -> str:
    """A tool result as the text a model reads: strings as they are, anything else as JSON."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(value)


@dataclass
class ToolCall:
    """One tool call a model asked for. `arguments_error` says why the raw arguments did not parse."""

    id: str
    name: str
    arguments: Any = field(default_factory=dict)
    arguments_error: Optional[str] = None
    raw_arguments: Optional[str] = None

    def as_dict(self) -> dict:
        data = {"id": self.id, "name": self.name, "arguments": self.arguments}
        if self.arguments_error is not None:
            data["arguments_error"] = self.arguments_error
            data["raw_arguments"] = self.raw_arguments
        return data


def parse_arguments(call_id: str, name: str, raw: Any) -> ToolCall:
    """A ToolCall from a wire-format argument string (or object); bad JSON is kept, not raised."""
    if raw is None or raw == "":
        return ToolCall(call_id, name, {})
    if isinstance(raw, dict):
        return ToolCall(call_id, name, raw)
    if not isinstance(raw, str):
        return ToolCall(call_id, name, {}, f"arguments must be a JSON object, got {type(raw).__name__}", repr(raw))
    try:
        parsed = json.loads(raw)
    except ValueError as exc:
        return ToolCall(call_id, name, {}, f"arguments are not valid JSON ({exc})", raw)
    except RecursionError:  # must not escape: a RecursionError is also how the depth ceiling ends a run
        return ToolCall(call_id, name, {}, "arguments are nested too deeply to parse; send a flat JSON object", raw)
    if not isinstance(parsed, dict):
        return ToolCall(call_id, name, {}, f"arguments must be a JSON object, got {type(parsed).__name__}", raw)
    return ToolCall(call_id, name, parsed, None, raw)


def token_count(value: Any) -> int:
    """A usage number as a non-negative int; anything else a server sends ("n/a", -5, 1.5) counts as 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


# What a usage may hold beside its two token counts: it is stored with its node and streamed to every
# viewer, so a provider of one's own must not make it large.
MAX_USAGE_EXTRAS = 32
MAX_USAGE_NAME_CHARS = 64


def clean_usage(usage: Any) -> dict:
    """`usage` with "input_tokens" and "output_tokens" as non-negative ints, whatever a provider returned,
    and up to MAX_USAGE_EXTRAS other counts it reports (cached or reasoning tokens, say): those with a
    name of at most MAX_USAGE_NAME_CHARS characters and a finite number as value (no bool; an int within
    64 bits)."""
    usage = usage if isinstance(usage, dict) else {}
    extras = {}
    for name, value in usage.items():
        if len(extras) == MAX_USAGE_EXTRAS:
            break
        if not isinstance(name, str) or len(name) > MAX_USAGE_NAME_CHARS or name in ("input_tokens", "output_tokens"):
            continue
        if isinstance(value, bool):
            continue
        # abs(x) < inf is False for an infinity and for NaN; an int past 64 bits is no count (and one
        # of thousands of digits cannot even be written as JSON).
        if (isinstance(value, int) and abs(value) < 2**63) or (isinstance(value, float) and abs(value) < float("inf")):
            extras[name] = value
    return {**extras, "input_tokens": token_count(usage.get("input_tokens")),
            "output_tokens": token_count(usage.get("output_tokens"))}


def unique_call_ids(calls: list, seen: set, turn: int) -> list:
    """`calls` with every id unique among `seen` (the ids of the exec so far, updated here): a missing or
    repeated id gets the turn and the call's index, so each tool result pairs with one call."""
    unique = []
    for index, call in enumerate(calls):
        call_id = call.id if isinstance(call.id, str) else ""  # a provider of one's own may send any id
        if not call_id or call_id in seen:
            base = f"{call_id or 'call'}_t{turn}_{index}"
            call_id, n = base, 1
            while call_id in seen:
                call_id, n = f"{base}_{n}", n + 1
            call = replace(call, id=call_id)
        seen.add(call_id)
        unique.append(call)
    return unique


@dataclass
class ModelReply:
    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: dict = field(default_factory=lambda: {"input_tokens": 0, "output_tokens": 0})
    # Served from a recorded run by a replay (runtime.providers.replay), not asked of a model.
    replayed: bool = False

    def as_dict(self) -> dict:
        reply = {"text": self.text, "tool_calls": [c.as_dict() for c in self.tool_calls]}
        if self.replayed:
            reply["replayed"] = True
        return reply

    @property
    def total_tokens(self) -> int:
        usage = clean_usage(self.usage)
        return usage["input_tokens"] + usage["output_tokens"]

    def as_message(self) -> dict:
        message = {"role": "assistant", "content": self.text}
        if self.tool_calls:
            message["tool_calls"] = [c.as_dict() for c in self.tool_calls]
        return message


@dataclass
class ModelRequest:
    """What one model call sends. `tools` are tool specs ({"name", "description", "parameters"}).

    `tool_choice` is "auto", "none", "required" or a tool name. `timeout_s` caps this call, its retries
    included, at providers that wait on a server (the SDK ones; their own per-attempt timeout still
    applies when it is shorter); the others (sim, scripted, a `call=` function) ignore it.
    """

    system: str
    messages: list
    tools: list = field(default_factory=list)
    tool_choice: Any = "auto"
    model: Optional[str] = None
    timeout_s: Optional[float] = None

    def tool_names(self) -> list[str]:
        return [t["name"] for t in self.tools]

    def for_record(self) -> dict:
        """The request as the recorder and the ScriptedProvider keep it (a snapshot, tool names only)."""
        return {"system": self.system, "messages": [dict(m) for m in self.messages],
                "tools": self.tool_names(), "model": self.model}


def tool_result_message(call: ToolCall, text: str, is_error: bool) -> dict:
    return {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": text, "is_error": is_error}
