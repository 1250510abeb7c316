"""A runaway model is stopped within a handful of calls by default (issue 10).

The depth ceiling's first refusal in a frame is guidance; a second call of the refused name ends the
run. A default budget bounds every tree's model calls; `max_iterations` spent is an error.
"""
import logging
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from runtime import (Budget, BudgetExceeded, Recorder, Runtime, agentic_function, function, submit,
                     use_recorder)
from runtime.errors import ExecLimitExceeded
from runtime.messages import ModelReply, ToolCall, blocks_text
from runtime.providers import Provider, ScriptedProvider


class AlwaysCalls(Provider):
    """A model that answers every request by calling `names` (all of them, in parallel): a runaway.

    Its arguments differ from call to call, as a model that makes progress would: repeats of one call
    are stopped apart (tests/unit/test_repeated_calls.py).

    It stops by itself after `cap` calls so that a test of a broken guard fails instead of hanging.
    """

    name = "always"

    def __init__(self, *names: str, cap: int = 5000):
        super().__init__("always")
        self.names = names
        self.cap = cap
        self.calls = 0
        self.requests = []
        self._lock = threading.Lock()

    def complete(self, request, check=None):
        with self._lock:
            self.calls += 1
            self.requests.append(request)
            if self.calls > self.cap:
                raise AssertionError(f"the runaway was not stopped within {self.cap} model calls")
            index = self.calls
        return ModelReply(tool_calls=[ToolCall(f"c{index}_{i}", name, {"task": f"again {index}"})
                                      for i, name in enumerate(self.names)])


class Events(Recorder):
    def __init__(self):
        self.refused, self.exited, self.budgets = [], [], []

    def function_refused(self, frame, error):
        self.refused.append((frame.name, frame.name_depth, error))

    def function_exited(self, frame, status, output=None, error=None):
        self.exited.append((frame.name, status, error))

    def budget_updated(self, limits, spend):
        self.budgets.append((limits, spend))


@function(name="step", register_globally=False)
def step(task: str = "") -> str:
    """One step."""
    return "ok"


@agentic_function(register_globally=False)
def walker(runtime=None) -> str:
    """Walk: call the step tool until the model answers."""
    return runtime.exec("walk", tools=[step], max_iterations=100)


def self_caller(name="loop"):
    @agentic_function(name=name, register_globally=False)
    def loop(task: str, runtime=None) -> str:
        """Do the task, by delegating."""
        return runtime.exec(task, tools=[loop])
    return loop


def test_defaults_stop_an_always_self_calling_model_within_ten_model_calls():
    model = AlwaysCalls("loop")
    events = Events()
    with use_recorder(events), pytest.raises(RecursionError) as caught:
        self_caller()("go", runtime=Runtime(provider=model))
    assert model.calls <= 10 and model.calls == 6  # one per level; level 5 is refused, insists once
    message = "agentic function loop exceeded max nesting depth 5 — possible runaway recursion"
    assert str(caught.value) == message
    assert [(name, depth) for name, depth, _ in events.refused] == [("loop", 6), ("loop", 6)]
    # Every open frame is closed with the error: nothing is left running, nothing reads completed.
    assert [(name, status) for name, status, _ in events.exited] == [("loop", "error")] * 5
    assert all(str(error) == message for _, _, error in events.exited)


def test_the_first_refusal_is_guidance_the_model_reads_and_answering_completes_the_run():
    # Levels 1-5 call loop; level 5's call is refused, and its model answers after reading the refusal.
    provider = ScriptedProvider([{"tool_calls": [{"name": "loop", "arguments": {"task": "x"}}]}] * 5
                                + ["level 5 answers"] + ["up"] * 4)
    assert self_caller()("go", runtime=Runtime(provider=provider)) == "up"
    refused_turn = provider.requests[5]["messages"]
    tool_result = [m for m in refused_turn if m["role"] == "tool"][-1]
    assert tool_result["content"] == ("Error: RecursionError: agentic function loop exceeded max nesting "
                                      "depth 5 — possible runaway recursion")
    # The next turn tells the model it was refused; the system prompt stays byte-identical.
    note = blocks_text(refused_turn[-1]["content"])
    assert refused_turn[-1]["role"] == "user" and "REFUSED" in note and "`loop`" in note
    assert len({request["system"] for request in provider.requests}) == 1


def test_a_later_model_call_in_a_frame_with_a_refusal_is_told_so_in_its_situational_prompt():
    provider = ScriptedProvider([{"tool_calls": [{"name": "loop", "arguments": {"task": "x"}}]}] * 5
                                + ["gave up"] + ["a summary"] + ["up"] * 4)

    @agentic_function(name="loop", register_globally=False)
    def loop(task: str, runtime=None) -> str:
        """Do the task, by delegating."""
        answer = runtime.exec(task, tools=[loop])
        if answer == "gave up":
            return runtime.llm("summarise")
        return answer

    loop("go", runtime=Runtime(provider=provider))
    summary_turn = blocks_text(provider.requests[6]["messages"][0]["content"])
    assert "INSIDE the agentic function `loop`" in summary_turn and "REFUSED" in summary_turn
    assert "REFUSED" not in blocks_text(provider.requests[4]["messages"][0]["content"])


def test_budget_max_depth_one_stops_the_runaway_at_its_first_model_call():
    model = AlwaysCalls("loop")
    with pytest.raises(BudgetExceeded) as caught:
        with Budget(max_depth=1):
            self_caller()("go", runtime=Runtime(provider=model))
    assert model.calls == 1 and caught.value.dimension == "depth"


def test_the_default_budget_stops_a_breadth_first_runaway_at_the_configured_calls(monkeypatch):
    monkeypatch.setenv("OPENPROGRAM_MAX_LLM_CALLS", "40")
    names = ("alpha", "beta", "gamma")
    tools = []
    for name in names:
        @agentic_function(name=name, register_globally=False)
        def agent(task: str, runtime=None) -> str:
            """Fan out."""
            return runtime.exec(task, tools=tools)
        tools.append(agent)
    model = AlwaysCalls(*names)
    events = Events()
    with use_recorder(events), pytest.raises(BudgetExceeded) as caught:
        tools[0]("go", runtime=Runtime(provider=model))
    assert model.calls == 40
    error = caught.value
    assert (error.dimension, error.limit, error.observed) == ("llm_calls", 40, 41)
    assert "OPENPROGRAM_MAX_LLM_CALLS=40" in str(error)
    limits, spend = events.budgets[-1]  # shown on the gauge
    assert limits["max_llm_calls"] == 40 and spend["llm_calls"] == 40


class CallsWhatIsOffered(Provider):
    """A runaway that fans out: offered `worker`, it calls it `fan_out` times at once; offered `step`
    only (inside a worker), it calls step, for ever. Nothing nests deeper than one agentic call, so
    only the model-call bound can stop it."""

    name = "fanning"

    def __init__(self, fan_out: int):
        super().__init__("fanning")
        self.fan_out = fan_out
        self.calls = 0
        self._lock = threading.Lock()

    def complete(self, request, check=None):
        with self._lock:
            self.calls += 1
            index = self.calls
        if any(spec["name"] == "worker" for spec in request.tools):
            return ModelReply(tool_calls=[ToolCall(f"c{index}_{i}", "worker", {"task": f"work {index}"})
                                          for i in range(self.fan_out)])
        return ModelReply(tool_calls=[ToolCall(f"c{index}", "step", {"task": f"step {index}"})])


@agentic_function(name="worker", register_globally=False)
def worker(task: str, runtime=None) -> str:
    """Work through steps."""
    return runtime.exec(task, tools=[step], max_iterations=100)


@pytest.mark.parametrize("fan_out", [1, 4])
def test_a_top_level_exec_and_the_trees_its_tools_start_share_one_default_budget(monkeypatch, fan_out):
    # Outside any agentic function, each tool call starts a tree: had each its own limit, the bound
    # would grow with the fan-out (121 calls for a limit of 30 and four calls a reply).
    monkeypatch.setenv("OPENPROGRAM_MAX_LLM_CALLS", "30")
    model = CallsWhatIsOffered(fan_out)
    with pytest.raises(BudgetExceeded, match="OPENPROGRAM_MAX_LLM_CALLS=30"):
        Runtime(provider=model).exec("go", tools=[worker])
    assert model.calls == 30


def test_a_top_level_exec_whose_model_only_calls_leaf_tools_is_bounded_too(monkeypatch):
    monkeypatch.setenv("OPENPROGRAM_MAX_LLM_CALLS", "7")
    model = AlwaysCalls("step")
    with pytest.raises(BudgetExceeded) as caught:
        Runtime(provider=model).exec("walk", tools=[step], max_iterations=100)
    assert model.calls == 7 and caught.value.path == ["runtime.exec"]


def test_each_top_level_exec_is_a_tree_of_its_own(monkeypatch):
    monkeypatch.setenv("OPENPROGRAM_MAX_LLM_CALLS", "3")
    runtime = Runtime(provider=ScriptedProvider(["one", "two", "three", "four"]))
    assert [runtime.exec("go", tools=[]) for _ in range(4)] == ["one", "two", "three", "four"]


def test_the_default_is_500_and_zero_turns_it_off(monkeypatch):
    from runtime.default_budget import default_llm_calls
    monkeypatch.delenv("OPENPROGRAM_MAX_LLM_CALLS", raising=False)
    assert default_llm_calls() == 500
    monkeypatch.setenv("OPENPROGRAM_MAX_LLM_CALLS", "0")
    monkeypatch.setenv("OPENPROGRAM_MAX_REPEATS", "0")  # the script repeats one call: not what is tested here
    assert default_llm_calls() == 0
    provider = ScriptedProvider([{"tool_calls": [{"name": "step"}]}] * 30 + ["done"])
    assert walker(runtime=Runtime(provider=provider)) == "done"  # 31 model calls, no default bound
    monkeypatch.setenv("OPENPROGRAM_MAX_LLM_CALLS", "10")
    with pytest.raises(BudgetExceeded):
        walker(runtime=Runtime(provider=ScriptedProvider([{"tool_calls": [{"name": "step"}]}] * 30)))


@pytest.mark.parametrize("value", ["-1", "many", "1.5"])
def test_a_bad_default_limit_is_named_in_the_error(monkeypatch, value):
    monkeypatch.setenv("OPENPROGRAM_MAX_LLM_CALLS", value)
    with pytest.raises(ValueError, match="OPENPROGRAM_MAX_LLM_CALLS.*0 turns the default budget off"):
        self_caller()("go", runtime=Runtime(provider=AlwaysCalls("loop")))


@pytest.mark.parametrize("explicit, stops_at", [(Budget(max_llm_calls=1000), 20), (Budget(max_llm_calls=5), 5)])
def test_an_explicit_budget_only_tightens_the_default(monkeypatch, explicit, stops_at):
    monkeypatch.setenv("OPENPROGRAM_MAX_LLM_CALLS", "20")
    model = AlwaysCalls("step")
    with pytest.raises(BudgetExceeded), explicit:
        walker(runtime=Runtime(provider=model))
    assert model.calls == stops_at


def test_max_iterations_spent_is_the_frames_and_the_runs_error():
    events = Events()

    @agentic_function(register_globally=False)
    def inner(runtime=None) -> str:
        """Keeps going."""
        return runtime.exec("walk", tools=[step], max_iterations=3)

    @agentic_function(register_globally=False)
    def outer(runtime=None) -> str:
        """Delegates."""
        return runtime.exec("delegate", tools=[inner])

    provider = ScriptedProvider([{"tool_calls": [{"name": "inner"}]}] + [{"tool_calls": [{"name": "step"}]}] * 3)
    with use_recorder(events), pytest.raises(ExecLimitExceeded) as caught:
        outer(runtime=Runtime(provider=provider))
    assert caught.value.function == "inner" and caught.value.limit == 3
    assert "max_iterations=3" in str(caught.value) and "inner" in str(caught.value)
    assert [(name, status) for name, status, _ in events.exited if name != "step"] == [
        ("inner", "error"), ("outer", "error")]


def test_a_thread_that_lost_the_context_gets_a_default_budget_of_its_own_and_a_warning(monkeypatch, caplog):
    monkeypatch.setenv("OPENPROGRAM_MAX_LLM_CALLS", "3")
    outcomes = []

    def in_bare_thread():
        try:
            walker(runtime=Runtime(provider=model))
        except BudgetExceeded as exc:
            outcomes.append(exc)

    model = AlwaysCalls("step")
    with caplog.at_level(logging.WARNING, logger="runtime"), use_recorder(Events()):
        for _ in range(2):
            thread = threading.Thread(target=in_bare_thread)
            thread.start()
            thread.join()
    assert len(outcomes) == 2 and model.calls == 6  # each thread its own tree, each bounded
    warnings = [r for r in caplog.records if "runtime.submit" in r.getMessage()]
    assert len(warnings) == 1 and "walker" in warnings[0].getMessage()  # once per recorded run


def test_runtime_submit_keeps_the_callers_budget_and_does_not_warn(caplog):
    model = AlwaysCalls("step")
    runtime = Runtime(provider=model)
    with caplog.at_level(logging.WARNING, logger="runtime"), use_recorder(Events()), \
            Budget(max_llm_calls=10), ThreadPoolExecutor(4) as pool:
        futures = [submit(pool, walker, runtime=runtime) for _ in range(16)]
        errors = [f.exception() for f in futures]
    assert model.calls == 10 and all(isinstance(e, BudgetExceeded) for e in errors)
    assert not [r for r in caplog.records if "runtime.submit" in r.getMessage()]


def test_two_refused_calls_in_one_reply_are_both_guidance():
    # Level 5's model asks for loop twice at once: both are refused, neither ends the run; its answer does.
    call = {"name": "loop", "arguments": {"task": "x"}}
    provider = ScriptedProvider([{"tool_calls": [call]}] * 4 + [{"tool_calls": [call, call]}]
                                + ["level 5 answers"] + ["up"] * 4)
    assert self_caller()("go", runtime=Runtime(provider=provider)) == "up"
    results = [m for m in provider.requests[5]["messages"] if m["role"] == "tool"][-2:]
    assert [r["content"].startswith("Error: RecursionError:") for r in results] == [True, True]


def test_a_default_breach_under_an_explicit_budget_stays_on_the_gauge_when_that_budget_closes(monkeypatch):
    monkeypatch.setenv("OPENPROGRAM_MAX_LLM_CALLS", "20")
    events = Events()
    with use_recorder(events), pytest.raises(BudgetExceeded), Budget(max_llm_calls=1000):
        walker(runtime=Runtime(provider=AlwaysCalls("step")))
    limits, spend = events.budgets[-1]  # the block's closing report, after the breach
    assert limits["max_llm_calls"] == 20 and spend["llm_calls"] == 20


def test_the_last_turn_does_not_run_tool_calls_no_model_call_will_read():
    ran = []

    @function(name="step", register_globally=False)
    def counted(task: str = "") -> str:
        """One step."""
        ran.append(task)
        return "ok"

    provider = ScriptedProvider([{"tool_calls": [{"name": "step"}]}] * 3)
    with pytest.raises(ExecLimitExceeded):
        Runtime(provider=provider).exec("go", tools=[counted], max_iterations=3)
    assert len(ran) == 2
