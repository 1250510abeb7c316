"""ScriptedProvider: plays its replies in order across nested calls, and records every request."""
import pytest

from runtime import agentic_function
from runtime.providers import ScriptedProvider
from runtime.runtime import Runtime


def test_plays_replies_in_order_across_nested_calls_and_records_requests():
    provider = ScriptedProvider([{"tool_calls": [{"name": "child", "arguments": {"q": "x"}}]}, "child answer",
                                 "parent answer"])

    @agentic_function
    def child(q: str, runtime) -> str:
        """Child."""
        return runtime.exec(q, tools=[])

    @agentic_function
    def parent(runtime) -> str:
        """Parent."""
        return runtime.exec("start", tools=[child])

    assert parent(runtime=Runtime(provider=provider, system="S")) == "parent answer"
    assert len(provider.requests) == 3
    assert all(set(r) == {"system", "messages", "tools"} for r in provider.requests)
    assert [r["tools"] for r in provider.requests] == [["child"], [], ["child"]]
    assert provider.requests[1]["messages"][0]["content"][-1]["text"] == "x"
    roles = [m["role"] for m in provider.requests[2]["messages"]]
    assert roles == ["user", "assistant", "tool"]
    assert provider.requests[2]["messages"][2]["content"] == "child answer"


def test_requests_are_snapshots():
    provider = ScriptedProvider([{"tool_calls": [{"name": "missing"}]}, "done"])
    Runtime(provider=provider).exec("go")
    assert len(provider.requests[0]["messages"]) == 1


def test_running_out_of_replies_is_a_clear_error():
    provider = ScriptedProvider(["only one"])
    runtime = Runtime(provider=provider)
    runtime.exec("first")
    with pytest.raises(RuntimeError, match=r"ran out of replies: call 2 was made but only 1 replies"):
        runtime.exec("second")


def test_a_malformed_script_entry_is_named():
    with pytest.raises(ValueError, match="scripted reply 0"):
        Runtime(provider=ScriptedProvider([42])).exec("go")
    with pytest.raises(ValueError, match=r"tool_calls\[0\] needs a 'name'"):
        Runtime(provider=ScriptedProvider([{"tool_calls": [{"arguments": {}}]}])).exec("go")
