"""A run chooses its model calls' contexts from the nodes it holds in memory: the same text the stored
nodes give, and no read of the database (no flush waited for, no connection borrowed)."""
from __future__ import annotations

import asyncio

import pytest
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext

from dag.models import Node, Session
from dag.recording import recorder as recorder_module
from dag.recording import run_nodes
from dag.recording.context_render import render_frame_context
from dag.recording.recorder import recorded_ancestor
from dag.runs import lifecycle
from runtime import agentic_function
from runtime.approval import continuing, seek_approval
from runtime.context import current_frame, current_recorder

from .. import launch_helpers
from ..dag_helpers import model_call, new_session, recording

pytestmark = pytest.mark.django_db(transaction=True)  # the run's writes go through the group writer

# (held context, stored context, queries the held one made), each time a frame looked.
LOOKS: list[tuple] = []


def look() -> None:
    """Choose the current frame's context as its next model call would, and from the stored nodes."""
    recorder, frame = current_recorder(), current_frame()
    with CaptureQueriesContext(connection) as reads:
        held = recorder.render_context(frame)
    recorder.flush()
    viewer = recorded_ancestor(frame)
    stored = render_frame_context(recorder.session_id, viewer.node, None, frame.render_range or viewer.render_range)
    LOOKS.append((held, stored, len(reads.captured_queries)))


@agentic_function(register_globally=False)
def leaf(i: int) -> int:
    """A leaf."""
    return i


@agentic_function(register_globally=False, expose="full")
def helper(n: int) -> int:
    """Ask the model, then call leaves."""
    look()
    model_call(f"helper {n}?", "ok")
    return sum(leaf(i) for i in range(n))


@agentic_function(register_globally=False, render_range={"callers": 3, "subcalls": 1})
def narrow(n: int) -> int:
    """Sees little."""
    leaf(n)
    look()
    model_call(f"narrow {n}?", f"seen {n}")
    look()
    return n


@agentic_function(register_globally=False)
def agent(turns: int) -> int:
    """Turns of a model call asking for tools, then the tools."""
    for turn in range(turns):
        look()
        model_call(f"turn {turn}", "tools", tool_calls=[{"name": "helper", "arguments": {"n": turn}}])
        helper(turn)
        narrow(turn)
    look()
    return turns


@pytest.fixture(autouse=True)
def no_looks():
    LOOKS.clear()


def test_a_runs_contexts_are_the_stored_ones_and_read_nothing():
    session = new_session()
    with recording(session, empty=True):
        agent(3)
    assert len(LOOKS) == 13
    for held, stored, reads in LOOKS:
        assert held == stored and reads == 0
    held = [held for held, _, _ in LOOKS]
    # helper shows everything inside it (expose="full"), narrow only its call and result.
    assert "helper(n=2)\n-> 1\n\n[model call sim-1] helper 2?\n-> ok\n\nleaf(i=0)" in held[-1]
    assert "narrow(n=2)\n-> 2" in held[-1] and "narrow 2?" not in held[-1]
    assert held[-2].startswith("Earlier in this session:") and "So far in this call:" in held[-2]


def test_past_the_nodes_a_run_holds_its_contexts_are_read_from_the_database(monkeypatch):
    monkeypatch.setattr(run_nodes, "MOST_NODES", 12)
    session = new_session()
    with recording(session, empty=True):
        agent(3)
    assert all(held == stored for held, stored, _ in LOOKS)
    reads = [reads for _, _, reads in LOOKS]
    assert reads[0] == 0 and reads[-1] > 0


def test_a_run_on_a_session_with_nodes_reads_them_once_at_its_first_context():
    session = new_session()
    with recording(session):
        leaf(7)
        model_call("before", "earlier reply")
    with recording(session):  # not said empty: what is stored is read once
        agent(2)
    reads = [reads for _, _, reads in LOOKS]
    assert reads[0] > 0 and not any(reads[1:])
    assert all(held == stored for held, stored, _ in LOOKS)
    assert "leaf(i=7)\n-> 7" in LOOKS[-1][0] and "earlier reply" in LOOKS[-1][0]


def test_a_call_waiting_for_approval_is_held_as_it_is_stored():
    def approver(tool_name, arguments):
        look()  # what the entry's next model call would see while the call waits
        return True

    @agentic_function(register_globally=False)
    def entry() -> int:
        waiting = seek_approval(approver, leaf, {"i": 4}, current_frame(), timeout_s=5)
        with continuing(waiting):
            leaf(4)
        look()
        return 4

    with recording(new_session(), empty=True):
        entry()
    (waiting, stored_waiting, reads_waiting), (after, stored_after, reads_after) = LOOKS
    assert (waiting, after) == (stored_waiting, stored_after) and reads_waiting == reads_after == 0
    assert waiting == "So far in this call:\n\nleaf(i=4)\n-> awaiting_approval"
    assert after == "So far in this call:\n\nleaf(i=4)\n-> 4"


def closing(function, *args):
    """`function(*args)` in a thread of asyncio's, its database connection closed after (the thread stays)."""
    try:
        return function(*args)
    finally:
        connections.close_all()


@pytest.mark.parametrize("empty", [True, False])
async def test_async_functions_choose_their_contexts_from_inside_the_event_loop(empty):
    seen = []

    @agentic_function(register_globally=False)
    async def step(i: int) -> int:
        await asyncio.sleep(0)
        return i

    @agentic_function(register_globally=False)
    async def loop_agent() -> int:
        for i in range(3):
            await step(i)
            # The ORM refuses to run in an event loop: held contexts need it not, a first read is moved off it.
            seen.append((current_frame().node, current_recorder().render_context(current_frame())))
        return 3

    session = await asyncio.to_thread(closing, new_session)
    with recording(session, empty=empty) as recorder:
        assert await loop_agent() == 3
    recorder.close()
    stored = await asyncio.to_thread(closing, render_frame_context, session.id, seen[-1][0], None, None)
    assert seen[-1][1] == stored == "So far in this call:\n\nstep(i=0)\n-> 0\n\nstep(i=1)\n-> 1\n\nstep(i=2)\n-> 2"


def test_a_run_through_its_lifecycle_chooses_every_context_without_a_read(user, test_functions, monkeypatch):
    def no_read(*args, **kwargs):
        raise AssertionError("a run that claimed a new session read its nodes back")

    monkeypatch.setattr(recorder_module, "render_frame_context", no_read)
    monkeypatch.setattr(recorder_module, "stored_nodes", no_read)
    launch_helpers.CONTEXTS_SEEN.clear()
    session = Session.objects.create(owner=user, function="echo_and_ask", args={"texts": ["a", "b", "c"]})
    lifecycle.run_session(session.pk)
    session.refresh_from_db()
    assert (session.status, session.result) == ("completed", 3)
    seen = launch_helpers.CONTEXTS_SEEN
    assert len(seen) == 3 and seen[0] == 'So far in this call:\n\necho(text="a")\n-> a'
    assert seen[2].count("echo(text=") == 3 and seen[2].count("[model call") == 2
    assert Node.objects.filter(session=session).count() == 7
