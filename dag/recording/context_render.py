"""The text of the DAG a model call inside a function may see: its `render_range`, filtered by `expose`.

Two slices, both by `seq`, both counting only nodes the viewer may see:
- `callers`: nodes written before the viewer's frame started (None = all, 0 = none, N = the latest N);
- `subcalls`: nodes inside the viewer's frame written since (-1 = all, 0 = none, N = the latest N).
Nodes of parallel branches written after the frame started are in neither.

Visibility follows `expose`, the outward-facing setting of the function that owns a node. The frames
on the viewer's own call chain are not "other functions": the viewer sees their calls (with docstring)
and their model exchanges, and always its own earlier model exchanges unless `subcalls` cuts them.
Every other function shows, per its expose:
- `io`: its call and result, nothing inside;
- `llm`: its own model exchanges only, not its call, result or nested calls;
- `full`: docstring, call, result and everything inside (each nested function again per its expose).

Code nodes render as `{doc}\n\n{name}({args})` and their result; llm nodes as what the exchange
added (the caller's turn or the tool results, without the runtime's situational and context blocks)
and the reply. Values are cut to VALUE_LIMIT characters and the whole text to CONTEXT_LIMIT (the
latest nodes are kept): this is a prompt, the DAG keeps everything.
"""
from __future__ import annotations

import json
from typing import Any, Optional

from ..models import Node
from .context_choice import BEFORE, INSIDE, ContextChoice
from .context_shapes import NodeSource, SessionShapes
from .values import truncate

DEFAULT_RANGE = {"callers": None, "subcalls": -1}
VALUE_LIMIT = 2000
# The whole rendered context: past it the oldest chosen nodes are left out (and said to be).
CONTEXT_LIMIT = 100_000
# The most calls the left-out notice can count: a session's `seq` is a 32-bit column.
_MOST_LEFT_OUT = 2**32 - 1
# Nodes read per query while walking back; the text of the chosen ones is read after, per chunk.
_CHUNK = 200
_TITLES = {BEFORE: "Earlier in this session:", INSIDE: "So far in this call:"}


def render_frame_context(session_id, node_id: int, seq: Optional[int],
                         render_range: Optional[dict]) -> Optional[str]:
    """The context text for a model call made in the frame recorded as `node_id`, or None if empty,
    from the session's stored nodes.

    It reads only what the range reaches, newest first, and stops once CONTEXT_LIMIT is full
    (`context_choice`): its cost follows what it shows, not the session's length.
    """
    return render_context_of(SessionShapes(session_id), node_id, seq, render_range)


def render_context_of(nodes: NodeSource, node_id: int, seq: Optional[int],
                      render_range: Optional[dict]) -> Optional[str]:
    """`render_frame_context` over any source of the session's nodes (a run's own, in memory)."""
    limits = {**DEFAULT_RANGE, **(render_range or {})}
    if limits["callers"] == 0 and limits["subcalls"] == 0:
        return None
    choice = ContextChoice.of(nodes, node_id, seq, limits, _CHUNK)
    if choice is None:
        return None
    shown = _render_latest(choice)
    left_out = choice.chosen_count() - sum(len(blocks) for blocks in shown.values())
    sections = [f"{_TITLES[part]}\n\n" + "\n\n".join(reversed(blocks)) for part, blocks in shown.items() if blocks]
    if left_out:
        sections.insert(0, left_out_notice(left_out))
    return "\n\n".join(sections) or None


def left_out_notice(count: int) -> str:
    return f"({count} earlier calls left out: the context is limited to {CONTEXT_LIMIT:,} characters)"


def text_budget() -> int:
    """What the nodes' texts (each counted with the blank line after it) may take of CONTEXT_LIMIT: the
    rest is kept for the left-out notice and the section titles, so the whole text stays within it."""
    framing = len(left_out_notice(_MOST_LEFT_OUT)) + sum(len(title) + 2 for title in _TITLES.values())
    return CONTEXT_LIMIT - framing


def _render_latest(choice: ContextChoice) -> dict:
    """{slice: texts, newest first} of the latest chosen nodes that fit in `text_budget()` characters."""
    shown, used, budget = {BEFORE: [], INSIDE: []}, 0, text_budget()
    chain, nodes = choice.view.chain, choice.view.shapes
    kept = nodes.rendered
    for part in choice.newest_first():
        texts = nodes.texts([node["id"] for _, node in part if kept is None or node["id"] not in kept
                             or node["id"] in chain])
        for name, node in part:
            # Kept texts are those of calls outside the viewer's chain (which shows their docstrings).
            insider = node["id"] in chain
            text = kept.get(node["id"]) if kept is not None and not insider else None
            if text is None:
                if node["id"] not in texts:  # gone only if the session was deleted meanwhile
                    continue
                row = {**node, **texts[node["id"]]}
                text = _render(row, insider=insider)
                if kept is not None and not insider and row["status"] in Node.TERMINAL:
                    kept[node["id"]] = text  # an ended call's text changes no more
            used += len(text) + 2
            if used > budget:
                return shown
            shown[name].append(text)
    return shown


def _render(node: dict, *, insider: bool) -> str:
    if node["kind"] == Node.Kind.LLM:
        return _render_llm(node, node["input"])
    call = f"{node['name']}({_arguments(node['input'])})"
    if insider or node["expose"] == "full":
        doc = (node["doc"] or "").strip()
        call = f"{doc}\n\n{call}" if doc else call
    return f"{call}\n{_outcome(node)}"


def _outcome(node: dict) -> str:
    status = node["status"]
    if status == Node.Status.COMPLETED:
        return f"-> {_value(node['output'])}"
    if status == Node.Status.RUNNING:
        return "-> (still running)"
    return f"-> {status}: {truncate(node['error'], VALUE_LIMIT)}" if node["error"] else f"-> {status}"


def _render_llm(node: dict, request: Any) -> str:
    asked = truncate(_new_input(request), VALUE_LIMIT)
    lines = [f"[model call{' ' + node['model'] if node['model'] else ''}] {asked}".rstrip()]
    reply = node["output"] or {}
    if reply.get("text"):
        lines.append(f"-> {truncate(str(reply['text']), VALUE_LIMIT)}")
    for call in reply.get("tool_calls") or []:
        if isinstance(call, dict):
            lines.append(f"-> calls {call.get('name', '?')}({_arguments(call.get('arguments'))})")
    if node["status"] != Node.Status.COMPLETED:
        lines.append(_outcome(node))
    return "\n".join(lines)


def _new_input(request: Any) -> str:
    """What this exchange added after the model last spoke: the user's turn or the tool results.

    Earlier turns of a tool-calling loop are repeated in every later request; they are rendered once,
    with the exchange that produced them.
    """
    parts = []
    for message in new_messages(request):
        if not isinstance(message, dict):
            continue
        text = _message_text(message.get("content"))
        if message.get("role") == "tool":
            text = f"{message.get('name', 'tool')} returned: {text}"
        if text:
            parts.append(text)
    return "\n".join(parts)


def new_messages(request: Any) -> list:
    """The messages of a recorded model request after the model last spoke: all a context renders of it."""
    messages = request.get("messages") if isinstance(request, dict) else None
    if not isinstance(messages, list):
        return []
    start = 0
    for index, message in enumerate(messages):
        if isinstance(message, dict) and message.get("role") == "assistant":
            start = index + 1
    return messages[start:]


def _message_text(content: Any) -> str:
    """The caller's text of a message. Blocks with a `source` (the situational prompt, a rendered
    context) were added by the runtime; rendering them again would nest contexts inside contexts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(block.get("text", "")) for block in content
                         if isinstance(block, dict) and block.get("type") == "text" and not block.get("source"))
    return ""


def _arguments(arguments: Any) -> str:
    if isinstance(arguments, dict):
        return ", ".join(f"{name}={_value(value, quote=True)}" for name, value in arguments.items())
    if arguments in (None, "", [], {}):
        return ""
    return _value(arguments, quote=True)


def _value(value: Any, quote: bool = False) -> str:
    if isinstance(value, str) and not quote:
        return truncate(value, VALUE_LIMIT)
    return truncate(json.dumps(value, ensure_ascii=False), VALUE_LIMIT)
