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


def _stopping_after(entries: int, takes_event: bool):
    seen = []

    def count(event=None):
        seen.append(event)
        if len(seen) > entries:
            raise CancelledError("stop pressed")

    if takes_event:
        return (lambda event: count(event)), seen
    return (lambda: count()), seen


@pytest.mark.parametrize("takes_event", [False, True], ids=["no-argument hook", "one-argument hook"])
def test_a_hook_of_either_shape_stops_a_run(install, takes_event):
    from runtime import Runtime
    from runtime.providers import ScriptedProvider

    hook, seen = _stopping_after(2, takes_event)
    install(hook)

    @agentic_function(register_globally=False)
    def agent(runtime=None):
        return runtime.exec("go", tools=[leaf])

    @function(register_globally=False)
    def leaf():
        return "ok"

    provider = ScriptedProvider([{"tool_calls": [{"name": "leaf"}]}, "done"])
    with pytest.raises(CancelledError, match="stop pressed"):
        agent(runtime=Runtime(provider=provider))
    assert len(seen) == 3  # the agent's entry, its first model call, then the stop at the leaf
    assert (seen[0] is not None) is takes_event  # the one-argument hook got the frame


def test_the_references_stop_hook_shape_works_unchanged(install):
    def stop_hook():  # as written for the reference implementation: no argument
        raise CancelledError("stopped")

    install(stop_hook)

    @agentic_function(register_globally=False)
    def agent():
        return "ran"

    with pytest.raises(CancelledError):
        agent()
    assert stop_hook in installed_hooks()
    remove_pre_invocation_hook(stop_hook)
    assert agent() == "ran"


def test_a_hook_must_be_callable():
    with pytest.raises(TypeError, match="must be callable"):
        add_pre_invocation_hook("not a hook")


def test_a_hook_with_an_optional_parameter_gets_the_event_and_a_required_keyword_is_refused(install):
    seen = []
    install(lambda event=None: seen.append(event))

    @function(register_globally=False)
    def leaf():
        return 1

    leaf()
    assert seen and seen[0] is not None and seen[0].name == "leaf"
    with pytest.raises(TypeError, match=r"required parameter\(s\) reason beyond the event"):
        add_pre_invocation_hook(lambda *, reason: None)
    with pytest.raises(TypeError, match=r"required parameter\(s\) extra beyond the event"):
        add_pre_invocation_hook(lambda event, extra: None)  # would break every call, not just this one
