"""A recorded node as an OpenTelemetry span, after OpenTelemetry's GenAI semantic conventions.

A code node of an agentic function is an `invoke_agent` span (`gen_ai.agent.name`), one of a plain
`@function` an `execute_tool` span (`gen_ai.tool.name`), a model call a `chat` span
(`gen_ai.request.model`, `gen_ai.usage.input_tokens`, `gen_ai.usage.output_tokens`); each is named
"<operation> <name>" as the conventions ask, and carries what only this project knows:
`openprogram.depth` (the nesting level), `openprogram.nesting` (the recursion guard's per-name count),
`openprogram.refusal` (what refused it, "" if nothing) and `openprogram.status`.

Ids come from the record, so a node's span is made whenever its node ends, children before their
callers: the trace id is the session's UUID, a span's id its node's id, its parent's the caller's node id.
"""
from __future__ import annotations

import uuid
from datetime import datetime
from typing import Optional

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

INVOKE_AGENT, EXECUTE_TOOL, CHAT = "invoke_agent", "execute_tool", "chat"
SCOPE = InstrumentationScope("openprogram")
# Statuses that end a span as failed; `cancelled` (a stop asked for) is no failure of the call.
FAILED = frozenset({"error", "refused", "interrupted"})
MAX_STATUS_TEXT = 1000


def operation(node: dict) -> str:
    """The GenAI operation of a node: only agentic calls are counted by the recursion guard."""
    if node["kind"] == "llm":
        return CHAT
    return INVOKE_AGENT if node["name_depth"] else EXECUTE_TOOL


def attributes(session_id: str, node: dict) -> dict:
    op = operation(node)
    found = {"gen_ai.operation.name": op, "openprogram.depth": node["depth"],
             "openprogram.nesting": node["name_depth"], "openprogram.refusal": node["refusal"] or "",
             "openprogram.status": node["status"], "openprogram.session_id": session_id,
             "openprogram.seq": node["seq"]}
    if op == CHAT:
        found["gen_ai.request.model"] = node["model"] or ""
        usage = node["usage"] or {}
        for name in ("input_tokens", "output_tokens"):
            if isinstance(usage.get(name), int):
                found[f"gen_ai.usage.{name}"] = usage[name]
        if node.get("replayed"):
            found["openprogram.replayed"] = True
    else:
        found["gen_ai.agent.name" if op == INVOKE_AGENT else "gen_ai.tool.name"] = node["name"]
    if node["status"] in FAILED and node["error"]:
        found["error.type"] = node["error"].split(":", 1)[0]
    return found


def span_name(node: dict) -> str:
    op = operation(node)
    subject = (node["model"] or "") if op == CHAT else node["name"]
    return f"{op} {subject}".strip()


def _nanos(iso_time: Optional[str]) -> Optional[int]:
    return int(datetime.fromisoformat(iso_time).timestamp() * 1e9) if iso_time else None


def _context(trace_id: int, node_id) -> SpanContext:
    return SpanContext(trace_id, int(node_id), is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED))


def _status(node: dict) -> Status:
    if node["status"] in FAILED:
        return Status(StatusCode.ERROR, (node["error"] or node["status"])[:MAX_STATUS_TEXT])
    return Status(StatusCode.OK) if node["status"] == "completed" else Status(StatusCode.UNSET)


def _events(node: dict, end: Optional[int]) -> tuple:
    """A failed call's exception as the conventions' `exception` event, its traceback included."""
    if not node.get("traceback"):
        return ()
    kind, _, message = node["error"].partition(": ")
    return (Event("exception", {"exception.type": kind, "exception.message": message,
                                "exception.stacktrace": node["traceback"]}, timestamp=end),)


def node_span(session_id: str, node: dict, resource: Resource) -> ReadableSpan:
    """The ended span of `node` (its record, `Node.as_dict()`) of session `session_id`."""
    trace_id = uuid.UUID(session_id).int
    start = _nanos(node["started_at"])
    end = _nanos(node["finished_at"]) or start
    return ReadableSpan(
        name=span_name(node), context=_context(trace_id, node["id"]),
        parent=_context(trace_id, node["parent"]) if node["parent"] else None, resource=resource,
        attributes=attributes(session_id, node), events=_events(node, end),
        kind=SpanKind.CLIENT if node["kind"] == "llm" else SpanKind.INTERNAL, status=_status(node),
        start_time=start, end_time=end, instrumentation_scope=SCOPE)
