"""Faults of the model server, through a live server and a model server speaking OpenAI's protocol: each
run ends in a recorded status whose error explains it (naming the provider and what was wrong), no node
stays `running`, and the server logs no traceback.

All faults run at once, one session each (the model a session names picks its fault, model_server.py).
"""
import pytest

from dag.models import Node

from .figures import record
from .live_runs import database_view, start_server, still_running, viewer, wait_for_end  # noqa: F401
from .model_server import FaultyModelServer

HANG_BUDGET = {"timeout_s": 2}  # a hung model holds a run only as long as its budget's time
# fault -> (the session's status, words its error must contain)
EXPECTED = {
    "fault-500": ("error", ["openai", "after 2 attempts", "500", "the model server failed"]),
    "fault-429": ("error", ["openai", "after 2 attempts", "429", "rate limit"]),
    "fault-hang": ("error", ["BudgetExceeded", "timeout_s=2"]),
    "fault-html": ("error", ["openai", "200", "not JSON", "Sign in to the proxy"]),
    "fault-null-message": ("error", ["openai", "200", "no message"]),
    "fault-call-without-function": ("error", ["openai", "200", "names no function"]),
    "fault-truncated": ("error", ["openai", "200", "malformed or cut off"]),
    "fault-tools-forever": ("error", ["ExecLimitExceeded", "max_iterations=20", "kept calling tools"]),
    "fault-tool-raises": ("completed", []),
}


@pytest.fixture
def model_server():
    with FaultyModelServer() as server:
        yield server


def test_every_model_fault_ends_its_run_with_an_explained_status(start_server, viewer, model_server):
    server = start_server(**model_server.environment())
    sessions = {fault: viewer.launch(server, "wiki_agent", {"question": "How does the guard work?"},
                                     model=f"openai:{fault}", budget=HANG_BUDGET if fault == "fault-hang" else {})
                for fault in EXPECTED}
    wrong, nodes = [], 0
    for fault, session_id in sessions.items():
        session = wait_for_end(session_id)
        status, words = EXPECTED[fault]
        error = session.error or ""
        if session.status != status or not all(word.lower() in error.lower() for word in words):
            wrong.append(f"{fault}: {session.status} {error!r}, expected {status} naming {words}")
        nodes += len(database_view(session_id)[1])
    record("faults-model", sessions=len(sessions), nodes=nodes, faults=model_server.faults + 1)  # +1: the tool
    assert wrong == []
    raised = Node.objects.get(session_id=sessions["fault-tool-raises"], name="read_note")
    assert raised.status == "error" and "no note titled 'No such note'" in (raised.error or "")
    assert still_running(sessions.values()) == []
    assert server.trouble() == []
