"""Dispatch's limits: what one reply may ask for, deadlines across nested tools, names a model made up,
and an exec whose caller has gone."""
import asyncio
import contextvars
import re
import threading
import time

import pytest

from runtime import CancelledError, function
from runtime.dispatch import MAX_TOOL_CALLS_PER_REPLY, ToolTimeoutError, _tool_deadline, check_tool_deadline
from runtime.messages import ModelReply, ToolCall
from runtime.providers import Provider, ScriptedProvider
from runtime.runtime import Runtime

from .test_dispatch import call, run, tool_results


class Replies(Provider):
    """Plays ModelReply objects as they are, so a reply can hold what no real provider lets through."""

    def __init__(self, *replies):
        super().__init__("replies")
        self.replies = list(replies)
        self.requests = []

    def complete(self, request, check=None):
        self.requests.append({"messages": list(request.messages)})
        return self.replies.pop(0)


def test_a_tool_name_that_is_not_a_string_is_refused_as_a_result_not_a_crash():
    @function
    def lookup(city: str) -> str:
        """Look up a city."""
        raise AssertionError("must not run")

    provider = Replies(ModelReply(tool_calls=[ToolCall("c1", ["lookup"], {})]), ModelReply(text="sorry"))
    assert Runtime(provider=provider).exec("go", tools=[lookup]) == "sorry"
    assert tool_results(provider) == ["Refused: a tool name must be a string, got list ['lookup']; "
                                      "the tools you may call are: lookup"]


def test_calls_past_the_per_reply_cap_are_answered_with_an_error_and_not_run():
    ran = []

    @function
    def send_email(n: int) -> str:
        """Send an email."""
        ran.append(n)
        return "sent"

    many = {"tool_calls": [{"name": "send_email", "arguments": {"n": i}} for i in range(MAX_TOOL_CALLS_PER_REPLY + 3)]}
    _, results, _ = run([many, "done"], tools=[send_email])
    assert sorted(ran) == list(range(MAX_TOOL_CALLS_PER_REPLY))
    assert results[:MAX_TOOL_CALLS_PER_REPLY] == ["sent"] * MAX_TOOL_CALLS_PER_REPLY
    first, *rest = results[MAX_TOOL_CALLS_PER_REPLY:]
    assert first.startswith(f"Refused: not run: this reply asked for {MAX_TOOL_CALLS_PER_REPLY + 3} tool calls "
                            f"and at most {MAX_TOOL_CALLS_PER_REPLY} of one reply run "
                            f"(OPENPROGRAM_MAX_TOOL_CALLS_PER_REPLY)")
    assert len(rest) == 2 and all(r.startswith("Refused: not run") for r in rest)


@pytest.mark.parametrize("value, runs", [("2", 2), ("0", 5)])
def test_the_per_reply_cap_is_read_from_the_environment(monkeypatch, value, runs):
    monkeypatch.setenv("OPENPROGRAM_MAX_TOOL_CALLS_PER_REPLY", value)
    ran = []

    @function
    def ping() -> str:
        """Ping."""
        ran.append(1)
        return "pong"

    run([{"tool_calls": [{"name": "ping"}] * 5}, "done"], tools=[ping])
    assert len(ran) == runs  # 0 turns the cap off


@pytest.mark.parametrize("value", ["many", "-1", "2.5"])
def test_a_bad_per_reply_cap_is_named_before_any_model_call(monkeypatch, value):
    monkeypatch.setenv("OPENPROGRAM_MAX_TOOL_CALLS_PER_REPLY", value)
    provider = ScriptedProvider(["never asked"])
    with pytest.raises(ValueError, match=rf"environment variable OPENPROGRAM_MAX_TOOL_CALLS_PER_REPLY="
                                         rf"'{re.escape(value)}' (is not a valid int|must not be negative)"):
        Runtime(provider=provider).exec("go")
    assert provider.requests == []


def test_a_tool_with_a_timeout_inside_an_abandoned_tool_keeps_the_earlier_deadline():
    seen = []

    @function(timeout=100)
    def inner() -> str:
        """Work with a generous timeout of its own."""
        try:
            check_tool_deadline()
        except ToolTimeoutError as exc:
            seen.append(str(exc))
            raise
        seen.append("ran on")
        return "ran"

    class InsideAnAbandonedTool(ScriptedProvider):
        """Answers as a model called inside a tool whose deadline has passed since (it was abandoned)."""

        def complete(self, request, check=None):
            reply = super().complete(request, check)
            _tool_deadline.set((time.monotonic() - 1, "outer"))
            return reply

    provider = InsideAnAbandonedTool([call("inner"), "must not be asked"])
    with pytest.raises(ToolTimeoutError, match="'outer' ran past its timeout"):
        contextvars.copy_context().run(Runtime(provider=provider).exec, "go", tools=[inner])
    assert seen == ["tool 'outer' ran past its timeout and was abandoned"]


async def test_cancelling_the_task_awaiting_aexec_abandons_the_exec():
    # The exec runs in a thread Python cannot kill: once its caller is gone it must stop by itself
    # rather than go on calling the model (here: a reply that comes back after the cancel).
    in_call, release, ended = threading.Event(), threading.Event(), threading.Event()
    outcome, ran = [], []

    @function(register_globally=False)
    def step() -> str:
        """One step."""
        ran.append(1)
        return "ok"

    class AnswersWhenReleased(Provider):
        name = "released"

        def __init__(self):
            super().__init__("released")
            self.calls = 0

        def complete(self, request, check=None):
            self.calls += 1
            in_call.set()
            release.wait(60)
            return ModelReply(tool_calls=[ToolCall(f"c{self.calls}", "step", {})])

    class Watched(Runtime):
        def exec(self, *args, **kwargs):
            try:
                return super().exec(*args, **kwargs)
            except BaseException as exc:
                outcome.append(exc)
                raise
            finally:
                ended.set()

    provider = AnswersWhenReleased()
    task = asyncio.ensure_future(Watched(provider=provider).aexec("go", tools=[step], max_iterations=50))
    await asyncio.to_thread(in_call.wait, 60)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    release.set()
    await asyncio.to_thread(ended.wait, 60)
    assert provider.calls == 1 and ran == []
    assert isinstance(outcome[0], CancelledError) and "abandoned" in str(outcome[0])

