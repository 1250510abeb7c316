"""Every dispatch rule, driven through Runtime.exec with a ScriptedProvider playing the model."""
import asyncio
import threading

import pytest

from runtime import (BudgetExceeded, CancelledError, Recorder, agentic_function, function,
                     use_recorder)
from runtime.providers import ScriptedProvider
from runtime.runtime import Runtime


def call(name, **arguments):
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def run(replies, tools=None, **runtime_options):
    """Exec one task; return (answer, the tool result texts the model saw, the provider)."""
    provider = ScriptedProvider(replies)
    answer = Runtime(provider=provider, **runtime_options).exec("do the task", tools=tools)
    return answer, tool_results(provider), provider


def tool_results(provider):
    last = provider.requests[-1]["messages"]
    return [m["content"] for m in last if m["role"] == "tool"]


def test_a_tool_result_reaches_the_model():
    @function
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    answer, results, _ = run([call("add", a=2, b=3), "five"], tools=[add])
    assert answer == "five" and results == ["5"]


def test_check_fn_falsy_blocks_the_call_with_a_message():
    ran = []

    @function(check_fn=lambda args: args["path"].startswith("/tmp/"))
    def delete(path: str) -> str:
        """Delete a file."""
        ran.append(path)
        return "deleted"

    _, results, _ = run([call("delete", path="/etc/passwd"), call("delete", path="/tmp/x"), "ok"], tools=[delete])
    assert ran == ["/tmp/x"]
    assert results[0].startswith("Refused:") and "check_fn" in results[0] and "delete" in results[0]
    assert results[1] == "deleted"


def test_check_fn_without_parameters_is_called_bare():
    @function(check_fn=lambda: False)
    def noop() -> str:
        """Nothing."""
        return "ran"

    _, results, _ = run([call("noop"), "ok"], tools=[noop])
    assert "blocked" in results[0]


def test_invalid_arguments_get_an_error_naming_the_parameter_and_the_loop_continues():
    @function
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    answer, results, _ = run([call("add", a="two", b=3), call("add", a=2), call("add", a=2, b=2), "done"],
                             tools=[add])
    assert answer == "done"
    assert "argument 'a'" in results[0] and "integer" in results[0]
    assert "argument 'b'" in results[1] and "required" in results[1]
    assert results[2] == "4"


def test_tool_errors_become_results_the_model_can_read():
    @function
    def flaky(x: str) -> str:
        """Fails."""
        raise ValueError(f"cannot handle {x}")

    _, results, _ = run([call("flaky", x="this"), "gave up"], tools=[flaky])
    assert results == ["Error: ValueError: cannot handle this"]


@pytest.mark.parametrize("error", [CancelledError("stop pressed"),
                                   BudgetExceeded("over", dimension="llm_calls", limit=1, observed=2, path=["f"])])
def test_stop_and_budget_breach_propagate_and_end_the_run(error):
    @function
    def tool() -> str:
        """Raises."""
        raise error

    provider = ScriptedProvider([call("tool"), "never reached"])
    with pytest.raises(type(error)):
        Runtime(provider=provider).exec("go", tools=[tool])
    assert provider.remaining == 1


def test_a_stop_in_one_of_several_parallel_calls_ends_the_run():
    @function
    def fine() -> str:
        """Fine."""
        return "ok"

    @function
    def stopper() -> str:
        """Stops."""
        raise CancelledError("stop")

    provider = ScriptedProvider([{"tool_calls": [{"name": "fine"}, {"name": "stopper"}]}, "never"])
    with pytest.raises(CancelledError):
        Runtime(provider=provider).exec("go", tools=[fine, stopper])


def test_recursion_error_from_the_guard_is_an_ordinary_error_result():
    @function
    def deep() -> str:
        """Too deep."""
        raise RecursionError("agentic function x exceeded max nesting depth 5 — possible runaway recursion")

    _, results, _ = run([call("deep"), "ok"], tools=[deep])
    assert results[0].startswith("Error: RecursionError: agentic function x exceeded")


def test_timeout_gives_the_model_an_error_and_closes_the_node_as_error():
    release = threading.Event()

    @agentic_function(timeout=0.05)
    def slow_tool() -> str:
        """Takes too long."""
        release.wait(10)
        return "late"

    @agentic_function
    def outer(runtime) -> str:
        """Runs the slow tool."""
        return runtime.exec("go", tools=[slow_tool])

    class Log(Recorder):
        def __init__(self):
            self.exits = []

        def function_exited(self, frame, status, output=None, error=None):
            self.exits.append((frame.name, status, str(error) if error else None))

    log = Log()
    provider = ScriptedProvider([call("slow_tool"), "it timed out"])
    with use_recorder(log):
        assert outer(runtime=Runtime(provider=provider)) == "it timed out"
        results = tool_results(provider)
        assert "timed out after 0.05s" in results[0] and results[0].startswith("Error:")
        assert log.exits[0][:2] == ("slow_tool", "error")  # closed when abandoned, before outer returned
        release.set()
    assert [name for name, *_ in log.exits].count("slow_tool") == 1  # the late exit is not recorded again


def test_an_abandoned_tool_cannot_make_model_calls_after_its_timeout():
    release, finished = threading.Event(), threading.Event()
    outcome = []

    @function(timeout=0.05)
    def stubborn(runtime=None) -> str:
        """Keeps going after its timeout."""
        release.wait(10)
        try:
            runtime.llm("one more question")
        except BaseException as exc:
            outcome.append(exc)
        finished.set()
        return "late"

    provider = ScriptedProvider([call("stubborn"), "moved on", "must not be used"])
    assert Runtime(provider=provider).exec("go", tools=[stubborn]) == "moved on"
    release.set()
    assert finished.wait(10)
    assert type(outcome[0]).__name__ == "ToolTimeoutError" and "stubborn" in str(outcome[0])
    assert provider.remaining == 1


def test_approval_without_an_approver_when_attended_says_none_is_configured():
    @function(requires_approval=True)
    def pay(amount: int) -> str:
        """Pay money."""
        return "paid"

    _, results, _ = run([call("pay", amount=1), "ok"], tools=[pay], unattended=False)
    assert "no approver is configured" in results[0]


def test_cache_returns_the_stored_result_within_the_ttl():
    runs = []

    @function(cache=True, cache_ttl=60)
    def fetch(url: str) -> str:
        """Fetch a page."""
        runs.append(url)
        return f"page {len(runs)}"

    _, results, _ = run([call("fetch", url="a"), call("fetch", url="a"), call("fetch", url="b"), "ok"],
                        tools=[fetch])
    assert results == ["page 1", "page 1", "page 2"]
    assert runs == ["a", "b"]


def test_cache_entries_expire_after_the_ttl(monkeypatch):
    import runtime.dispatch as dispatch
    now = [1000.0]
    monkeypatch.setattr(dispatch.time, "monotonic", lambda: now[0])
    cache = dispatch.ResultCache()
    key = cache.key("fetch", {"url": "a"})
    cache.put(key, "stored", 5)
    assert cache.get(key) == "stored"
    now[0] += 6
    assert cache.get(key) is None


def test_long_results_keep_head_and_tail_with_a_marker():
    text = "H" * 70 + "M" * 900 + "T" * 30

    @function(max_result_chars=100, head_ratio=0.7)
    def big() -> str:
        """Big."""
        return text

    _, results, _ = run([call("big"), "ok"], tools=[big])
    result = results[0]
    assert result.startswith("H" * 70 + "\n\n[…") and result.endswith("…]\n\n" + "T" * 30)
    assert "900 of 1000 characters cut" in result
    assert "M" not in result


def test_persist_full_saves_the_untruncated_result_and_says_where(tmp_path):
    text = "x" * 500 + "END"

    @function(max_result_chars=50, persist_full=True)
    def big() -> str:
        """Big."""
        return text

    _, results, _ = run([call("big"), "ok"], tools=[big], results_dir=str(tmp_path))
    saved = [p for p in tmp_path.iterdir()]
    assert len(saved) == 1 and saved[0].read_text() == text
    assert str(saved[0]) in results[0]
    assert oct(saved[0].stat().st_mode & 0o777) == "0o600"


def test_requires_approval_is_refused_in_unattended_mode_and_not_offered():
    ran = []

    @function(requires_approval=True)
    def pay(amount: int) -> str:
        """Pay money."""
        ran.append(amount)
        return "paid"

    _, results, provider = run([call("pay", amount=5), "ok"], tools=[pay], unattended=True)
    assert ran == [] and provider.requests[0]["tools"] == []
    assert "not allowed in unattended mode" in results[0]


def test_conditional_approval_is_asked_per_call():
    @function(requires_approval=lambda args: args["amount"] > 100)
    def pay(amount: int) -> str:
        """Pay money."""
        return f"paid {amount}"

    _, results, provider = run([call("pay", amount=5), call("pay", amount=500), "ok"], tools=[pay],
                               unattended=True)
    assert provider.requests[0]["tools"] == ["pay"]
    assert results[0] == "paid 5"
    assert results[1].startswith("Refused:") and "requires approval" in results[1] and "unattended" in results[1]


def test_an_approver_grants_or_denies_when_attended():
    @function(requires_approval=True)
    def pay(amount: int) -> str:
        """Pay money."""
        return f"paid {amount}"

    asked = []

    def approver(name, arguments):
        asked.append((name, arguments))
        return arguments["amount"] < 10

    _, results, _ = run([call("pay", amount=5), call("pay", amount=50), "ok"], tools=[pay],
                        unattended=False, approver=approver)
    assert results[0] == "paid 5" and "denied" in results[1]
    assert asked == [("pay", {"amount": 5}), ("pay", {"amount": 50})]


def test_deferred_tools_ship_only_after_load_tools():
    @function(defer=True)
    def rare_tool(q: str) -> str:
        """A rarely used tool."""
        return f"rare {q}"

    @function
    def common() -> str:
        """Common."""
        return "c"

    replies = [{"tool_calls": [{"name": "load_tools", "arguments": {"names": ["rare_tool", "nope"]}}]},
               call("rare_tool", q="z"), "ok"]
    _, results, provider = run(replies, tools=[rare_tool, common])
    assert provider.requests[0]["tools"] == ["common", "load_tools"]
    assert "rare_tool" in provider.requests[1]["tools"] and "load_tools" not in provider.requests[1]["tools"]
    assert "Loaded: rare_tool" in results[0] and "nope" in results[0]
    assert results[1] == "rare z"


def test_parallel_calls_run_concurrently_with_the_context_copied():
    barrier = threading.Barrier(3, timeout=5)
    seen = []

    @function
    def worker(n: int) -> str:
        """Meets the others at a barrier: only passes if all three run at once."""
        from runtime.context import _current_runtime
        barrier.wait()
        seen.append(_current_runtime.get() is not None)
        return f"w{n}"

    @agentic_function
    def boss(runtime) -> str:
        """Fans out."""
        return runtime.exec("fan out", tools=[worker])

    provider = ScriptedProvider([{"tool_calls": [{"name": "worker", "arguments": {"n": i}} for i in range(3)]},
                                 "all done"])
    assert boss(runtime=Runtime(provider=provider)) == "all done"
    assert tool_results(provider) == ["w0", "w1", "w2"]
    assert seen == [True, True, True]


def test_async_tools_run_on_an_event_loop():
    @function
    async def fetch(n: int) -> str:
        """Async fetch."""
        await asyncio.sleep(0)
        return f"async {n}"

    _, results, _ = run([{"tool_calls": [{"name": "fetch", "arguments": {"n": 1}},
                                         {"name": "fetch", "arguments": {"n": 2}}]}, "ok"], tools=[fetch])
    assert results == ["async 1", "async 2"]


async def test_aexec_from_async_code_with_an_async_tool():
    @function
    async def fetch(n: int) -> str:
        """Async fetch."""
        return f"async {n}"

    provider = ScriptedProvider([call("fetch", n=7), "ok"])
    assert await Runtime(provider=provider).aexec("go", tools=[fetch]) == "ok"
    assert tool_results(provider) == ["async 7"]


def test_non_string_results_are_sent_as_json():
    @function
    def data() -> dict:
        """Data."""
        return {"a": [1, 2], "b": None}

    _, results, _ = run([call("data"), "ok"], tools=[data])
    assert results == ['{"a": [1, 2], "b": null}']


def test_a_budget_opened_inside_a_timeout_tool_still_reaches_the_recorder():
    from runtime import Budget

    @agentic_function(timeout=30, budget=Budget(max_llm_calls=3))
    def bounded() -> str:
        """Runs under its own budget."""
        return "done"

    class Log(Recorder):
        def __init__(self):
            self.budgets = []

        def budget_updated(self, limits, spend):
            self.budgets.append(limits["max_llm_calls"])

    log = Log()
    with use_recorder(log):
        _, results, _ = run([call("bounded"), "ok"], tools=[bounded])
    assert results == ["done"]
    assert log.budgets == [3, 3]  # the scope's start and its end, through the timeout's recorder wrapper


def test_persist_full_failing_to_save_still_returns_the_cut_result(tmp_path):
    runs = []
    not_a_directory = tmp_path / "file"
    not_a_directory.write_text("")

    @function(max_result_chars=50, persist_full=True)
    def big() -> str:
        """Big, with side effects."""
        runs.append(1)
        return "x" * 500

    _, results, _ = run([call("big"), "ok"], tools=[big], results_dir=str(not_a_directory / "results"))
    assert runs == [1]
    assert results[0].startswith("x" * 35) and "450 of 500 characters cut" in results[0]
    assert "saving the full result failed" in results[0]


def test_a_huge_error_message_is_cut_like_a_result():
    @function(max_result_chars=100)
    def noisy() -> str:
        """Fails with the whole response body in its message."""
        raise RuntimeError("<html>" + "x" * 100_000 + "</html>")

    _, results, _ = run([call("noisy"), "ok"], tools=[noisy])
    assert results[0].startswith("Error: RuntimeError: <html>xxx") and results[0].endswith("x</html>")
    assert "characters cut from the middle" in results[0] and len(results[0]) < 300


def test_an_unregistered_tool_that_requires_approval_is_not_offered_when_unattended():
    @function(requires_approval=True, register_globally=False)
    def wire_money(amount: int) -> str:
        """Send money."""
        return "sent"

    _, results, provider = run([call("wire_money", amount=5), "ok"], tools=[wire_money], unattended=True)
    assert provider.requests[0]["tools"] == []
    assert "not allowed in unattended mode" in results[0] and "requires approval" in results[0]


def test_persist_full_refuses_a_default_results_directory_someone_else_created(tmp_path, monkeypatch):
    import os
    import tempfile

    import runtime.dispatch as dispatch

    monkeypatch.delenv("OPENPROGRAM_RESULTS_DIR", raising=False)
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(tmp_path))
    monkeypatch.setattr(dispatch.os, "getuid", lambda: os.stat(tmp_path).st_uid + 1)  # we are not its owner
    squatted = tmp_path / f"openprogram-results-{dispatch.os.getuid()}"
    squatted.mkdir()

    @function(max_result_chars=50, persist_full=True)
    def big() -> str:
        """Big."""
        return "x" * 500

    _, results, _ = run([call("big"), "ok"], tools=[big])
    assert "saving the full result failed" in results[0] and "belongs to another user" in results[0]
    assert list(squatted.iterdir()) == []


def test_a_budget_breach_in_one_parallel_call_ends_the_run_only_after_its_siblings():
    breached, run_ended = threading.Event(), threading.Event()
    order = []

    @function
    def sibling() -> str:
        """Still working when the other call breaches."""
        assert breached.wait(10)
        run_ended.wait(0.5)  # a run that does not wait for its calls ends meanwhile
        order.append("sibling finished")
        return "late"

    @function
    def breaching() -> str:
        """Breaches the budget."""
        breached.set()
        raise BudgetExceeded("over", dimension="llm_calls", limit=1, observed=2, path=["breaching"])

    provider = ScriptedProvider([{"tool_calls": [{"name": "sibling"}, {"name": "breaching"}]}, "never"])
    try:
        with pytest.raises(BudgetExceeded):
            Runtime(provider=provider).exec("go", tools=[sibling, breaching])
    finally:
        order.append("run ended")
        run_ended.set()
    assert order == ["sibling finished", "run ended"]  # nothing of the run is left running after it


def test_a_reply_asking_for_many_calls_runs_them_a_bounded_number_at_a_time(monkeypatch):
    import runtime.dispatch as dispatch

    pending, peak = [], []

    def spawn(fn, *args):  # a future that runs only when waited for, so none finishes early
        from concurrent.futures import Future
        future = Future()
        pending.append((future, fn, args))
        peak.append(len(pending))
        return future

    def wait_all(futures):
        for future, fn, args in list(pending):
            future.set_result(fn(*args))
        pending.clear()

    monkeypatch.setattr(dispatch.interrupt, "spawn", spawn)
    monkeypatch.setattr(dispatch, "wait_all", wait_all)
    monkeypatch.setattr(dispatch, "MAX_PARALLEL_CALLS", 3)

    @function
    def echo(n: int) -> str:
        """Echo."""
        return f"e{n}"

    calls = {"tool_calls": [{"name": "echo", "arguments": {"n": i}} for i in range(7)]}
    _, results, _ = run([calls, "done"], tools=[echo])
    assert results == [f"e{i}" for i in range(7)]
    assert max(peak) == 3
