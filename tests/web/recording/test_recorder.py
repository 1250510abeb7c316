"""DjangoRecorder: real decorated functions, run under the recorder, leave the DAG the issue describes."""
import asyncio
import math

import pytest

from dag.live import broadcast
from dag.models import Node, Session
from dag.recording import write_path
from dag.recording.recorder import DjangoRecorder, recorded_ancestor
from dag.recording.write_path import group_commit, process_writer
from dag.recording.values import json_safe, preview
from runtime import (Budget, BudgetExceeded, CancelledError, Runtime, add_pre_invocation_hook,
                     agentic_function, function, remove_pre_invocation_hook)
from runtime.context import current_recorder
from runtime.function import _MAX_AGENTIC_RECURSION_DEPTH

from ..dag_helpers import model_call, new_session, recording

pytestmark = pytest.mark.django_db


def nodes_of(session):
    return list(Node.objects.filter(session=session).order_by("seq"))


def test_entry_writes_a_running_code_node_with_doc_and_exit_backfills_it():
    seen_inside = {}

    @agentic_function
    def greet(name: str, times: int = 2) -> str:
        """Greet someone warmly."""
        node = Node.objects.get(session=session, seq=0)
        seen_inside.update(status=node.status, output=node.output, doc=node.doc, input=node.input)
        return f"hello {name}" * times

    session = new_session()
    with recording(session):
        assert greet("bo") == "hello bohello bo"

    assert seen_inside == {"status": "running", "output": None, "doc": "Greet someone warmly.",
                           "input": {"name": "bo", "times": 2}}
    [node] = nodes_of(session)
    assert (node.kind, node.name, node.status, node.output) == ("code", "greet", "completed", "hello bohello bo")
    assert (node.depth, node.name_depth, node.expose, node.parent_id) == (1, 1, "io", None)
    assert node.started_at <= node.finished_at and node.duration_ms >= 0
    session.refresh_from_db()
    assert (session.node_count, session.rev) == (1, 2) and node.rev == 2


def test_nested_calls_hang_under_their_caller_in_seq_order():
    @function
    def add(a: int, b: int) -> int:
        return a + b

    @agentic_function(render_range={"callers": 0, "subcalls": 3})
    def inner(x: int) -> int:
        return add(x, 1)

    @agentic_function(expose="full")
    def outer() -> int:
        return inner(1) + inner(2)

    session = new_session()
    with recording(session):
        assert outer() == 5

    rows = [(n.seq, n.name, n.depth, n.status) for n in nodes_of(session)]
    assert rows == [(0, "outer", 1, "completed"), (1, "inner", 2, "completed"), (2, "add", 3, "completed"),
                    (3, "inner", 2, "completed"), (4, "add", 3, "completed")]
    by_seq = {n.seq: n for n in nodes_of(session)}
    assert by_seq[1].parent_id == by_seq[3].parent_id == by_seq[0].id
    assert by_seq[2].parent_id == by_seq[1].id and by_seq[4].parent_id == by_seq[3].id
    assert by_seq[0].expose == "full" and by_seq[1].render_range == {"callers": 0, "subcalls": 3}


def test_an_exception_ends_the_node_with_error_and_its_text():
    @agentic_function
    def broken():
        raise ValueError("the sky is green")

    session = new_session()
    with recording(session), pytest.raises(ValueError):
        broken()

    [node] = nodes_of(session)
    assert (node.status, node.error, node.output) == ("error", "ValueError: the sky is green", None)
    assert node.finished_at is not None


def test_an_error_text_holding_nul_still_ends_the_node_and_the_session():
    # PostgreSQL text cannot hold NUL: storing the raw message failed the backfill and left the node
    # (and, through write_path.finish_session, the session) running.
    @agentic_function
    def reads_binary():
        raise ValueError("bad byte \x00 in the file")

    session = new_session()
    with recording(session), pytest.raises(ValueError):
        reads_binary()
    [node] = nodes_of(session)
    assert node.status == "error" and node.error == "ValueError: bad byte \ufffd in the file"

    assert write_path.finish_session(session.pk, Session.Status.ERROR, error="ValueError: bad byte \x00 again")
    session.refresh_from_db()
    assert session.status == "error" and session.error == "ValueError: bad byte \ufffd again"


def test_a_sixth_nested_self_call_is_recorded_as_refused_under_the_fifth():
    @agentic_function
    def runaway(n: int = 0):
        """Calls itself forever."""
        return runaway(n + 1)

    session = new_session()
    with recording(session), pytest.raises(RecursionError):
        runaway()

    nodes = nodes_of(session)
    limit = _MAX_AGENTIC_RECURSION_DEPTH
    assert [n.status for n in nodes] == ["error"] * limit + ["refused"]
    refused = nodes[limit]
    assert refused.parent_id == nodes[limit - 1].id
    assert (refused.name_depth, refused.depth, refused.input) == (limit + 1, limit + 1, {"n": limit})
    assert "exceeded max nesting depth 5" in refused.error and refused.finished_at is not None
    assert refused.refusal == "depth"  # what refused it, as data for the browser
    assert [n.name_depth for n in nodes[:limit]] == list(range(1, limit + 1))


def test_a_budget_breach_is_recorded_as_refused_and_the_budget_reaches_the_session():
    @agentic_function
    def worker():
        return "work"

    @agentic_function(budget=Budget(max_depth=1))
    def manager():
        return worker()

    session = new_session()
    with recording(session), pytest.raises(BudgetExceeded):
        manager()

    manager_node, worker_node = nodes_of(session)
    assert (worker_node.status, worker_node.parent_id) == ("refused", manager_node.id)
    assert "delegation budget exceeded: max_depth=1" in worker_node.error
    assert (worker_node.refusal, manager_node.refusal) == ("budget:depth", "")
    assert manager_node.status == "error"
    session.refresh_from_db()
    assert session.budget["max_depth"] == 1 and session.budget_spend is not None


def test_budget_updated_stores_limits_and_spend_with_a_new_revision():
    session = new_session()
    DjangoRecorder(session).budget_updated({"max_tokens": 100}, {"tokens": 40, "llm_calls": 1})
    session.refresh_from_db()
    assert (session.budget, session.budget_spend, session.rev) == (
        {"max_tokens": 100}, {"tokens": 40, "llm_calls": 1}, 1)


def test_a_stop_hook_cancels_the_running_call_and_the_refused_entry_writes_nothing():
    @agentic_function
    def step(i: int):
        return i

    @agentic_function
    def loop():
        return [step(i) for i in range(5)]

    def stop_at_third_step(frame):
        if frame.name == "step" and frame.arguments()["i"] == 2:
            raise CancelledError("stopped from the browser")

    session = new_session()
    add_pre_invocation_hook(stop_at_third_step)
    try:
        with recording(session), pytest.raises(CancelledError):
            loop()
    finally:
        remove_pre_invocation_hook(stop_at_third_step)

    rows = [(n.name, n.status) for n in nodes_of(session)]
    assert rows == [("loop", "cancelled"), ("step", "completed"), ("step", "completed")]
    assert nodes_of(session)[0].error == "CancelledError: stopped from the browser"


def test_hidden_functions_and_everything_inside_them_write_nothing():
    @agentic_function
    def visible_leaf():
        model_call("inside a visible leaf")
        return 1

    @agentic_function(expose="hidden")
    def secret():
        model_call("a hidden model call")  # the recorder is asked, and declines
        return visible_leaf() + 1

    @agentic_function
    def entry():
        return secret() + visible_leaf()

    session = new_session()
    with recording(session):
        assert entry() == 3

    rows = [(n.kind, n.name) for n in nodes_of(session)]
    assert rows == [("code", "entry"), ("code", "visible_leaf"), ("llm", "llm")]
    assert nodes_of(session)[1].parent_id == nodes_of(session)[0].id


def test_without_a_recorder_nothing_is_written():
    @agentic_function
    def standalone_unrecorded():
        return "ok"

    assert standalone_unrecorded() == "ok"
    assert not Node.objects.filter(name="standalone_unrecorded").exists()


def test_model_calls_are_llm_nodes_with_request_reply_usage_and_model():
    @agentic_function
    def ask():
        model_call("what is 2+2?", "4", tool_calls=[{"name": "calc", "arguments": {"expr": "2+2"}}])
        model_call("again?", status="error", error=TimeoutError("provider timed out"))
        return "done"

    session = new_session()
    with recording(session):
        ask()

    code, first, second = nodes_of(session)
    assert (first.kind, first.parent_id, first.model, first.status, first.depth) == ("llm", code.id, "sim-1",
                                                                                      "completed", 1)
    assert first.input == {"system": "You are terse.", "messages": [{"role": "user", "content": "what is 2+2?"}],
                           "tools": [], "model": "sim-1"}
    assert first.output == {"text": "4", "tool_calls": [{"name": "calc", "arguments": {"expr": "2+2"}}]}
    assert first.usage == {"input_tokens": 3, "output_tokens": 1}
    assert (second.status, second.error) == ("error", "TimeoutError: provider timed out")


def test_non_json_arguments_and_results_become_readable_stand_ins():
    class Opaque:
        pass

    @agentic_function
    def odd(thing, blob, tags, pair, ratio: float, runtime: Runtime = None):
        return {"obj": Opaque(), "runtime": runtime, 3: "int key", "nested": [b"\x00\x01", {1.5}]}

    session = new_session()
    with recording(session):
        odd(Opaque(), b"abc", {"b", "a"}, (1, 2), math.nan, runtime=Runtime(model="m"))

    [node] = nodes_of(session)
    # runtime parameters are injected plumbing, not arguments: they are left out of the input
    assert node.input == {"thing": "<Opaque>", "blob": "<bytes: 3 bytes>", "tags": ["a", "b"],
                          "pair": [1, 2], "ratio": "nan"}
    assert node.output.pop("runtime").startswith("<Runtime")  # its own repr, or the class name
    assert node.output == {"obj": "<Opaque>", "3": "int key", "nested": ["<bytes: 2 bytes>", [1.5]]}


def test_lone_surrogates_in_recorded_text_become_replacement_characters():
    # Half of a UTF-16 pair (e.g. from a JSON "\\ud83d" cut mid-character) is not valid Unicode text:
    # PostgreSQL refused the backfill, failing a call that had succeeded. A whole pair is one character.
    @agentic_function
    def halves(text: str):
        return {"cut": "x\ud83d", "whole": "\ud83d\ude00", "key\udc00": "ok"}

    session = new_session()
    with recording(session):
        halves("y\udfff")
    [node] = nodes_of(session)
    assert node.status == "completed"
    assert node.input == {"text": "y\ufffd"}
    assert node.output == {"cut": "x\ufffd", "whole": "\U0001f600", "key\ufffd": "ok"}


def test_json_safe_handles_cycles_nul_and_custom_reprs_and_preview_is_short():
    loop = []
    loop.append(loop)

    class Named:
        def __repr__(self):
            return "Named(" + "x" * 500 + ")"

    assert json_safe("a\x00b") == "a\ufffdb"
    assert json_safe({None: 1, True: 2, 3: 3, (1, 2): 4}) == {"null": 1, "true": 2, "3": 3, "(1, 2)": 4}
    assert json_safe({"k": float("inf")}) == {"k": "inf"}
    assert json_safe(Named()).startswith("Named(xxx") and "more chars" in json_safe(Named())
    nested = json_safe(loop)
    depth = 0
    while isinstance(nested, list):
        nested, depth = nested[0], depth + 1
    assert depth > 1 and isinstance(nested, str)
    big = list(range(100_000))
    assert preview(big, 40) == "[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,1…"
    assert preview({"a": 1}) == '{"a":1}'
    assert preview("line one\n   line two", 12) == "line one lin…"


def test_large_values_are_stored_whole():
    @agentic_function
    def echo(text: str) -> str:
        return text

    session = new_session()
    big = "word " * 100_000
    with recording(session):
        echo(big)
    [node] = nodes_of(session)
    assert node.input == {"text": big} and node.output == big


@pytest.mark.django_db(transaction=True)
async def test_async_functions_record_from_inside_the_event_loop():
    @agentic_function
    async def child(i: int):
        await asyncio.sleep(0)
        return i * 2

    @agentic_function
    async def parent():
        return [await child(1), await child(2)]

    session = await asyncio.to_thread(new_session)
    with recording(session) as recorder:
        assert await parent() == [2, 4]
    recorder.close()  # the writer thread's database connection must not outlive the test

    rows = await asyncio.to_thread(lambda: [(n.name, n.status, n.output) for n in nodes_of(session)])
    assert rows == [("parent", "completed", [2, 4]), ("child", "completed", 2), ("child", "completed", 4)]


@pytest.mark.django_db(transaction=True)
def test_every_write_is_broadcast_after_commit_with_its_revision():
    @agentic_function
    def leaf():
        # Its entry committed before it returns: its exit is a write of its own, not applied to the
        # queued entry (which would be written once, already ended).
        current_recorder().flush()
        return "leaf"

    @agentic_function
    def root():
        return leaf()

    received = []

    def listener(session_id, messages):
        received.extend((session_id, m["type"], m["rev"], m["node"]["name"], m["node"]["status"])
                        for m in messages)

    session = new_session()
    broadcast.subscribe(listener)
    try:
        # One row per batch: each write its own commit and publish (the writer stops, flushed, at the end).
        with process_writer.use_writer(group_commit.GroupWriter(batch_rows=1)), recording(session):
            root()
    finally:
        broadcast.unsubscribe(listener)

    sid = str(session.id)
    assert received == [(sid, "node", 1, "root", "running"), (sid, "node", 2, "leaf", "running"),
                        (sid, "node", 3, "leaf", "completed"), (sid, "node", 4, "root", "completed")]


def test_recorded_ancestor_skips_frames_without_a_node():
    class FakeFrame:
        def __init__(self, node, parent):
            self.node, self.parent = node, parent

    top = FakeFrame(7, None)
    hidden = FakeFrame(None, top)
    assert recorded_ancestor(FakeFrame(None, hidden)) is top
    assert recorded_ancestor(None) is None


def test_recording_into_a_deleted_session_fails_loudly():
    session = new_session()
    Session.objects.filter(pk=session.pk).delete()

    @agentic_function
    def orphan():
        return 1

    with recording(session), pytest.raises(Session.DoesNotExist, match="does not exist"):
        orphan()


@pytest.mark.django_db(transaction=True)
def test_the_event_loop_writer_thread_ends_with_its_recorder():
    import gc
    import threading

    @agentic_function
    async def tick():
        return "tock"

    def writer_threads():
        return [t for t in threading.enumerate() if t.name.startswith("dag-recorder")]

    before = len(writer_threads())
    with recording(new_session()):
        assert asyncio.run(tick()) == "tock"
        assert len(writer_threads()) == before + 1
    gc.collect()  # the recorder is gone: its finalizer stops the thread after closing its connection
    for thread in writer_threads()[before:]:
        thread.join()
    assert len(writer_threads()) == before


def test_hidden_parameters_are_masked_in_the_recorded_input():
    @agentic_function(input={"api_token": {"hidden": True}})
    def fetch(url: str, api_token: str = "") -> str:
        return "page"

    session = new_session()
    with recording(session):
        fetch("https://example.org", api_token="s3cret")
    [node] = nodes_of(session)
    assert node.input == {"url": "https://example.org", "api_token": "<hidden>"}


@pytest.mark.django_db(transaction=True)
def test_calls_made_inside_a_transaction_the_run_opens_are_recorded_under_their_queued_caller():
    """A tool that writes the app's own rows does it in `atomic`: the calls it makes there are written in
    that transaction, after the run's queued writes (their parents) have been committed."""
    from django.db import transaction

    @agentic_function(register_globally=False)
    def leaf(i: int) -> int:
        return i

    @agentic_function(register_globally=False)
    def saves_in_a_transaction(n: int) -> int:
        with transaction.atomic():
            return leaf(n) + leaf(n + 1)

    session = new_session()
    with recording(session):
        assert saves_in_a_transaction(3) == 7
    nodes = nodes_of(session)
    assert [(node.name, node.status) for node in nodes] == [
        ("saves_in_a_transaction", "completed"), ("leaf", "completed"), ("leaf", "completed")]
    assert [node.parent_id for node in nodes] == [None, nodes[0].pk, nodes[0].pk]
