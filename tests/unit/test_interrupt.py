"""`runtime.interrupt`: the outcome of the work, whichever moment it arrives; waits on a run's bell."""
import threading
import time
from concurrent.futures import Future

import pytest

from runtime import CancelledError, Runtime, add_pre_invocation_hook, interrupt, remove_pre_invocation_hook
from runtime.messages import ModelReply
from runtime.providers.base import Provider


class FinishesAsTheSliceRunsOut(Future):
    """A future whose work completes in the gap between a slice's timeout and the waiter's next look:
    the race a real thread hits rarely, held open here so it happens every time."""

    def __init__(self, outcome):
        super().__init__()
        self.outcome = outcome

    def result(self, timeout=None):
        if not self.done():
            self.outcome(self)
            raise TimeoutError  # what Future.result says for the slice that just ran out
        return super().result(timeout)


def test_work_that_finishes_as_a_slice_runs_out_gives_its_result_not_a_timeout():
    future = FinishesAsTheSliceRunsOut(lambda f: f.set_result("the answer"))
    assert interrupt.wait(future, check=lambda: None, timeout=60) == "the answer"


def test_work_that_raises_timeout_error_itself_gives_its_own_error():
    mine = TimeoutError("the work's own")
    future = FinishesAsTheSliceRunsOut(lambda f: f.set_exception(mine))
    with pytest.raises(TimeoutError) as caught:
        interrupt.wait(future, check=lambda: None)
    assert caught.value is mine


# --- waits on a bell --------------------------------------------------------------------------------

@pytest.fixture
def bell_only(monkeypatch):
    """No safety-net wake-up within any test's life: a wait that ends did so because the bell rang, the
    work ended or the check's own deadline came."""
    monkeypatch.setattr(interrupt, "BELL_WAKE_S", 600.0)


def waiter(target, *args, **kwargs):
    """`target(*args, **kwargs)` in a thread; the thread and a dict that gets its "result" or "error"."""
    outcome = {}

    def run():
        try:
            outcome["result"] = target(*args, **kwargs)
        except BaseException as exc:
            outcome["error"] = exc
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def until(condition, what):
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.005)


def test_a_wait_on_a_bell_calls_its_check_once_a_ring_and_never_in_between(bell_only):
    bell, calls, future = interrupt.Bell(), [], Future()
    thread, outcome = waiter(interrupt.wait, future, check=interrupt.BellCheck(lambda: calls.append(1), bell))
    for rings in range(1, 4):
        bell.ring()
        until(lambda: len(calls) == rings, f"the check after ring {rings}")
    time.sleep(0.3)  # six poll intervals: a polling wait would have called the check again meanwhile
    future.set_result("the answer")
    thread.join(30)
    assert outcome == {"result": "the answer"} and len(calls) == 3


def test_a_sleep_on_a_bell_ends_when_the_ring_makes_its_check_raise(bell_only):
    bell, stopped = interrupt.Bell(), threading.Event()

    def check():
        if stopped.is_set():
            raise CancelledError("stopped")
    thread, outcome = waiter(interrupt.sleep, 600, interrupt.BellCheck(check, bell))
    stopped.set()
    bell.ring()
    thread.join(30)
    assert isinstance(outcome.get("error"), CancelledError)


def test_a_ring_during_the_check_is_not_lost(bell_only):
    bell, calls = interrupt.Bell(), []

    def check():  # the first call is where a stop arrives: its state is set, its ring comes mid-check
        calls.append(1)
        if len(calls) == 1:
            bell.ring()
        else:
            raise CancelledError("stopped")
    thread, outcome = waiter(interrupt.wait, Future(), check=interrupt.BellCheck(check, bell))
    bell.ring()
    thread.join(30)
    assert isinstance(outcome.get("error"), CancelledError) and len(calls) == 2


def test_a_bell_check_is_called_at_its_own_deadline_without_a_ring(bell_only):
    until_s = time.monotonic() + 0.2

    def check():
        if time.monotonic() > until_s:
            raise TimeoutError("the tool's deadline")
    thread, outcome = waiter(interrupt.wait, Future(), check=interrupt.BellCheck(check, interrupt.Bell(), until_s))
    thread.join(30)
    assert str(outcome.get("error")) == "the tool's deadline"


def test_work_that_ends_wakes_a_wait_on_a_bell(bell_only):
    future = Future()
    thread, outcome = waiter(interrupt.wait, future, check=interrupt.BellCheck(lambda: None, interrupt.Bell()))
    future.set_result(42)
    thread.join(30)
    assert outcome == {"result": 42}


# --- which check a model call waits with -------------------------------------------------------------

class CheckWitness(Provider):
    """Answers at once, keeping the check each request was given."""

    def __init__(self):
        super().__init__()
        self.checks = []

    def complete(self, request, check=None):
        self.checks.append(check)
        return ModelReply(text="ok")


def a_models_check(bell):
    provider = CheckWitness()
    token = interrupt.use_bell(bell) if bell is not None else None
    try:
        Runtime(provider=provider).llm("anything?")
    finally:
        if token is not None:
            interrupt.reset_bell(token)
    return provider.checks[0]


def test_a_model_call_waits_on_the_runs_bell_while_every_hook_rings_it():
    def stop_hook():
        pass
    add_pre_invocation_hook(stop_hook, rings_bell=True)
    try:
        bell = interrupt.Bell()
        check = a_models_check(bell)
        assert isinstance(check, interrupt.BellCheck) and check.bell is bell
        assert not isinstance(a_models_check(None), interrupt.BellCheck)  # no run's bell: polled
    finally:
        remove_pre_invocation_hook(stop_hook)


def test_a_hook_that_rings_no_bell_is_polled(install_hook):
    def rings():
        pass
    add_pre_invocation_hook(rings, rings_bell=True)
    try:
        install_hook(lambda: None)  # a user's hook: its answer may change at any moment
        check = a_models_check(interrupt.Bell())
        assert callable(check) and not isinstance(check, interrupt.BellCheck)
    finally:
        remove_pre_invocation_hook(rings)
