"""A SIMULATED tool-calling model: offline, deterministic, no key. Not an LLM.

It exists so the app works with no model configured and so the recursion guard can be shown without
one. Its whole policy:

1. The task is the caller's text in the first user turn (blocks the runtime added are skipped).
2. First turn: call the tool whose name and description share the most words with the task. Every
   tool whose exact name appears in the task is called (in parallel) instead, if there are several.
   Arguments come from the task and the tool's schema (see `arguments_for`).
3. It HEEDS the situational prompt: a tool named in "[Execution context] ... INSIDE the agentic
   function `X`" (or on its "Call path:" line) is never called. `sim:naive` ignores the prompt and
   does what seed 000 says a weak model does: it calls the function it is running inside whenever that
   function is among its tools (its docstring matches the task best of all): the runaway the depth
   ceiling stops.
4. Once it has tool results it answers with a summary quoting them (an error result included), so it
   never loops on a failing call. `sim:naive` is a weak model that insists: when its last calls came
   back as errors (a refusal included) it makes the same calls again, once, which is what ends a
   runaway's run at the depth ceiling's second refusal.
"""
from __future__ import annotations

import re
from typing import Callable, Optional

from ..messages import ModelReply, ModelRequest, ToolCall, blocks_text
from .base import Provider

NAIVE = "naive"
_WORD = re.compile(r"[a-z0-9]+")
_INSIDE = re.compile(r"INSIDE the agentic function `([^`]+)`")
_CALL_PATH = re.compile(r"^Call path: (.+)$", re.MULTILINE)
# Words too common to say anything about which tool fits.
_STOPWORDS = frozenset("a an and are as at be by for from in into is it of on or the this to with".split())
_QUOTE_CHARS = 600


def words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower().replace("_", " ")) if w not in _STOPWORDS}


class SimProvider(Provider):
    """The simulated model. Model "heeding" (default) or "naive" (ignores the situational prompt)."""

    name = "sim"
    default_model = "heeding"

    def complete(self, request: ModelRequest, check: Optional[Callable[[], None]] = None) -> ModelReply:
        first = request.messages[0]["content"] if request.messages else []
        task = blocks_text(first, include_sources=False).strip()
        results = [m for m in request.messages if m.get("role") == "tool"]
        naive = (request.model or self.model) == NAIVE
        insisted = (_insisting_calls(request) if naive and request.tools and request.tool_choice != "none"
                    else None)
        if insisted:
            reply = ModelReply(tool_calls=insisted)
        elif results or request.tool_choice == "none" or not request.tools:
            reply = ModelReply(text=self._answer(task, results))
        else:
            inside = _INSIDE.findall(blocks_text(first))
            forbidden = set() if naive else forbidden_names(blocks_text(first))
            calls = self._running_function_call(task, request, inside[0]) if naive and inside else []
            calls = calls or self._choose_calls(task, request, forbidden)
            reply = ModelReply(tool_calls=calls) if calls else ModelReply(text=self._answer(task, []))
        reply.usage = {"input_tokens": sum(len(str(m.get("content", "")).split()) for m in request.messages),
                       "output_tokens": len(reply.text.split()) + 8 * len(reply.tool_calls)}
        return reply

    @staticmethod
    def _running_function_call(task: str, request: ModelRequest, name: str) -> list[ToolCall]:
        """A call of the function the model runs inside, if it is offered (what `sim:naive` prefers)."""
        offered = [t for t in request.tools if t["name"] == name]
        if not offered or request.tool_choice not in ("auto", "required", name):
            return []
        return [ToolCall(f"sim_{len(request.messages)}_0", name, arguments_for(offered[0], task))]

    def _choose_calls(self, task: str, request: ModelRequest, forbidden: set[str]) -> list[ToolCall]:
        tools = [t for t in request.tools if t["name"] not in forbidden]
        choice = request.tool_choice
        if isinstance(choice, str) and choice not in ("auto", "required"):
            tools = [t for t in tools if t["name"] == choice]
        named = [t for t in tools if re.search(rf"\b{re.escape(t['name'])}\b", task)]
        if len(named) > 1:
            chosen = named
        else:
            best = best_tool(task, tools, require_overlap=choice == "auto")
            chosen = [best] if best is not None else []
        return [ToolCall(f"sim_{len(request.messages)}_{i}", t["name"], arguments_for(t, task))
                for i, t in enumerate(chosen)]

    @staticmethod
    def _answer(task: str, results: list[dict]) -> str:
        if not results:
            return f"(simulated model) No tool fits, so here is a direct answer to: {task[:_QUOTE_CHARS]}"
        errors = [r for r in results if r.get("is_error")]
        lines = [f"- {r['name']}: {str(r['content'])[:_QUOTE_CHARS]}" for r in results]
        head = ("(simulated model) A tool call failed, so I stop here and report it."
                if errors else "(simulated model) Done. Tool results:")
        return head + "\n" + "\n".join(lines)


def _insisting_calls(request: ModelRequest) -> Optional[list[ToolCall]]:
    """The calls of the last assistant turn again (those still offered), when every one of them came back
    as an error and they have not been repeated already; else None."""
    messages = request.messages
    offered = {tool["name"] for tool in request.tools}
    assistants = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
    if not assistants:
        return None
    last = assistants[-1]
    calls = messages[last].get("tool_calls") or []
    results = [m for m in messages[last + 1:] if m.get("role") == "tool"]
    if not calls or not results or not all(r.get("is_error") for r in results):
        return None
    def shape(turn: dict) -> list:
        return [(c["name"], c.get("arguments")) for c in turn.get("tool_calls") or ()]
    if len(assistants) > 1 and shape(messages[assistants[-2]]) == shape(messages[last]):
        return None  # insisted once already
    return [ToolCall(f"sim_{len(messages)}_{i}", c["name"], c.get("arguments") or {})
            for i, c in enumerate(calls) if c["name"] in offered] or None


def forbidden_names(prompt_text: str) -> set[str]:
    """Functions the situational prompt says the model is inside (and every name on its call path)."""
    names = set(_INSIDE.findall(prompt_text))
    for path in _CALL_PATH.findall(prompt_text):
        names.update(part.strip() for part in path.split("→"))
    return names


def best_tool(task: str, tools: list[dict], require_overlap: bool = True) -> Optional[dict]:
    """The tool sharing the most words with the task; name words count double. Ties: first listed."""
    task_words = words(task)
    best, best_score = None, 0 if require_overlap else -1
    for tool in tools:
        score = 2 * len(task_words & words(tool["name"])) + len(task_words & words(tool.get("description") or ""))
        if score > best_score:
            best, best_score = tool, score
    return best


def arguments_for(tool: dict, task: str) -> dict:
    """Required parameters filled from the task: strings get the task, enums the best-matching option,
    numbers their default or 1, booleans their default or false, lists and objects their default or empty."""
    params = tool.get("parameters") or {}
    properties = params.get("properties") or {}
    arguments = {}
    for name in params.get("required") or []:
        arguments[name] = _value_for(properties.get(name) or {}, task)
    return arguments


def _value_for(schema: dict, task: str):
    if "default" in schema:
        return schema["default"]
    if schema.get("enum"):
        task_words = words(task)
        return max(schema["enum"], key=lambda option: len(words(str(option)) & task_words))
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind is None and schema.get("anyOf"):
        return _value_for(schema["anyOf"][0], task)
    return {"integer": 1, "number": 1, "boolean": False, "array": [], "object": {}}.get(kind, task)
