"""Example bodies for the API docs, taken from real runs of the example functions on the simulated model.

Tests post the request examples and compare the answers with the response examples (same keys, the same
error text), so the docs show what the server really says.
"""
from __future__ import annotations

from drf_spectacular.utils import OpenApiExample

LAUNCH_SLOW_COUNT = {"function": "slow_count", "args": {"n": 5, "delay_s": 0}}
LAUNCH_WITH_BUDGET_AND_MODEL = {"function": "wiki_agent",
                                "args": {"question": "How does the recursion guard work?"},
                                "budget": {"max_llm_calls": 20, "timeout_s": 60}, "model": "sim:naive"}
LAUNCH_OUT_OF_RANGE = {"function": "slow_count", "args": {"n": 0, "delay_s": 0}}
OUT_OF_RANGE_ERROR = {"args": {"n": ["must be from 1 to 10000, got 0"]}}
LAUNCH_LIMITED = {"detail": "local already has 4 sessions queued or running; the limit is 4 (setting "
                            "OPENPROGRAM_MAX_ACTIVE_RUNS_PER_USER): wait for one to end, or stop one"}

_SESSION_ID = "f5c32d6e-c283-460e-aca0-14e7a9dfc245"
QUEUED_SESSION = {
    "id": _SESSION_ID, "function": "slow_count", "args": {"n": 5, "delay_s": 0}, "status": "queued",
    "phase": "queued", "result": None, "error": "", "cancel_requested": False, "attended": True,
    "pause_requested": False, "budget": None,
    "budget_spend": None, "launch_budget": None, "model": "sim", "rev": 0, "node_count": 0,
    "created_at": "2026-12-01T13:06:34.005047+00:00", "started_at": None, "finished_at": None, "worker": None,
    "replay_of": None, "forked_from": None, "counts": {}, "usage": {"llm_calls": 0, "input_tokens": 0, "output_tokens": 0}, "warning": "",
    "wall_ms": None, "cost_usd": 0.0, "cost_unknown_calls": 0,
}
_COMPLETED = {"status": "completed", "phase": "completed", "result": 5, "rev": 13, "node_count": 6,
              "started_at": "2026-12-01T13:06:34.020714+00:00", "finished_at": "2026-12-01T13:06:34.026925+00:00",
              "worker": "vm:21744"}
COMPLETED_SESSION = {**QUEUED_SESSION, **_COMPLETED, "counts": {"completed": 6}, "wall_ms": 6}
REFUSED_SESSION = {
    **QUEUED_SESSION, "id": "61ab907f-ede2-4b88-aea7-40f0a0ce3bee", "function": "runaway_agent",
    "args": {"task": "Summarise the notes"}, "status": "error", "phase": "error",
    "error": "DepthCeilingExceeded: agentic function runaway_agent exceeded max nesting depth 5 — possible "
             "runaway recursion",
    "rev": 26, "node_count": 13, "created_at": "2026-12-01T13:08:17.986030+00:00",
    "started_at": "2026-12-01T13:08:17.991854+00:00", "finished_at": "2026-12-01T13:08:18.004328+00:00",
    "worker": "vm:29251", "counts": {"completed": 6, "error": 5, "refused": 2},
    "usage": {"llm_calls": 6, "input_tokens": 1815, "output_tokens": 48}, "warning": "2 refused", "wall_ms": 12,
}
CANCELLED_SESSION = {**QUEUED_SESSION, "status": "cancelled", "phase": "cancelled", "cancel_requested": True,
                     "error": "stopped before it started", "rev": 1,
                     "finished_at": "2026-12-01T13:06:35.112113+00:00"}
_SUMMARY = ("counts", "usage", "warning", "wall_ms", "cost_usd", "cost_unknown_calls")
RECORDED_SESSION = {key: value for key, value in COMPLETED_SESSION.items() if key not in _SUMMARY}

ENTRY_NODE = {
    "id": 1, "seq": 0, "parent": None, "kind": "code", "name": "slow_count", "status": "completed", "depth": 1,
    "name_depth": 1, "expose": "io", "render_range": None,
    "doc": "Count to n through n child calls, delay_s seconds apart: a run slow enough to stop.",
    "input": {"n": 5, "delay_s": 0.0}, "output": 5, "error": "", "traceback": "", "refusal": "", "model": "", "usage": None,
    "rev": 13, "replayed": False, "started_at": "2026-12-01T13:06:34.023661+00:00", "finished_at": "2026-12-01T13:06:34.025675+00:00",
    "duration_ms": 2,
}
CHILD_NODE = {
    **ENTRY_NODE, "id": 2, "seq": 1, "parent": 1, "name": "count_step", "depth": 2, "name_depth": 0,
    "doc": "Wait `delay_s` seconds, then return `i`. The wait checks for a stop every 50 ms.",
    "input": {"i": 1, "delay_s": 0.0}, "output": 1, "rev": 4, "started_at": "2026-12-01T13:06:34.024165+00:00",
    "finished_at": "2026-12-01T13:06:34.024375+00:00", "duration_ms": 0,
}
# Steering: careful_agent's model asks to call publish_note, a tool a person must approve.
LAUNCH_CAREFUL = {"function": "careful_agent", "args": {"task": "the build is green"}}
APPROVAL_REQUEST = {"node": 2, "tool": "publish_note", "arguments": {"text": "Publish a note: the build is green"},
                    "depth": 2, "requested_at": "2026-12-07T06:28:06.323628+00:00",
                    "path": ["careful_agent", "publish_note"]}
APPROVE = {"approve": True}
DENY = {"approve": False, "reason": "not before the release"}
NO_SUCH_REQUEST = {"detail": "no call of this session waits for approval at node 0"}
ANSWERED_ALREADY = {"detail": "the call at node 2 was answered already"}
PAUSE_REQUESTED_SESSION = {**QUEUED_SESSION, "pause_requested": True, "rev": 1}
PAUSE_TAKEN_BACK_SESSION = {**QUEUED_SESSION, "rev": 2}
PAGE_LINKS = {"count": 3, "next": "http://127.0.0.1:8000/api/sessions/?page=3&page_size=1",
              "previous": "http://127.0.0.1:8000/api/sessions/?page_size=1"}
NOT_FOUND = {"detail": "No Session matches the given query."}


def request(name: str, value: dict, summary: str) -> OpenApiExample:
    return OpenApiExample(name, value=value, summary=summary, request_only=True)


def response(name: str, value, summary: str, status: int = 200) -> OpenApiExample:
    return OpenApiExample(name, value=value, summary=summary, response_only=True, status_codes=[str(status)])


LAUNCH_EXAMPLES = [
    request("Count to five", LAUNCH_SLOW_COUNT, "slow_count with no wait between counts"),
    request("With a budget and a model", LAUNCH_WITH_BUDGET_AND_MODEL,
            "wiki_agent on the naive simulated model, at most 20 model calls and 60 s"),
    request("Out of range", LAUNCH_OUT_OF_RANGE, "n below slow_count's minimum of 1: a 400"),
    response("Queued", QUEUED_SESSION, "The new session, queued for the executor", 201),
    response("Argument out of range", OUT_OF_RANGE_ERROR, "Errors by parameter", 400),
    response("Too many active runs", LAUNCH_LIMITED, "Over a per-user limit", 429),
]
SESSION_EXAMPLES = [
    response("Completed", COMPLETED_SESSION, "A finished run with its totals"),
    response("With a warning", REFUSED_SESSION, "Calls refused by the depth ceiling"),
    response("Not yours or no such session", NOT_FOUND, "Not found", 404),
]
SESSION_LIST_EXAMPLES = [response("A page of sessions", COMPLETED_SESSION, "Each row with its totals")]
# A list response's example is one item; the docs show it inside the list.
NODES_EXAMPLES = [response("The entry call", ENTRY_NODE, "The call the session started with"),
                  response("A child call", CHILD_NODE, "A call made inside it")]
EXPORT_EXAMPLES = [response("A whole DAG", {"version": 1, "session": RECORDED_SESSION,
                                            "nodes": [ENTRY_NODE, CHILD_NODE]}, "Session and nodes in seq order")]
STOP_EXAMPLES = [response("Stopped before it started", CANCELLED_SESSION, "A stop of a queued session")]
APPROVALS_EXAMPLES = [response("A call waiting", APPROVAL_REQUEST, "careful_agent's call of publish_note, at depth 2")]
ANSWER_EXAMPLES = [
    request("Approve", APPROVE, "The tool runs"),
    request("Deny, saying why", DENY, "The model reads the denial, with the reason, as the tool's result"),
    response("Denied", DENY, "The answer as stored"),
    response("No call waits there", NO_SUCH_REQUEST, "Here the agent's own node", 404),
    response("Answered already", ANSWERED_ALREADY, "A second answer to the same call", 409),
]
PAUSE_EXAMPLES = [response("Pause asked for before the start", PAUSE_REQUESTED_SESSION,
                           "The run pauses at its first boundary")]
RESUME_EXAMPLES = [response("Pause taken back before the start", PAUSE_TAKEN_BACK_SESSION,
                            "The run will not pause")]
