"""The inherited delegation budget (issue 3): depth levels, tighten-only, shared atomic spend, propagation.

Model calls are stood in for by `reserve_llm_call()` + `commit(tokens)`, exactly what the exec loop does.
Deadlines run on a fake clock, so no test sleeps or depends on timing.
"""
import asyncio
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

import runtime
from runtime import Budget, BudgetExceeded, Recorder, agentic_function, function, use_recorder
from runtime import budget as budget_module
from runtime.budget import NO_SPEND, check_deadline, current_scope, reserve_llm_call
from runtime.context import _current_budget


@pytest.fixture
def clock(monkeypatch):
    class FakeClock:
        now = 1000.0

        def __call__(self):
            return self.now

        def advance(self, seconds):
            self.now += seconds

    fake = FakeClock()
    monkeypatch.setattr(budget_module, "_clock", fake)
    return fake


def model_call(tokens=0):
    """One admitted model call (or BudgetExceeded), the way the exec loop spends the budget."""
    reservation = reserve_llm_call()
    if reservation is not None:
        reservation.commit(tokens)
    return reservation


def chain(*names, body=None):
    """Agentic functions names[0] → names[1] → ...; the last runs `body`. Returns the first."""
    entered = []
    callee = None
    for name in reversed(names):
        def make(name, callee):
            def fn():
                entered.append(name)
                return callee() if callee is not None else (body() if body else None)
            fn.__name__ = fn.__qualname__ = name
            return agentic_function(fn)
        callee = make(name, callee)
    callee.entered = entered
    return callee


# --- arguments --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("argument, value", [
    ("max_depth", 0), ("max_depth", -1), ("max_depth", 1.5), ("max_depth", True),
    ("max_llm_calls", "5"), ("max_llm_calls", 0), ("max_tokens", 0), ("max_tokens", 2.0),
    ("timeout_s", 0), ("timeout_s", -2), ("timeout_s", float("inf")), ("timeout_s", float("nan")),
    ("timeout_s", True), ("timeout_s", "10"),
])
def test_invalid_arguments_are_refused_naming_the_argument(argument, value):
    with pytest.raises(ValueError, match=f"Budget\\({argument}=.*{argument} must be a positive"):
        Budget(**{argument: value})


def test_valid_arguments_and_no_limits():
    assert Budget(timeout_s=2).limits == {"max_depth": None, "max_llm_calls": None,
                                          "max_tokens": None, "timeout_s": 2.0, "max_cost_usd": None}
    with Budget():
        assert model_call(10) is not None
        chain("a", "b", "c", "d", "e", "f")()


def test_budget_parameter_must_be_a_budget_at_decoration_time():
    with pytest.raises(ValueError, match=r"budget must be a runtime.Budget\(...\) or None"):
        @agentic_function(budget={"max_depth": 2})
        def misconfigured():
            raise AssertionError("must not run")
    assert _current_budget.get() is None


# --- max_depth ----------------------------------------------------------------------------------------------

def test_depth_counts_agentic_levels_and_refuses_level_max_plus_one_before_its_body():
    first = chain("a", "b", "c")
    with Budget(max_depth=2) as scope:
        with pytest.raises(BudgetExceeded) as caught:
            first()
    assert first.entered == ["a", "b"]
    assert caught.value.dimension == "depth"
    assert (caught.value.limit, caught.value.observed) == (2, 3)
    assert scope.snapshot()["spend"]["depth"] == 2


def test_depth_counts_frames_whatever_their_names():
    entered = []

    @agentic_function
    def again(level):
        entered.append(level)
        again(level + 1)

    with Budget(max_depth=3):
        with pytest.raises(BudgetExceeded):
            again(1)
    assert entered == [1, 2, 3]  # the budget stops it before the per-name ceiling of 5


def test_decorated_function_is_level_one_of_its_own_budget():
    @agentic_function
    def helper():
        raise AssertionError("level 2 must be refused")

    @agentic_function(budget=Budget(max_depth=1))
    def solo():
        with pytest.raises(BudgetExceeded):
            helper()
        return current_scope().snapshot()["spend"]["depth"]

    assert solo() == 1


def test_sibling_calls_reuse_a_level_and_plain_functions_do_not_count():
    @function
    def leaf():
        return "leaf"

    @agentic_function
    def child():
        return leaf()

    @agentic_function
    def parent():
        return [child() for _ in range(3)]

    with Budget(max_depth=2) as scope:
        assert parent() == ["leaf"] * 3
    assert scope.snapshot()["spend"]["depth"] == 2


def test_refused_frame_makes_no_model_call():
    first = chain("a", "b", body=model_call)
    with Budget(max_depth=1, max_llm_calls=10) as scope:
        with pytest.raises(BudgetExceeded):
            first()
    assert scope.snapshot()["spend"]["llm_calls"] == 0


# --- nested budgets tighten, never relax --------------------------------------------------------------

def test_nested_block_asking_for_more_depth_gets_what_remains():
    inner_limits = {}

    def body():
        with Budget(max_depth=10) as inner:
            inner_limits.update(inner.limits())
            chain("b", "c", "d")()

    outer_fn = chain("a", body=body)
    with Budget(max_depth=3):
        with pytest.raises(BudgetExceeded) as caught:
            outer_fn()
    assert inner_limits["max_depth"] == 2
    assert caught.value.path == ["a", "b", "c", "d"]
    assert caught.value.limit == 3  # the widest limit crossed is reported


def test_decorated_child_asking_for_more_depth_gets_what_remains():
    @agentic_function
    def grandchild():
        raise AssertionError("level 3 of the outer budget must be refused")

    @agentic_function(budget=Budget(max_depth=10))
    def greedy():
        limits = current_scope().limits()
        with pytest.raises(BudgetExceeded):
            grandchild()
        return limits["max_depth"]

    @agentic_function
    def top():
        return greedy()

    with Budget(max_depth=2):
        assert top() == 1


def test_child_asking_for_less_is_held_to_its_own_limit():
    @agentic_function(budget=Budget(max_llm_calls=1))
    def frugal():
        model_call()
        with pytest.raises(BudgetExceeded) as caught:
            model_call()
        return caught.value.limit

    with Budget(max_llm_calls=5) as outer:
        assert frugal() == 1
        assert model_call() is not None  # the parent still has its own calls left
    assert outer.snapshot()["spend"]["llm_calls"] == 2


def test_calls_tokens_and_deadline_tighten_to_what_remains(clock):
    with Budget(max_llm_calls=3, max_tokens=100, timeout_s=10) as outer:
        model_call(tokens=30)
        clock.advance(4)
        with Budget(max_llm_calls=10, max_tokens=1000, timeout_s=100) as inner:
            assert inner.limits() == {"max_depth": None, "max_llm_calls": 2, "max_tokens": 70,
                                      "timeout_s": 6.0, "max_cost_usd": None}
            model_call()
            model_call()
            with pytest.raises(BudgetExceeded) as caught:
                model_call()
        with Budget(timeout_s=1) as short:
            assert short.limits()["timeout_s"] == 1.0
    assert caught.value.dimension == "llm_calls"
    assert outer.snapshot()["spend"]["llm_calls"] == 3


# --- shared spend and atomic admission ------------------------------------------------------------------

def test_spend_in_a_child_counts_against_every_enclosing_budget():
    child_budget = Budget(max_llm_calls=10)

    @agentic_function(budget=child_budget)
    def child():
        model_call(tokens=5)
        model_call(tokens=5)

    with Budget(max_llm_calls=10) as root:
        with Budget() as middle:
            child()
    assert root.snapshot()["spend"]["llm_calls"] == middle.snapshot()["spend"]["llm_calls"] == 2
    assert root.snapshot()["spend"]["tokens"] == child_budget.snapshot()["spend"]["tokens"] == 10


def test_sibling_children_draw_from_one_parent():
    @agentic_function(budget=Budget(max_llm_calls=10))
    def sibling(calls):
        for _ in range(calls):
            model_call()

    with Budget(max_llm_calls=3):
        sibling(2)
        with pytest.raises(BudgetExceeded) as caught:
            sibling(2)
    assert (caught.value.limit, caught.value.observed) == (3, 4)


def test_a_child_opened_while_a_call_is_in_flight_is_still_held_by_the_parent():
    with Budget(max_llm_calls=3):
        in_flight = reserve_llm_call()
        with Budget(max_llm_calls=10) as child:
            assert child.limits()["max_llm_calls"] == 3  # the in-flight call may still be released
            model_call()
            model_call()
            with pytest.raises(BudgetExceeded) as caught:
                model_call()
        in_flight.release()
    assert (caught.value.limit, caught.value.observed) == (3, 4)


def test_calls_in_flight_count_and_release_gives_the_slot_back(clock):
    with Budget(max_llm_calls=2) as scope:
        first, second = reserve_llm_call(), reserve_llm_call()
        with pytest.raises(BudgetExceeded):
            reserve_llm_call()
        first.release()
        third = reserve_llm_call()
        second.commit(1)
        third.commit(2)
        third.commit(99)  # a second settle of one reservation changes nothing
    assert scope.snapshot()["spend"] == {**NO_SPEND, "llm_calls": 2, "tokens": 3}


def test_commit_rejects_a_bad_token_count():
    with Budget(max_llm_calls=2):
        reservation = reserve_llm_call()
        with pytest.raises(ValueError, match="tokens must be an integer >= 0"):
            reservation.commit(-1)


def _fan_out_in_threads(submit):
    """Eight delegations that each hold their model-call slot until all eight have asked."""
    outcomes = []
    everyone_asked = threading.Barrier(8, timeout=10)

    @agentic_function
    def delegate():
        try:
            reservation = reserve_llm_call()
        except BudgetExceeded:
            outcomes.append("refused")
            everyone_asked.wait()
            return
        outcomes.append("admitted")
        everyone_asked.wait()
        reservation.commit(1)

    @agentic_function(budget=Budget(max_llm_calls=5))
    def coordinator():
        with ThreadPoolExecutor(max_workers=8) as pool:
            for future in [submit(pool, delegate) for _ in range(8)]:
                future.result()
        return current_scope().snapshot()["spend"]

    return coordinator(), outcomes


def test_eight_parallel_delegations_in_threads_admit_exactly_five():
    spend, outcomes = _fan_out_in_threads(runtime.submit)
    assert sorted(outcomes) == ["admitted"] * 5 + ["refused"] * 3
    assert (spend["llm_calls"], spend["tokens"], spend["depth"]) == (5, 5, 2)


def test_admission_under_contention_never_overshoots():
    # Many racing attempts with frequent thread switches: the count admitted is exactly the limit.
    admitted = []

    def attempts():
        for _ in range(200):
            try:
                model_call(1)
            except BudgetExceeded:
                continue
            admitted.append(1)

    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        with Budget(max_llm_calls=500) as scope, ThreadPoolExecutor(max_workers=8) as pool:
            for future in [runtime.submit(pool, attempts) for _ in range(8)]:
                future.result()
    finally:
        sys.setswitchinterval(switch_interval)
    assert len(admitted) == 500
    assert scope.snapshot()["spend"]["llm_calls"] == scope.snapshot()["spend"]["tokens"] == 500


def test_a_plain_executor_submit_loses_the_budget_and_runtime_submit_carries_it():
    with Budget(max_llm_calls=1), ThreadPoolExecutor(max_workers=1) as pool:
        assert pool.submit(current_scope).result() is None
        assert runtime.submit(pool, current_scope).result() is current_scope()
        assert runtime.submit(pool, model_call, 1).result() is not None
        with pytest.raises(BudgetExceeded):
            runtime.submit(pool, model_call).result()


def test_runtime_parallel_tool_dispatch_carries_the_budget():
    # A model asks for eight delegations in one reply; the runtime runs them in parallel threads.
    # The coordinator's own first call plus five delegations use the six calls; three are refused,
    # and the coordinator's next call is refused too.
    from runtime.providers.scripted import ScriptedProvider

    outcomes = []

    @agentic_function
    def delegate(task: str, runtime=None) -> str:
        """Do one piece of the work."""
        try:
            outcomes.append(runtime.llm(task))
        except BudgetExceeded as exc:
            outcomes.append(f"refused at {' → '.join(exc.path)}")
        return "ok"

    @agentic_function(budget=Budget(max_llm_calls=6))
    def coordinator(runtime=None) -> str:
        """Split the work."""
        return runtime.exec("split the work", tools=[delegate])

    provider = ScriptedProvider(
        [{"tool_calls": [{"name": "delegate", "arguments": {"task": f"part {n}"}} for n in range(8)]}]
        + ["done"] * 5)
    with pytest.raises(BudgetExceeded) as caught:
        coordinator(runtime.Runtime(provider=provider))
    assert sorted(outcomes) == ["done"] * 5 + ["refused at coordinator → delegate"] * 3
    assert (caught.value.dimension, caught.value.limit, caught.value.path) == (
        "llm_calls", 6, ["coordinator"])
    assert len(provider.requests) == 6


async def test_eight_parallel_delegations_in_asyncio_admit_exactly_five():
    outcomes = []
    everyone_asked = asyncio.Barrier(8)

    @agentic_function
    async def delegate():
        try:
            reservation = reserve_llm_call()
        except BudgetExceeded:
            outcomes.append("refused")
            await everyone_asked.wait()
            return
        outcomes.append("admitted")
        await everyone_asked.wait()
        reservation.commit(1)

    @agentic_function(budget=Budget(max_llm_calls=5))
    async def coordinator():
        await asyncio.gather(*(delegate() for _ in range(8)))
        return current_scope().snapshot()["spend"]["llm_calls"]

    assert await coordinator() == 5
    assert sorted(outcomes) == ["admitted"] * 5 + ["refused"] * 3


async def test_budget_survives_to_thread_and_create_task():
    @agentic_function
    def in_thread():
        return model_call(2)

    async with Budget(max_depth=1, max_llm_calls=2) as scope:
        assert await asyncio.to_thread(in_thread) is not None  # level 1, one call
        assert await asyncio.create_task(asyncio.to_thread(model_call, 3)) is not None
        with pytest.raises(BudgetExceeded) as caught:
            await asyncio.create_task(asyncio.to_thread(model_call))
    assert caught.value.dimension == "llm_calls"
    assert scope.snapshot()["spend"]["tokens"] == 5

    @agentic_function
    async def outer():
        await asyncio.to_thread(in_thread)

    async with Budget(max_depth=1):
        with pytest.raises(BudgetExceeded) as caught:
            await asyncio.create_task(outer())
    assert caught.value.path == ["outer", "in_thread"]


# --- time and tokens ----------------------------------------------------------------------------------

def test_deadline_refuses_model_calls_and_entries_once_passed(clock):
    first = chain("late")
    with Budget(timeout_s=5):
        model_call()
        check_deadline()
        clock.advance(5)
        for attempt in (model_call, first, check_deadline):
            with pytest.raises(BudgetExceeded) as caught:
                attempt()
            assert (caught.value.dimension, caught.value.limit, caught.value.observed) == ("time", 5.0, 5.0)
    assert first.entered == []


def test_decorated_deadline_starts_at_each_call(clock):
    @agentic_function(budget=Budget(timeout_s=5))
    def timed(wait):
        clock.advance(wait)
        check_deadline()

    timed(4)
    timed(4)  # a fresh 5 s, not the 1 s left over from the previous call
    with pytest.raises(BudgetExceeded):
        timed(6)


def test_tokens_refuse_the_next_call_once_at_or_over_the_maximum():
    with Budget(max_tokens=100):
        model_call(60)
        model_call(50)  # admitted: 60 < 100 when it was asked for
        with pytest.raises(BudgetExceeded) as caught:
            model_call()
    assert (caught.value.dimension, caught.value.limit, caught.value.observed) == ("tokens", 100, 110)
    assert "raise max_tokens" in str(caught.value)


# --- the error, the scopes, the snapshot ------------------------------------------------------------

def test_budget_exceeded_carries_dimension_limit_observed_path_and_advice():
    first = chain("plan", "research", "write")
    with Budget(max_depth=2), pytest.raises(BudgetExceeded) as caught:
        first()
    error = caught.value
    assert isinstance(error, RuntimeError)
    assert (error.dimension, error.limit, error.observed) == ("depth", 2, 3)
    assert error.path == ["plan", "research", "write"]
    message = str(error)
    assert "max_depth=2" in message and "level 3" in message
    assert "plan → research → write" in message
    assert "raise max_depth or restructure the delegation" in message

    with Budget(max_llm_calls=1), pytest.raises(BudgetExceeded) as caught:
        model_call()
        model_call()
    assert "max_llm_calls=1" in str(caught.value) and "outside any agentic function" in str(caught.value)
    assert caught.value.path == []


def test_decorator_budget_is_a_template_with_a_fresh_scope_per_call():
    template = Budget(max_llm_calls=2)
    scopes = []

    @agentic_function(budget=template)
    def worker():
        scopes.append(current_scope())
        model_call()
        model_call()

    for _ in range(3):
        worker()
    assert len({id(scope) for scope in scopes}) == 3
    assert [scope.snapshot()["spend"]["llm_calls"] for scope in scopes] == [2, 2, 2]
    assert template.limits["max_llm_calls"] == 2 and template.snapshot()["spend"]["llm_calls"] == 2


def test_scopes_are_left_behind_cleanly():
    @agentic_function(budget=Budget(max_depth=1))
    def bounded():
        chain("refused")()

    with Budget(max_depth=3):
        outer_cursor = _current_budget.get()
        with pytest.raises(BudgetExceeded):
            bounded()
        assert _current_budget.get() is outer_cursor
    assert _current_budget.get() is None
    assert reserve_llm_call() is None
    check_deadline()  # no budget: nothing to check


def test_snapshot_reports_limits_and_spend_and_freezes_when_closed(clock):
    untouched = Budget(max_depth=3)
    assert untouched.snapshot() == {"limits": untouched.limits, "spend": NO_SPEND}
    with Budget(max_depth=3, max_llm_calls=4, timeout_s=60) as scope:
        chain("a", "b", body=lambda: model_call(7))()
        chain("c")()
        clock.advance(1.5)
    clock.advance(100)
    assert scope.snapshot() == {
        "limits": {"max_depth": 3, "max_llm_calls": 4, "max_tokens": None, "timeout_s": 60.0,
                   "max_cost_usd": None},
        "spend": {**NO_SPEND, "depth": 2, "llm_calls": 1, "tokens": 7, "elapsed_s": 1.5}}


# --- the recorder hears about the root budget ------------------------------------------------------

class BudgetLog(Recorder):
    def __init__(self):
        self.updates = []

    def budget_updated(self, limits, spend):
        self.updates.append((limits, spend))


def test_recorder_hears_root_start_each_breach_and_end(clock):
    log = BudgetLog()
    with use_recorder(log), Budget(max_llm_calls=1):
        model_call(5)
        clock.advance(2)
        with pytest.raises(BudgetExceeded):
            model_call()
        with Budget(max_llm_calls=9):  # a nested scope: no start or end of its own
            with pytest.raises(BudgetExceeded):
                model_call()
    limits = {"max_depth": None, "max_llm_calls": 1, "max_tokens": None, "timeout_s": None, "max_cost_usd": None}
    spent = {**NO_SPEND, "llm_calls": 1, "tokens": 5, "elapsed_s": 2.0}
    assert log.updates == [
        (limits, NO_SPEND),
        (limits, spent), (limits, spent), (limits, spent)]


def test_recorder_hears_a_decorated_root_budget():
    log = BudgetLog()

    @agentic_function(budget=Budget(max_depth=4, max_tokens=50))
    def entry():
        model_call(8)

    with use_recorder(log):
        entry()
    assert [spend for _limits, spend in log.updates] == [
        {**NO_SPEND, "depth": 1, "elapsed_s": log.updates[0][1]["elapsed_s"]},
        {**NO_SPEND, "depth": 1, "llm_calls": 1, "tokens": 8, "elapsed_s": log.updates[1][1]["elapsed_s"]}]
    assert log.updates[0][0]["max_depth"] == 4 and log.updates[0][0]["max_tokens"] == 50


class RecorderThatFailsAtBudgets(Recorder):
    def budget_updated(self, limits, spend):
        raise ConnectionError("database went away")


def test_a_budget_block_that_fails_to_open_leaves_no_scope_behind():
    # A block whose __enter__ raises never runs __exit__: had the scope stayed current, it would bound
    # whatever this thread (a pooled worker: another session) ran next.
    with use_recorder(RecorderThatFailsAtBudgets()), pytest.raises(ConnectionError):
        with Budget(max_llm_calls=1):
            pass
    assert current_scope() is None
    for _ in range(3):
        model_call()  # not refused as "model call 2" of the failed block


def test_an_async_budget_block_that_fails_to_open_leaves_no_scope_behind():
    async def open_then_call():
        with pytest.raises(ConnectionError):
            async with Budget(max_llm_calls=1):
                pass
        assert current_scope() is None

    with use_recorder(RecorderThatFailsAtBudgets()):
        asyncio.run(open_then_call())


def test_a_failing_budget_report_does_not_take_the_place_of_the_blocks_own_error(caplog):
    class FailsWhenTold(Recorder):
        failing = False

        def budget_updated(self, limits, spend):
            if self.failing:
                raise ConnectionError("database went away")

    recorder = FailsWhenTold()
    with use_recorder(recorder):
        with pytest.raises(ValueError, match="the block's own"):
            with Budget(max_llm_calls=1):
                recorder.failing = True  # the closing report fails
                raise ValueError("the block's own")
        recorder.failing = False
        with pytest.raises(ConnectionError):  # a block that did not fail still hears of the report's failure
            with Budget(max_llm_calls=1):
                recorder.failing = True
    assert "reporting the budget of a block that failed failed too" in caplog.text
