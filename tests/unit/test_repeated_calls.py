"""A model repeating one tool call is stopped, a model making progress is not (issue 38).

Within one frame, the third identical call whose earlier results failed, or the tenth identical call, is
refused: the first refusal is the model's tool result (guidance), the same call again is LoopDetected.
"""
import threading

import pytest

from runtime import LoopDetected, OpenProgramError, Recorder, Runtime, agentic_function, function, use_recorder
from runtime.messages import ModelReply, ToolCall
from runtime.providers import Provider, ScriptedProvider


class Repeats(Provider):
    """A model that makes one call (`name`, `arguments`) in every reply, `answer_after` times, then answers;
    it stops by itself after `cap` calls so that a broken guard fails the test instead of hanging."""

    name = "repeats"

    def __init__(self, name: str, arguments: dict, answer_after: int = 10_000, cap: int = 100, vary: bool = False):
        super().__init__("repeats")
        self.call_name, self.arguments, self.vary = name, arguments, vary
        self.answer_after, self.cap = answer_after, cap
        self.calls = 0
        self.requests = []
        self._lock = threading.Lock()

    def complete(self, request, check=None):
        with self._lock:
            self.calls += 1
            self.requests.append(request)
            index = self.calls
        if index > self.cap:
            raise AssertionError(f"the repeated call was not stopped within {self.cap} model calls")
        if index > self.answer_after:
            return ModelReply(text="answered")
        arguments = {**self.arguments, "n": index} if self.vary else self.arguments
        return ModelReply(tool_calls=[ToolCall(f"c{index}", self.call_name, arguments)])


class Refusals(Recorder):
    def __init__(self):
        self.refused = []

    def function_refused(self, frame, error):
        self.refused.append((frame.name, frame.parent.name if frame.parent else None, error))


@function(name="lookup", register_globally=False)
def lookup(key: str, n: int = 0) -> str:
    """Look a key up."""
    return f"value of {key}"


@agentic_function(name="solve", register_globally=False)
def solve(question: str, runtime=None) -> str:
    """Solve the question with the tools at hand."""
    return runtime.exec(question, tools=[solve, lookup], max_iterations=100)


def tool_results(request) -> list[str]:
    return [m["content"] for m in request.messages if m["role"] == "tool"]


def test_a_model_repeating_an_invalid_call_is_stopped_within_five_model_calls():
    # The case seen with a real model: the function it runs in, called with arguments that never validate.
    model = Repeats("solve", {"query": "again"})
    with pytest.raises(LoopDetected) as caught:
        solve("what is 2 + 2?", runtime=Runtime(provider=model))
    assert model.calls <= 5
    error = caught.value
    assert isinstance(error, OpenProgramError) and isinstance(error, RuntimeError)
    assert (error.name, error.arguments, error.count, error.refusal) == ("solve", {"query": "again"}, 4, "loop")
    assert [text.split(":")[0] for text in tool_results(model.requests[-1])] == ["Error", "Error", "Refused"]


def test_a_model_repeating_a_valid_identical_call_is_stopped_within_twelve_model_calls():
    model = Repeats("lookup", {"key": "k"})
    with pytest.raises(LoopDetected) as caught:
        solve("find k", runtime=Runtime(provider=model))
    assert model.calls <= 12
    assert caught.value.count == 11 and caught.value.name == "lookup"
    results = tool_results(model.requests[-1])
    assert results[:9] == ["value of k"] * 9
    assert results[9].startswith("Refused: repeated call refused: lookup({\"key\": \"k\"}) was made 10 times")


def test_a_model_that_varies_its_arguments_is_not_stopped_by_this():
    model = Repeats("lookup", {"key": "k"}, answer_after=40, cap=41, vary=True)
    assert solve("find k", runtime=Runtime(provider=model)) == "answered"
    assert model.calls == 41


def test_the_first_refusal_is_guidance_recorded_as_a_loop_refusal_and_answering_completes_the_run():
    model = Repeats("lookup", {"key": 5}, answer_after=3)  # 5 is no string: each call fails validation
    refusals = Refusals()
    with use_recorder(refusals):
        assert solve("find 5", runtime=Runtime(provider=model)) == "answered"
    third = tool_results(model.requests[-1])[2]
    assert third.startswith("Refused: repeated call refused: lookup({\"key\": 5}) was made 3 times")
    assert "another identical call ends the whole run" in third
    [(name, parent, error)] = refusals.refused
    assert (name, parent, error.refusal, error.ends_run) == ("lookup", "solve", "loop", False)


def test_each_frame_counts_its_own_calls():
    # Two calls of one agentic function are two frames: nine lookups each is no repeat of the other's.
    @agentic_function(name="twice", register_globally=False)
    def twice(runtime=None) -> str:
        """Solve two questions."""
        return solve("a", runtime=runtime) + solve("b", runtime=runtime)

    script = ([{"tool_calls": [{"name": "lookup", "arguments": {"key": "k"}}]}] * 9 + ["one"]) * 2
    assert twice(runtime=Runtime(provider=ScriptedProvider(script))) == "oneone"


def test_identical_calls_in_one_reply_past_the_limit_are_all_guidance():
    calls = [{"name": "lookup", "arguments": {"key": "k"}}] * 12
    provider = ScriptedProvider([{"tool_calls": calls}, "done"])
    assert solve("find k", runtime=Runtime(provider=provider)) == "done"
    results = [m["content"] for m in provider.requests[-1]["messages"] if m["role"] == "tool"]
    assert sum(text.startswith("Refused: repeated call refused") for text in results) == 3


def test_a_loop_below_ends_the_run_through_every_enclosing_loop():
    @agentic_function(name="outer", register_globally=False)
    def outer(runtime=None) -> str:
        """Delegate to solve."""
        return runtime.exec("delegate", tools=[solve], max_iterations=5)

    provider = ScriptedProvider([{"tool_calls": [{"name": "solve", "arguments": {"question": "q"}}]}]
                                + [{"tool_calls": [{"name": "solve", "arguments": {"bad": 1}}]}] * 4)
    with pytest.raises(LoopDetected):
        outer(runtime=Runtime(provider=provider))
    assert provider.remaining == 0


@pytest.mark.parametrize("failed, any_, stopped_at", [("0", "10", 11), ("3", "0", 4), ("0", "0", None)])
def test_each_limit_turns_off_with_zero(monkeypatch, failed, any_, stopped_at):
    monkeypatch.setenv("OPENPROGRAM_MAX_FAILED_REPEATS", failed)
    monkeypatch.setenv("OPENPROGRAM_MAX_REPEATS", any_)
    model = Repeats("lookup", {"key": 5}, answer_after=30, cap=31)
    if stopped_at is None:
        assert solve("q", runtime=Runtime(provider=model)) == "answered"
    else:
        with pytest.raises(LoopDetected):
            solve("q", runtime=Runtime(provider=model))
        assert model.calls == stopped_at


@pytest.mark.parametrize("value, says", [("1", "would refuse every call"), ("-2", "must not be negative"),
                                         ("ten", "is not a valid int")])
def test_a_bad_limit_is_named_before_any_model_call(monkeypatch, value, says):
    monkeypatch.setenv("OPENPROGRAM_MAX_REPEATS", value)
    model = Repeats("lookup", {"key": "k"})
    with pytest.raises(ValueError, match=f"OPENPROGRAM_MAX_REPEATS.*{says}"):
        solve("q", runtime=Runtime(provider=model))
    assert model.calls == 0
