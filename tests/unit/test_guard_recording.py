"""No orphans: a refused call is recorded as refused, and every frame that was open is closed.

An in-memory Recorder stands in for the DAG: it keeps one record per frame and the order of events.
"""
import pytest

from runtime import Budget, BudgetExceeded, Recorder, agentic_function, use_recorder
from runtime.function import _MAX_AGENTIC_RECURSION_DEPTH

LIMIT = _MAX_AGENTIC_RECURSION_DEPTH


class MemoryRecorder(Recorder):
    def __init__(self):
        self.nodes = []   # one dict per recorded frame, in entry order
        self.events = []  # (event, node index)

    def _add(self, frame, status, **extra):
        node = {"name": frame.name, "status": status, "name_depth": frame.name_depth,
                "parent": frame.parent.node if frame.parent is not None else None, **extra}
        self.nodes.append(node)
        frame.node = len(self.nodes) - 1
        return frame.node

    def function_entered(self, frame):
        self.events.append(("entered", self._add(frame, "running")))

    def function_exited(self, frame, status, output=None, error=None):
        self.nodes[frame.node].update(status=status, error=error)
        self.events.append(("exited", frame.node))

    def function_refused(self, frame, error):
        self.events.append(("refused", self._add(frame, "refused", error=error)))


def _run(recorder, fn, *args):
    with use_recorder(recorder):
        return fn(*args)


def test_sixth_frame_is_recorded_as_refused_and_the_five_open_frames_exit_with_error():
    @agentic_function
    def runaway():
        return runaway()

    recorder = MemoryRecorder()
    with pytest.raises(RecursionError) as caught:
        _run(recorder, runaway)

    refused = recorder.nodes[LIMIT]
    assert refused["status"] == "refused"
    assert refused["error"] is caught.value
    assert refused["name_depth"] == LIMIT + 1
    assert refused["parent"] == LIMIT - 1  # hangs under the fifth frame in the tree
    assert [n["status"] for n in recorder.nodes[:LIMIT]] == ["error"] * LIMIT
    assert all(n["error"] is caught.value for n in recorder.nodes[:LIMIT])
    # Innermost first: the refusal, then the open frames closing from the fifth back to the first.
    assert recorder.events == ([("entered", i) for i in range(LIMIT)] + [("refused", LIMIT)]
                               + [("exited", i) for i in reversed(range(LIMIT))])


def test_caught_refusal_leaves_every_open_frame_completed():
    @agentic_function
    def careful(level):
        try:
            return careful(level + 1)
        except RecursionError as exc:
            return f"stopped at {level}: {exc}"

    recorder = MemoryRecorder()
    result = _run(recorder, careful, 1)
    assert result.startswith("stopped at 5: agentic function careful exceeded")
    statuses = [n["status"] for n in recorder.nodes]
    assert statuses == ["completed"] * LIMIT + ["refused"]
    assert "running" not in statuses


async def test_async_refusal_is_recorded_the_same_way():
    @agentic_function
    async def async_runaway():
        return await async_runaway()

    recorder = MemoryRecorder()
    with use_recorder(recorder):
        with pytest.raises(RecursionError):
            await async_runaway()
    assert [n["status"] for n in recorder.nodes] == ["error"] * LIMIT + ["refused"]


def test_budget_breach_is_recorded_as_refused_and_open_frames_exit():
    @agentic_function
    def level_three():
        raise AssertionError("the body of a refused call must not run")

    @agentic_function
    def level_two():
        return level_three()

    @agentic_function
    def level_one():
        return level_two()

    recorder = MemoryRecorder()
    with use_recorder(recorder), Budget(max_depth=2):
        with pytest.raises(BudgetExceeded) as caught:
            level_one()

    assert [(n["name"], n["status"]) for n in recorder.nodes] == [
        ("level_one", "error"), ("level_two", "error"), ("level_three", "refused")]
    assert recorder.nodes[2]["error"] is caught.value
    assert recorder.nodes[2]["parent"] == 1


def test_caught_budget_breach_lets_the_caller_complete():
    @agentic_function
    def too_deep():
        raise AssertionError("the body of a refused call must not run")

    @agentic_function(budget=Budget(max_depth=1))
    def delegator():
        try:
            too_deep()
        except BudgetExceeded as exc:
            return exc.dimension

    recorder = MemoryRecorder()
    assert _run(recorder, delegator) == "depth"
    assert [(n["name"], n["status"]) for n in recorder.nodes] == [
        ("delegator", "completed"), ("too_deep", "refused")]


def test_hidden_frames_are_not_recorded_even_when_refused():
    @agentic_function(expose="hidden")
    def quiet():
        return quiet()

    recorder = MemoryRecorder()
    with pytest.raises(RecursionError):
        _run(recorder, quiet)
    assert recorder.nodes == [] and recorder.events == []
