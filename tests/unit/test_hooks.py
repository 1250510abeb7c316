"""Pre-invocation hooks: installed once, run first on every call, and a stop they raise is not swallowed."""
import pytest

from runtime import (CancelledError, add_pre_invocation_hook, agentic_function, function,
                     remove_pre_invocation_hook)
from runtime.function import _recursion_depth
from runtime.hooks import installed_hooks


@pytest.fixture
def install(install_hook):
    return install_hook


def test_adding_twice_keeps_one_and_removing_an_absent_hook_is_silent(install):
    calls = []
    hook = install(lambda event: calls.append(event.name))
    add_pre_invocation_hook(hook)
    assert installed_hooks().count(hook) == 1

    @agentic_function
    def f():
        return 1

    f()
    assert calls == ["f"]
    remove_pre_invocation_hook(hook)
    remove_pre_invocation_hook(hook)
    f()
    assert calls == ["f"]


def test_hooks_run_before_anything_else(install):
    seen = []
    install(lambda frame: seen.append((frame.name, _recursion_depth.get())))

    @agentic_function
    def f():
        seen.append(("body", _recursion_depth.get()))

    f()
    assert seen == [("f", None), ("body", {"f": 1})]


def test_cancelled_error_aborts_the_call_and_escapes_except_exception(install):
    ran = []

    @function
    def child():
        ran.append("child")

    @agentic_function
    def parent():
        try:
            child()
        except Exception:  # a user's broad handler must not swallow a stop
            ran.append("swallowed")
        return "finished"

    def stop_children(frame):
        if frame.name == "child":
            raise CancelledError("stopped by the user")

    install(stop_children)
    with pytest.raises(CancelledError, match="stopped by the user"):
        parent()
    assert ran == []
    assert issubclass(CancelledError, BaseException) and not issubclass(CancelledError, Exception)
    assert _recursion_depth.get() is None


def test_checkpoint_lets_a_stop_act_inside_long_running_tool_code(install):
    from runtime import checkpoint

    steps = []

    @function
    def long_task(n: int):
        for i in range(n):
            steps.append(i)
            checkpoint()

    checkpoint()  # no hook installed: nothing happens
    long_task(2)
    assert steps == [0, 1]

    def stop_after_four_steps(event):
        if len(steps) >= 4:
            raise CancelledError("stopped")

    steps.clear()
    install(stop_after_four_steps)
    with pytest.raises(CancelledError):
        long_task(10)
    assert steps == [0, 1, 2, 3]
