"""A fault-injecting model server speaking OpenAI's chat completions protocol, for runs on a live server.

One server serves every fault at once: the model a request names picks the behaviour, so a test launches
one session per fault (`"model": "openai:fault-500"`, ...) and they run side by side. `faults` counts
the faulty replies actually served (a retried 500 counts twice).
"""
from __future__ import annotations

import json
import threading

from tests.unit.fakes.protocols import OpenAIWire
from tests.unit.fakes.server import FakeServer, Raw, hang


def _with_message(message) -> tuple:
    _, body = OpenAIWire.answer("x")
    body["choices"][0]["message"] = message
    return 200, body


def _has_tool_results(body: dict) -> bool:
    return any(message.get("role") == "tool" for message in body.get("messages", []))


def _tool_raises(server, body):
    """Call read_note with a title that does not exist (the tool raises KeyError), then answer."""
    if _has_tool_results(body):
        return OpenAIWire.answer("There is no such note.")
    return OpenAIWire.tool_calls(("call_1", "read_note", {"title": "No such note"}))


_, _COMPLETE = OpenAIWire.answer("a complete answer")
BEHAVIOURS = {
    "fault-500": lambda server, body: OpenAIWire.error(500, "the model server failed"),
    "fault-429": lambda server, body: OpenAIWire.error(429, "rate limit reached for requests"),
    "fault-hang": lambda server, body: hang(server),
    "fault-html": lambda server, body: (200, Raw(b"<!doctype html><html><body>Sign in to the proxy</body></html>",
                                                 "text/html")),
    "fault-null-message": lambda server, body: _with_message(None),
    "fault-call-without-function": lambda server, body: _with_message(
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function"}]}),
    "fault-truncated": lambda server, body: (200, Raw(json.dumps(_COMPLETE).encode()[:50])),
    # Each call's query differs (the turn it is made in), so the run is a model that never stops calling
    # tools, for max_iterations to end, not one repeating a call, which the loop guard ends first.
    "fault-tools-forever": lambda server, body: OpenAIWire.tool_calls(
        ("call_1", "search_notes", {"query": f"guard {len(body.get('messages') or [])}"})),
}
# Behaviours whose replies are well-formed (the fault is in what the run does with them, not the reply).
WELL_FORMED = {"fault-tool-raises": _tool_raises}


class FaultyModelServer(FakeServer):
    def __init__(self):
        super().__init__([])
        self.faults = 0
        self._count_lock = threading.Lock()

    @staticmethod
    def models() -> list[str]:
        return [f"openai:{name}" for name in (*BEHAVIOURS, *WELL_FORMED)]

    def _next(self, body: dict):
        name = body.get("model", "")
        with self._lock:
            self.requests.append(body)
        if name in WELL_FORMED:
            return WELL_FORMED[name](self, body)
        if name not in BEHAVIOURS:
            return OpenAIWire.error(404, f"fault server: no model {name!r}")
        with self._count_lock:
            self.faults += 1
        return BEHAVIOURS[name](self, body)

    def environment(self) -> dict:
        """The live server's settings that point its OpenAI provider here and offer every fault model."""
        return {"OPENAI_API_KEY": "fault-server-key", "OPENAI_BASE_URL": OpenAIWire.base_url(self.url),
                "OPENPROGRAM_MODELS": ",".join(self.models()), "OPENPROGRAM_MODEL_RETRIES": "1",
                "OPENPROGRAM_MODEL_RETRY_TOTAL_S": "10"}
