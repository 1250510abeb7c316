"""Runtime injection, `system=`, and the recorder seam."""
import asyncio

import pytest

import runtime.function as function_module
from runtime import Recorder, Runtime, agentic_function, function, use_recorder
from runtime.context import current_runtime


@pytest.fixture
def created(monkeypatch):
    """Runtimes made by create_runtime() during the test, in order."""
    made = []

    def fake_create_runtime():
        rt = Runtime(system="default system")
        made.append(rt)
        return rt

    monkeypatch.setattr(function_module, "create_runtime", fake_create_runtime)
    return made


def test_entry_call_creates_a_runtime_and_closes_it_on_return(created):
    @agentic_function
    def f(runtime=None):
        assert not runtime.closed
        return runtime

    rt = f()
    assert created == [rt] and rt.closed


def test_owned_runtime_is_closed_on_exception_too(created):
    @agentic_function
    def f(runtime):
        raise ValueError("boom")

    with pytest.raises(ValueError):
        f()
    assert len(created) == 1 and created[0].closed


def test_three_runtime_parameters_are_filled_with_the_same_runtime(created):
    @agentic_function
    def f(task: str, runtime=None, exec_runtime=None, review_runtime=None):
        return runtime, exec_runtime, review_runtime

    a, b, c = f("t")
    assert a is b is c is created[0]


def test_nested_calls_inherit_the_callers_runtime(created):
    @agentic_function
    def inner(runtime=None):
        return runtime

    @agentic_function
    def outer(runtime=None):
        return runtime, inner(), current_runtime()

    mine, theirs, current = outer()
    assert mine is theirs is current and len(created) == 1
    assert current_runtime() is None


def test_a_passed_runtime_is_used_for_every_parameter_and_not_closed(created):
    given = Runtime()

    @agentic_function
    def f(runtime=None, exec_runtime=None):
        return runtime, exec_runtime

    assert f(runtime=given) == (given, given)
    assert f(given) == (given, given)
    assert created == [] and not given.closed


def test_positional_none_is_filled(created):
    @agentic_function
    def f(x, runtime):
        return runtime

    assert f(1, None) is created[0]


def test_system_is_applied_for_the_call_and_restored_even_on_exception(created):
    rt = Runtime(system="outer system")

    @agentic_function(system="inner system")
    def f(runtime=None, fail=False):
        assert runtime.system == "inner system"
        if fail:
            raise RuntimeError("x")
        return "ok"

    assert f(runtime=rt) == "ok" and rt.system == "outer system"
    with pytest.raises(RuntimeError):
        f(runtime=rt, fail=True)
    assert rt.system == "outer system"


def test_system_without_a_runtime_parameter_applies_to_the_chain_runtime(created):
    @agentic_function(system="S")
    def f():
        return current_runtime().system

    assert f() == "S" and created[0].closed


def test_async_injection_and_restore(created):
    @agentic_function(system="A")
    async def f(runtime=None):
        await asyncio.sleep(0)
        return runtime.system

    assert asyncio.run(f()) == "A"
    assert created[0].closed and created[0].system == "default system"


class ListRecorder(Recorder):
    def __init__(self):
        self.events = []

    def function_entered(self, frame):
        frame.node = len(self.events)
        self.events.append(("enter", frame.name, frame.depth, frame.arguments()))

    def function_exited(self, frame, status, output=None, error=None):
        self.events.append(("exit", frame.name, status, output, type(error).__name__ if error else None))


def test_standalone_runs_record_nothing_and_a_recorder_sees_enter_and_exit():
    @function
    def leaf(x: int):
        return x + 1

    @agentic_function
    def root(x: int, runtime=None):
        return leaf(x)

    recorder = ListRecorder()
    root(1, runtime=Runtime())  # no recorder installed: nothing to see
    with use_recorder(recorder):
        assert root(1, runtime=Runtime()) == 2
    assert recorder.events == [
        ("enter", "root", 1, {"x": 1}),
        ("enter", "leaf", 2, {"x": 1}),
        ("exit", "leaf", "completed", 2, None),
        ("exit", "root", "completed", 2, None),
    ]


def test_recorder_sees_error_status_and_hidden_subtrees_are_not_recorded():
    @agentic_function(expose="hidden")
    def secret():
        return inner()

    @function
    def inner():
        return 1

    @agentic_function
    def failing():
        secret()
        raise KeyError("k")

    recorder = ListRecorder()
    with use_recorder(recorder), pytest.raises(KeyError):
        failing()
    assert recorder.events == [("enter", "failing", 1, {}), ("exit", "failing", "error", None, "KeyError")]


def test_parallel_calls_with_their_own_system_on_one_runtime_do_not_clobber_each_other():
    import threading

    from runtime.providers import ScriptedProvider

    entered_b, done_a = threading.Event(), threading.Event()
    seen = {}

    @agentic_function(system="system A")
    def task_a(runtime=None) -> str:
        """First."""
        assert entered_b.wait(10)  # B has set its system prompt by now
        seen["a"] = runtime.system
        return "a"

    @agentic_function(system="system B")
    def task_b(runtime=None) -> str:
        """Second."""
        entered_b.set()
        assert done_a.wait(10)  # A has finished and restored by now
        seen["b"] = runtime.system
        return "b"

    class SignalA(Recorder):
        def function_exited(self, frame, status, output=None, error=None):
            if frame.name == "task_a":
                done_a.set()

    provider = ScriptedProvider([{"tool_calls": [{"name": "task_a"}, {"name": "task_b"}]}, "both done"])
    rt = Runtime(provider=provider, system="run system")
    with use_recorder(SignalA()):
        assert rt.exec("do both", tools=[task_a, task_b]) == "both done"
    assert seen == {"a": "system A", "b": "system B"}
    assert rt.system == "run system"
    assert [r["system"] for r in provider.requests] == ["run system", "run system"]
