"""A person's approval of a tool call in an attended run: waiting, approving, denying, timing out, stopping."""
import threading

import pytest

from runtime import CancelledError, Recorder, agentic_function, function, use_recorder
from runtime.approval import APPROVAL_TIMEOUT_ENV, Answer, Approver, take_approved
from runtime.providers import ScriptedProvider
from runtime.runtime import Runtime


def call(name, **arguments):
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


@function(requires_approval=True, register_globally=False)
def publish(text: str) -> str:
    """Publish a note for everyone to read."""
    return f"published {text}"


class Notes(Recorder):
    """Keeps what the runtime told it, in order."""

    def __init__(self):
        self.events = []
        self.lock = threading.Lock()
        self.next_node = 0

    def _node(self):
        with self.lock:
            self.next_node += 1
            return self.next_node

    def function_entered(self, frame):
        continued = take_approved(frame)
        frame.node = continued.node if continued is not None else self._node()
        self.events.append(("entered", frame.name, frame.node))

    def function_exited(self, frame, status, output=None, error=None):
        self.events.append(("exited", frame.name, status))

    def approval_requested(self, frame):
        frame.node = self._node()
        self.events.append(("awaiting_approval", frame.name, frame.node, frame.depth))

    def approval_ended(self, frame, status, error):
        self.events.append((status, frame.name, getattr(error, "refusal", None), str(error)))


class Person(Approver):
    """Answers from a list, in turn, once each request has been seen; records each request."""

    def __init__(self, answers, expect=1):
        self.answers = list(answers)
        self.requests = []
        self.lock = threading.Lock()
        self.all_asked = threading.Event()
        self.expect = expect

    def answer(self, request, timeout_s):
        with self.lock:
            self.requests.append(request)
            if len(self.requests) == self.expect:
                self.all_asked.set()
        assert self.all_asked.wait(30), "the parallel requests did not all wait together"
        with self.lock:
            return self.answers.pop(0)


def attended(replies, approver, tools=(publish,)):
    provider = ScriptedProvider(replies)
    notes = Notes()
    with use_recorder(notes):
        answer = Runtime(provider=provider, unattended=False, approver=approver).exec("task", tools=list(tools))
    return answer, provider, notes


def tool_results(provider, request=-1):
    return [m["content"] for m in provider.requests[request]["messages"] if m["role"] == "tool"]


def test_an_approved_call_runs_in_the_node_that_waited():
    person = Person([Answer(True)])
    answer, provider, notes = attended([call("publish", text="hi"), "done"], person)
    assert answer == "done" and tool_results(provider) == ["published hi"]
    assert notes.events == [("awaiting_approval", "publish", 1, 1), ("entered", "publish", 1),
                            ("exited", "publish", "completed")]
    assert person.requests[0].tool == "publish" and person.requests[0].arguments == {"text": "hi"}
    assert person.requests[0].node == 1 and person.requests[0].path == ["publish"]


def test_a_denial_with_its_reason_is_the_tools_result_and_the_node_is_refused():
    answer, provider, notes = attended([call("publish", text="hi"), "ok"], Person([Answer(False, "not today")]))
    assert tool_results(provider) == ["Refused: approval to run tool 'publish' was denied: not today"]
    assert notes.events[-1] == ("refused", "publish", "denied",
                                "approval to run tool 'publish' was denied: not today")
    assert not any(event[0] == "entered" for event in notes.events)


def test_no_answer_in_time_denies_saying_so(monkeypatch):
    monkeypatch.setenv(APPROVAL_TIMEOUT_ENV, "0.5")
    seen = []

    class Silent(Approver):
        def answer(self, request, timeout_s):
            seen.append(timeout_s)
            return None

    _, provider, notes = attended([call("publish", text="hi"), "ok"], Silent())
    assert seen == [0.5]
    assert tool_results(provider) == [
        f"Refused: approval to run tool 'publish' was denied: no one answered within 0.5 s ({APPROVAL_TIMEOUT_ENV})"]
    assert notes.events[-1][:3] == ("refused", "publish", "denied")


def test_a_timeout_that_is_not_a_positive_number_is_named(monkeypatch):
    monkeypatch.setenv(APPROVAL_TIMEOUT_ENV, "0")
    with pytest.raises(ValueError, match=APPROVAL_TIMEOUT_ENV):
        attended([call("publish", text="hi"), "ok"], Person([Answer(True)]))


def test_a_stop_while_waiting_ends_the_node_cancelled_and_the_run():
    class Stopped(Approver):
        def answer(self, request, timeout_s):
            raise CancelledError("stopped while waiting")

    notes = Notes()
    with use_recorder(notes), pytest.raises(CancelledError):
        Runtime(provider=ScriptedProvider([call("publish", text="hi"), "ok"]), unattended=False,
                approver=Stopped()).exec("task", tools=[publish])
    assert notes.events[-1][:2] == ("cancelled", "publish")


def test_parallel_calls_each_wait_for_their_own_answer():
    person = Person([Answer(True), Answer(False, "no")], expect=2)
    replies = [{"tool_calls": [{"name": "publish", "arguments": {"text": "a"}},
                               {"name": "publish", "arguments": {"text": "b"}}]}, "ok"]
    _, provider, notes = attended(replies, person)
    assert len(person.requests) == 2  # both waited at once, or Person's wait would have failed
    results = tool_results(provider)
    assert sorted(results) == sorted(["published a", "Refused: approval to run tool 'publish' was denied: no"]) \
        or sorted(results) == sorted(["published b", "Refused: approval to run tool 'publish' was denied: no"])
    assert [event[0] for event in notes.events].count("awaiting_approval") == 2


def test_a_request_three_levels_down_carries_its_depth_and_path():
    @agentic_function
    def middle(task: str, runtime=None) -> str:
        """Delegate the publishing."""
        return runtime.exec(task, tools=[publish])

    @agentic_function
    def outer(task: str, runtime=None) -> str:
        """Delegate to middle."""
        return runtime.exec(task, tools=[middle])

    person = Person([Answer(True)])
    provider = ScriptedProvider([call("middle", task="go"), call("publish", text="deep"), "inner", "outer"])
    with use_recorder(Notes()):
        outer("start", runtime=Runtime(provider=provider, unattended=False, approver=person))
    request = person.requests[0]
    assert request.depth == 3 and request.path == ["outer", "middle", "publish"]


def test_a_plain_callable_approver_still_decides_with_a_bool():
    _, provider, _ = attended([call("publish", text="x"), "ok"], lambda name, arguments: False)
    assert tool_results(provider) == ["Refused: approval to run tool 'publish' was denied"]


def test_an_approved_call_its_check_fn_refuses_ends_its_waiting_node():
    @function(requires_approval=True, check_fn=lambda: False, register_globally=False)
    def guarded(text: str) -> str:
        """Publish, unless blocked."""
        return text

    _, provider, notes = attended([call("guarded", text="x"), "ok"], Person([Answer(True)]), tools=(guarded,))
    assert "check_fn said no" in tool_results(provider)[0]
    assert notes.events[-1][:2] == ("error", "guarded")
