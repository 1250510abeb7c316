"""Runtime.exec and llm(): the loop's bounds, hooks and budget around every model call, model choice."""
import pytest

from runtime import (Budget, BudgetExceeded, CancelledError, Recorder, agentic_function, function,
                     use_recorder)
from runtime.context import _current_budget
from runtime.errors import ExecLimitExceeded, OpenProgramError
from runtime.exec_loop import ExecTimeout
from runtime import model_call
from runtime.model_call import ModelCall
from runtime.messages import ModelReply, ToolCall
from runtime.providers import Provider, ScriptedProvider, SimProvider
from runtime.runtime import Runtime, create_runtime, llm


@pytest.fixture
def hook(install_hook):
    return install_hook


def test_hooks_run_before_every_model_call_with_the_frame_and_request(hook):
    events = []
    hook(lambda event: events.append(event) if isinstance(event, ModelCall) else None)
    provider = ScriptedProvider([{"tool_calls": [{"name": "ping"}]}, "done"])

    @function
    def ping() -> str:
        """Ping."""
        return "pong"

    @agentic_function
    def agent(runtime) -> str:
        """Agent."""
        return runtime.exec("go", tools=[ping])

    agent(runtime=Runtime(provider=provider))
    assert len(events) == 2
    assert all(e.frame.name == "agent" and not e.in_flight for e in events)
    assert events[0].request.tool_names() == ["ping"]
    assert len(events[1].request.messages) == 3  # user, assistant tool call, tool result


def test_a_stop_before_a_model_call_propagates_and_nothing_is_sent(hook):
    def stop(event):
        if isinstance(event, ModelCall):
            raise CancelledError("stopped")
    hook(stop)
    provider = ScriptedProvider(["never"])
    with pytest.raises(CancelledError):
        Runtime(provider=provider).exec("go")
    assert provider.requests == []


class FakeReservation:
    def __init__(self, log):
        self.log = log

    def commit(self, tokens, cost_usd=0.0, model=None):
        self.log.append(("commit", tokens))

    def release(self):
        self.log.append(("release",))


@pytest.fixture
def fake_budget(monkeypatch):
    """runtime.budget's reserve/commit/release API, recorded; the budget scope marked active."""
    log = []
    monkeypatch.setattr(model_call, "reserve_llm_call",
                        lambda frame: log.append(("reserve", frame.name if frame else None)) or FakeReservation(log))
    monkeypatch.setattr(model_call, "time_left", lambda: None)  # the fake scope has no deadline
    token = _current_budget.set(object())
    yield log
    _current_budget.reset(token)


def test_an_active_budget_reserves_each_model_call_and_commits_its_tokens(fake_budget):
    provider = ScriptedProvider([{"tool_calls": [{"name": "ping"}]}, "done"])

    @function
    def ping() -> str:
        """Ping."""
        return "pong"

    Runtime(provider=provider).exec("go", tools=[ping])
    assert [e[0] for e in fake_budget] == ["reserve", "commit", "reserve", "commit"]
    assert all(isinstance(e[1], int) for e in fake_budget if e[0] == "commit")


def test_a_failed_model_call_releases_its_reservation(fake_budget):
    with pytest.raises(RuntimeError, match="ran out of replies"):
        Runtime(provider=ScriptedProvider([])).exec("go")
    assert fake_budget == [("reserve", None), ("release",)]


def test_no_budget_means_no_reservation_is_asked_for(monkeypatch):
    def refuse(frame):
        raise AssertionError("reserve_llm_call was called with no budget open")
    monkeypatch.setattr(model_call, "reserve_llm_call", refuse)
    assert Runtime(provider=ScriptedProvider(["ok"])).exec("go") == "ok"


def test_exec_budget_argument_is_entered_around_the_loop():
    entered = []

    class Scope:
        def __enter__(self):
            entered.append("in")

        def __exit__(self, *exc):
            entered.append("out")

    assert Runtime(provider=ScriptedProvider(["ok"])).exec("go", budget=Scope()) == "ok"
    assert entered == ["in", "out"]


def test_a_real_budget_caps_the_model_calls_of_one_exec():
    @function
    def again() -> str:
        """Again."""
        return "more"

    provider = ScriptedProvider([{"tool_calls": [{"name": "again"}]}] * 5)
    with pytest.raises(BudgetExceeded) as info:
        Runtime(provider=provider).exec("go", tools=[again], budget=Budget(max_llm_calls=2))
    assert info.value.dimension == "llm_calls"
    assert len(provider.requests) == 2


def test_token_usage_is_totalled_on_the_runtime():
    @function
    def ping() -> str:
        """Ping."""
        return "pong"

    runtime = Runtime(provider=ScriptedProvider([{"tool_calls": [{"name": "ping"}]}, "done", "again"]))
    runtime.exec("go", tools=[ping])
    runtime.llm("and once more")
    assert runtime.usage["model_calls"] == 3
    assert runtime.usage["input_tokens"] > 0 and runtime.usage["output_tokens"] > 0


def test_max_iterations_bounds_the_loop():
    @function
    def again() -> str:
        """Again."""
        return "more"

    provider = ScriptedProvider([{"tool_calls": [{"name": "again"}]}] * 3)
    with pytest.raises(ExecLimitExceeded) as caught:
        Runtime(provider=provider).exec("go", tools=[again], max_iterations=3)
    assert len(provider.requests) == 3
    assert "max_iterations=3" in str(caught.value) and caught.value.limit == 3
    assert isinstance(caught.value, OpenProgramError)


def test_timeout_s_ends_the_loop_between_turns(monkeypatch):
    import runtime.exec_loop as loop
    clock = [0.0]
    monkeypatch.setattr(loop.time, "monotonic", lambda: clock[0])

    @function
    def tick() -> str:
        """Advances the clock past the deadline."""
        clock[0] += 10
        return "tick"

    provider = ScriptedProvider([{"tool_calls": [{"name": "tick"}]}, "never"])
    with pytest.raises(ExecTimeout, match="timeout_s=5"):
        Runtime(provider=provider).exec("go", tools=[tick], timeout_s=5)
    assert len(provider.requests) == 1


@pytest.mark.parametrize("kwargs, message", [({"max_iterations": 0}, "max_iterations"),
                                              ({"timeout_s": -1}, "timeout_s"),
                                              ({"tool_choice": 3}, "tool_choice")])
def test_bad_exec_arguments_are_named(kwargs, message):
    with pytest.raises((ValueError, TypeError), match=message):
        Runtime(provider=ScriptedProvider(["x"])).exec("go", **kwargs)


def test_content_must_be_text_or_blocks():
    with pytest.raises(TypeError, match="content"):
        Runtime(provider=ScriptedProvider(["x"])).exec(42)
    with pytest.raises(TypeError, match=r"content\[0\]"):
        Runtime(provider=ScriptedProvider(["x"])).exec([{"text": "no type"}])


def test_tools_called_by_a_top_level_exec_run_on_its_runtime():
    provider = ScriptedProvider([{"tool_calls": [{"name": "helper"}]}, "inner answer", "outer answer"])

    @function
    def helper(runtime=None) -> str:
        """Asks the model itself."""
        return runtime.llm("inner question")

    runtime = Runtime(provider=provider)
    assert runtime.exec("go", tools=[helper]) == "outer answer"
    assert provider.remaining == 0 and len(provider.requests) == 3


def test_llm_uses_the_runtime_of_the_call_chain_and_offers_no_tools():
    provider = ScriptedProvider(["an answer"])

    @function
    def unrelated() -> str:
        """Not offered to llm()."""
        return "x"

    @agentic_function
    def agent(runtime) -> str:
        """Agent."""
        return llm("question?")

    assert agent(runtime=Runtime(provider=provider)) == "an answer"
    assert provider.requests[0]["tools"] == []


def test_llm_outside_a_call_chain_uses_a_fresh_runtime_from_the_environment(monkeypatch):
    for var in ("OPENPROGRAM_MODEL", "OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    closed = []
    monkeypatch.setattr(Runtime, "close", lambda self: closed.append(self))
    assert llm("hello").startswith("(simulated model)")
    assert len(closed) == 1


def test_per_call_model_override():
    runtime = Runtime(model="sim")
    provider, model = runtime.provider_for("sim:naive")
    assert isinstance(provider, SimProvider) and model == "naive" and provider is runtime.provider
    other, name = runtime.provider_for("openai:gpt-4o-mini")
    assert other.name == "openai" and name == "gpt-4o-mini"
    assert runtime.provider_for("openai:gpt-4o-mini")[0] is other  # kept for the runtime's life


# --- the guard, shown with the simulated model ---------------------------------------------------

def make_wiki_agent(entered):
    @function
    def search_notes(query: str) -> str:
        """Search the notes of a wiki vault for text."""
        return "2 notes found"

    @agentic_function
    def wiki_agent(task: str, runtime) -> str:
        """Maintain a wiki vault: route the task to ingest, query or lint."""
        entered.append(task)
        return runtime.exec(task)

    return wiki_agent


def test_naive_sim_self_recurses_into_the_depth_ceiling_and_its_insisting_ends_the_run():
    entered = []
    refused = []

    class Refusals(Recorder):
        def function_refused(self, frame, error):
            refused.append((frame.name, frame.name_depth, str(error)))

    wiki_agent = make_wiki_agent(entered)
    runtime = create_runtime(model="sim:naive")
    with use_recorder(Refusals()), pytest.raises(RecursionError) as caught:
        wiki_agent("maintain the wiki vault", runtime=runtime)
    assert len(entered) == 5  # five frames ran; the sixth was refused by the guard, twice
    message = "agentic function wiki_agent exceeded max nesting depth 5 — possible runaway recursion"
    assert refused == [("wiki_agent", 6, message)] * 2
    assert str(caught.value) == message
    assert runtime.usage["model_calls"] == 6  # one per level, and level 5's model insisted once


def test_naive_per_call_model_also_recurses():
    entered = []

    @agentic_function
    def wiki_agent(task: str, runtime) -> str:
        """Maintain a wiki vault."""
        entered.append(task)
        return runtime.exec(task, model="sim:naive")

    with pytest.raises(RecursionError):
        wiki_agent("maintain the wiki vault", runtime=create_runtime(model="sim"))
    assert len(entered) == 5


def test_heeding_sim_does_not_call_the_function_it_is_inside():
    entered = []
    wiki_agent = make_wiki_agent(entered)
    answer = wiki_agent("maintain the wiki vault", runtime=create_runtime(model="sim"))
    assert len(entered) == 1
    assert "search_notes: 2 notes found" in answer


class UsageAs(Provider):
    """Answers "hi" reporting `usage` as it is, the way a provider of one's own might."""

    def __init__(self, usage):
        super().__init__("usage")
        self.usage = usage

    def complete(self, request, check=None):
        return ModelReply(text="hi", usage=self.usage)


@pytest.mark.parametrize("usage", [{"input_tokens": "n/a", "output_tokens": 4}, {"input_tokens": -100, "output_tokens": 4},
                                   {"input_tokens": True, "output_tokens": 4}, {"output_tokens": 4}, None])
def test_usage_that_is_not_a_count_is_counted_as_zero_and_the_call_is_settled(usage):
    class Finished(Recorder):
        def __init__(self):
            self.finished = []

        def llm_started(self, frame, request):
            return "handle"

        def llm_finished(self, handle, status, reply=None, usage=None, error=None):
            self.finished.append((handle, status, usage))

    budget = Budget(max_tokens=1000)

    @agentic_function(budget=budget)
    def agent(runtime) -> str:
        """Agent."""
        return runtime.exec("go")

    runtime, recorder = Runtime(provider=UsageAs(usage)), Finished()
    with use_recorder(recorder):
        assert agent(runtime=runtime) == "hi"
    tokens = 0 if usage is None else 4
    assert recorder.finished == [("handle", "completed", {"input_tokens": 0, "output_tokens": tokens})]
    assert budget.snapshot()["spend"]["llm_calls"] == 1 and budget.snapshot()["spend"]["tokens"] == tokens
    assert runtime.usage["input_tokens"] == 0


def test_tool_call_ids_repeated_within_and_across_turns_are_made_unique():
    @function
    def ping(n: int) -> str:
        """Ping."""
        return f"pong {n}"

    same = lambda *ns: {"tool_calls": [{"id": "c1", "name": "ping", "arguments": {"n": n}} for n in ns]}
    provider = ScriptedProvider([same(1, 2), same(3), "done"])
    Runtime(provider=provider).exec("go", tools=[ping])
    messages = provider.requests[2]["messages"]
    ids = [c["id"] for m in messages if m["role"] == "assistant" for c in m["tool_calls"]]
    results = {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}
    assert ids[0] == "c1" and len(set(ids)) == 3
    assert [results[i] for i in ids] == ["pong 1", "pong 2", "pong 3"]


def test_the_recorded_reply_names_each_tool_call_as_its_result_does():
    # Made unique before the record is written: a trace whose call ids differ from its results' would
    # pair a result with the wrong call.
    @function
    def ping(n: int) -> str:
        """Ping."""
        return f"pong {n}"

    class Replies(Recorder):
        def __init__(self):
            self.replies = []

        def llm_started(self, frame, request):
            return "handle"

        def llm_finished(self, handle, status, reply=None, usage=None, error=None):
            self.replies.append(reply)

    @agentic_function
    def agent(runtime) -> str:
        """Agent."""
        return runtime.exec("go", tools=[ping])

    same = lambda *ns: {"tool_calls": [{"id": "c1", "name": "ping", "arguments": {"n": n}} for n in ns]}
    provider, recorder = ScriptedProvider([same(1, 2), same(3), "done"]), Replies()
    with use_recorder(recorder):
        agent(runtime=Runtime(provider=provider))
    recorded = [call["id"] for reply in recorder.replies for call in reply["tool_calls"]]
    answered = [m["tool_call_id"] for m in provider.requests[2]["messages"] if m["role"] == "tool"]
    assert recorded == answered and len(set(recorded)) == 3


def test_a_tool_call_id_that_is_not_text_gets_one_and_extra_usage_counts_are_kept():
    # A provider of one's own may hand any id on; and cached or reasoning token counts are the
    # recorder's to keep, beside the two the budget counts.
    @function
    def ping(n: int) -> str:
        """Ping."""
        return f"pong {n}"

    class OddIds(Provider):
        name = "odd"

        def __init__(self):
            super().__init__("odd")
            self.requests = []

        def complete(self, request, check=None):
            self.requests.append(request)
            if len(self.requests) == 1:
                return ModelReply(tool_calls=[ToolCall(["not", "text"], "ping", {"n": 1})],
                                  usage={"input_tokens": 5, "output_tokens": 2, "cached_tokens": 4})
            return ModelReply(text="done")

    class Usage(Recorder):
        seen = []

        def llm_finished(self, handle, status, reply=None, usage=None, error=None):
            self.seen.append(usage)

    provider = OddIds()
    with use_recorder(Usage()):
        assert Runtime(provider=provider).exec("go", tools=[ping]) == "done"
    call = provider.requests[1].messages[1]["tool_calls"][0]
    assert call["id"] == "call_t1_0" and provider.requests[1].messages[2]["tool_call_id"] == "call_t1_0"
    assert Usage.seen[0] == {"input_tokens": 5, "output_tokens": 2, "cached_tokens": 4}


@pytest.mark.parametrize("kwargs, message", [
    ({"max_iterations": 0}, "max_iterations must be a positive integer, got 0"),
    ({"max_iterations": True}, "max_iterations must be a positive integer, got True"),
    ({"timeout_s": float("nan")}, "timeout_s must be a positive number of seconds, got nan"),
    ({"timeout_s": float("inf")}, "timeout_s must be a positive number of seconds, got inf"),
    ({"timeout_s": True}, "timeout_s must be a positive number of seconds, got True"),
    ({"timeout_s": 10**5000}, "timeout_s must be a positive number of seconds, got <about 5,000 digits>"),
])
def test_exec_refuses_limits_it_cannot_keep_naming_them(kwargs, message):
    # NaN compares false with everything: taken as a timeout, it never ran out.
    model = ScriptedProvider(["never asked"])
    with pytest.raises(ValueError, match=None) as caught:
        Runtime(provider=model).exec("go", tools=[], **kwargs)
    assert message in str(caught.value) and not model.requests
