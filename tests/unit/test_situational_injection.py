"""Where the situational prompt goes: the leading block of the user turn, never the system prompt."""
from runtime import Recorder, agentic_function, function, use_recorder
from runtime.providers import ScriptedProvider
from runtime.runtime import Runtime, _situational_prefix, llm


SYSTEM = "You are a careful assistant. Project memory: none."


def nested_three(provider):
    """outer -> middle -> inner, each running an exec; the model calls one level down each time."""

    @agentic_function
    def inner(task: str, runtime) -> str:
        """Do the innermost part."""
        return runtime.exec(task)

    @agentic_function
    def middle(task: str, runtime) -> str:
        """Do the middle part."""
        return runtime.exec(task)

    @agentic_function
    def outer(task: str, runtime) -> str:
        """Do the whole job."""
        return runtime.exec(task)

    return outer("the task", runtime=Runtime(provider=provider, system=SYSTEM))


def nested_replies():
    return [{"tool_calls": [{"name": "middle", "arguments": {"task": "part"}}]},
            {"tool_calls": [{"name": "inner", "arguments": {"task": "bit"}}]},
            "inner done", "middle done", "outer done"]


def first_block(request):
    return request["messages"][0]["content"][0]


def test_system_prompt_is_byte_identical_across_three_nesting_levels():
    provider = ScriptedProvider(nested_replies())
    assert nested_three(provider) == "outer done"
    systems = {r["system"] for r in provider.requests}
    assert systems == {SYSTEM}
    assert all("[Execution context]" not in r["system"] for r in provider.requests)


def test_each_call_names_the_innermost_running_function_with_its_doc():
    provider = ScriptedProvider(nested_replies())
    nested_three(provider)
    names = [first_block(r)["text"].splitlines()[0] for r in provider.requests]
    # requests: outer, middle, inner (first turns), then middle and outer again after their tool results
    assert names == [f"[Execution context] You are currently running INSIDE the agentic function `{name}`."
                     for name in ("outer", "middle", "inner", "middle", "outer")]
    inner_text = first_block(provider.requests[2])["text"]
    assert inner_text == _situational_prefix("inner", "Do the innermost part.", ["outer", "middle", "inner"])
    assert inner_text.endswith("This function's job: Do the innermost part.")


def test_call_path_line_appears_only_when_agentic_functions_are_nested():
    provider = ScriptedProvider(nested_replies())
    nested_three(provider)
    top, mid, low = (first_block(r)["text"] for r in provider.requests[:3])
    assert "Call path:" not in top
    assert "\nCall path: outer → middle\n" in mid
    assert "\nCall path: outer → middle → inner\n" in low
    # the call path sits after the warning and before the job line
    assert low.index("do the work directly") < low.index("Call path:") < low.index("This function's job")


def test_the_situational_block_leads_the_user_turn_before_the_callers_content():
    provider = ScriptedProvider(["ok"])

    @agentic_function
    def helper(runtime) -> str:
        """Helps."""
        return runtime.exec([{"type": "text", "text": "first"}, {"type": "text", "text": "second"}])

    helper(runtime=Runtime(provider=provider))
    blocks = provider.requests[0]["messages"][0]["content"]
    assert provider.requests[0]["messages"][0]["role"] == "user"
    assert [b.get("source") for b in blocks] == ["situational", None, None]
    assert [b["text"] for b in blocks[1:]] == ["first", "second"]


def test_a_plain_function_between_names_the_innermost_agentic_function():
    provider = ScriptedProvider(["ok"])

    @function
    def step(runtime=None) -> str:
        """A plain step."""
        return llm("inside a plain function")

    @agentic_function
    def agent(runtime) -> str:
        """The agent."""
        return step()

    agent(runtime=Runtime(provider=provider))
    assert "INSIDE the agentic function `agent`" in first_block(provider.requests[0])["text"]


def test_no_situational_block_outside_agentic_functions():
    provider = ScriptedProvider(["plain"])
    assert Runtime(provider=provider).exec("hello") == "plain"
    assert provider.requests[0]["messages"][0]["content"] == [{"type": "text", "text": "hello"}]


class LogRecorder(Recorder):
    def __init__(self, context_text="[history] earlier: x -> 1"):
        self.context_text = context_text
        self.events = []

    def function_entered(self, frame):
        frame.node = frame.name

    def render_context(self, frame):
        return self.context_text

    def llm_started(self, frame, request):
        self.events.append(("started", frame.name, request))
        return len(self.events)

    def llm_finished(self, handle, status, reply=None, usage=None, error=None):
        self.events.append(("finished", handle, status, reply, usage))


def test_recorder_context_follows_the_situational_block_and_llm_calls_are_recorded():
    provider = ScriptedProvider([{"tool_calls": [{"name": "echo", "arguments": {"x": "a"}}]}, "final"])
    log = LogRecorder()

    @function
    def echo(x: str) -> str:
        """Echo."""
        return x

    @agentic_function
    def agent(runtime) -> str:
        """The agent."""
        return runtime.exec("task")

    with use_recorder(log):
        agent(runtime=Runtime(provider=provider, system=SYSTEM))
    blocks = provider.requests[0]["messages"][0]["content"]
    assert [b.get("source") for b in blocks] == ["situational", "context", None]
    assert blocks[1]["text"] == "[history] earlier: x -> 1"
    started = [e for e in log.events if e[0] == "started"]
    finished = [e for e in log.events if e[0] == "finished"]
    assert len(started) == 2 and len(finished) == 2
    request = started[0][2]
    assert set(request) == {"system", "messages", "tools", "model"}
    assert request["system"] == SYSTEM and "echo" in request["tools"] and request["model"] == "scripted"
    assert finished[0][1:3] == (1, "completed")
    assert finished[0][3]["tool_calls"][0]["name"] == "echo"
    assert finished[1][3] == {"text": "final", "tool_calls": []}
    assert set(finished[1][4]) == {"input_tokens", "output_tokens"}


def test_hidden_frames_are_not_recorded_and_get_no_rendered_context():
    provider = ScriptedProvider(["ok"])
    log = LogRecorder()

    @agentic_function(expose="hidden")
    def quiet(runtime) -> str:
        """Quiet."""
        return runtime.exec("task")

    with use_recorder(log):
        quiet(runtime=Runtime(provider=provider))
    assert log.events == []
    assert [b.get("source") for b in provider.requests[0]["messages"][0]["content"]] == ["situational", None]


def test_a_failed_model_call_is_recorded_as_error():
    provider = ScriptedProvider([])  # runs out at once
    log = LogRecorder(context_text=None)

    @agentic_function
    def agent(runtime) -> str:
        """Agent."""
        return runtime.exec("task")

    with use_recorder(log):
        try:
            agent(runtime=Runtime(provider=provider))
        except RuntimeError as exc:
            assert "ran out of replies" in str(exc)
    assert log.events[-1][2] == "error"
