"""What a model call inside a function is shown of the DAG: render_range slices, expose filtering, format."""
import pytest

from dag.models import Node
from dag.recording import context_render
from dag.recording import write_path
from dag.recording.context_render import render_frame_context
from runtime import Runtime, agentic_function, function
from runtime.providers import ScriptedProvider

from ..dag_helpers import model_call, new_session, recording, visible_context

pytestmark = pytest.mark.django_db


def run_recorded(entry, *args):
    """Call `entry(*args)` recorded into a new session; returns the session."""
    session = new_session()
    with recording(session):
        entry(*args)
    return session


def test_the_rendered_text_of_callers_and_subcalls():
    seen = []

    @agentic_function
    def lookup(key: str) -> str:
        """Look a key up."""
        model_call("find the key", "found it")
        return f"value-of-{key}"

    @agentic_function
    def summarize(topic: str, words: int = 10):
        """Summarize a topic."""
        model_call("first question", "first answer")
        lookup("k1")
        seen.append(visible_context())

    @agentic_function
    def main():
        """Entry point."""
        model_call("plan the work", "plan ok")
        summarize("cats")

    run_recorded(main)
    assert seen == [
        "Earlier in this session:\n\n"
        "Entry point.\n\nmain()\n-> (still running)\n\n"
        "[model call sim-1] plan the work\n-> plan ok\n\n"
        "So far in this call:\n\n"
        "[model call sim-1] first question\n-> first answer\n\n"
        'lookup(key="k1")\n-> value-of-k1'
    ]


def test_a_function_sees_its_own_earlier_model_exchanges_by_default():
    seen = []

    @agentic_function
    def chat():
        model_call("one", "reply one")
        model_call("two", "reply two", tool_calls=[{"name": "search", "arguments": {"q": "x"}}])
        seen.append(visible_context())

    run_recorded(chat)
    assert seen == ["So far in this call:\n\n[model call sim-1] one\n-> reply one\n\n"
                    '[model call sim-1] two\n-> reply two\n-> calls search(q="x")']


@pytest.mark.parametrize("subcalls, expected", [
    (-1, ["one", "two", "three"]),
    (2, ["two", "three"]),
    (1, ["three"]),
    (0, []),
])
def test_subcalls_keeps_the_most_recent_nodes_of_the_frame(subcalls, expected):
    seen = []

    @agentic_function(render_range={"subcalls": subcalls})
    def chat():
        for word in ("one", "two", "three"):
            model_call(f"ask {word}", word)
        seen.append(visible_context() or "")

    run_recorded(chat)
    shown = [word for word in ("one", "two", "three") if f"ask {word}" in seen[0]]
    assert shown == expected


@pytest.mark.parametrize("callers, expected", [
    (None, ["entry()", "ask alpha", "ask beta"]),
    (2, ["ask alpha", "ask beta"]),
    (1, ["ask beta"]),
    (0, []),
])
def test_callers_keeps_the_most_recent_nodes_before_the_frame(callers, expected):
    seen = []

    @agentic_function(render_range={"callers": callers, "subcalls": 0})
    def inner():
        seen.append(visible_context() or "")

    @agentic_function
    def entry():
        model_call("ask alpha", "a")
        model_call("ask beta", "b")
        inner()

    run_recorded(entry)
    shown = [marker for marker in ("entry()", "ask alpha", "ask beta") if marker in seen[0]]
    assert shown == expected
    assert "So far in this call" not in seen[0]


def test_a_full_wall_renders_nothing():
    seen = []

    @agentic_function(render_range={"callers": 0, "subcalls": 0})
    def walled():
        model_call("private", "p")
        seen.append(visible_context())

    @agentic_function
    def entry():
        model_call("public", "p")
        walled()

    run_recorded(entry)
    assert seen == [None]


def _sub_call_context(expose: str) -> str:
    """The viewer's context after calling a function with `expose`, which has an llm call and a sub-call."""
    seen = []

    @agentic_function
    def leaf(n: int) -> int:
        """Leaf doc."""
        return n + 1

    @agentic_function(expose=expose)
    def helper(x: int) -> int:
        """Helper doc."""
        model_call("helper asks", "helper hears")
        return leaf(x) * 10

    @agentic_function
    def viewer():
        helper(1)
        seen.append(visible_context() or "")

    run_recorded(viewer)
    return seen[0]


def test_expose_io_shows_call_and_result_only():
    text = _sub_call_context("io")
    assert text == "So far in this call:\n\nhelper(x=1)\n-> 20"


def test_expose_llm_shows_the_model_exchanges_only():
    text = _sub_call_context("llm")
    assert text == "So far in this call:\n\n[model call sim-1] helper asks\n-> helper hears"


def test_expose_full_shows_doc_call_result_and_everything_inside():
    text = _sub_call_context("full")
    assert text == ("So far in this call:\n\n"
                    "Helper doc.\n\nhelper(x=1)\n-> 20\n\n"
                    "[model call sim-1] helper asks\n-> helper hears\n\n"
                    "leaf(n=1)\n-> 2")


def test_expose_hidden_shows_nothing():
    assert _sub_call_context("hidden") == ""


def test_expose_applies_at_every_level_of_nesting():
    seen = []

    @agentic_function(expose="llm")
    def deepest():
        model_call("deep question", "deep answer")

    @agentic_function(expose="io")
    def sealed():
        model_call("sealed question", "sealed answer")
        deepest()
        return "sealed result"

    @agentic_function(expose="full")
    def middle():
        sealed()
        deepest()

    @agentic_function
    def viewer():
        middle()
        seen.append(visible_context())

    run_recorded(viewer)
    text = seen[0]
    assert "middle()" in text and 'sealed()\n-> sealed result' in text
    assert "sealed question" not in text  # io hides what happens inside
    assert text.count("deep question") == 1  # only the call made directly under the open `middle`
    assert "deepest()" not in text  # llm hides the call itself


def test_failed_and_refused_calls_render_their_error():
    seen = []

    @agentic_function
    def fails():
        raise ValueError("bad input")

    @agentic_function
    def viewer():
        try:
            fails()
        except ValueError:
            pass
        model_call("retry?", status="error", error=TimeoutError("slow"))
        seen.append(visible_context())

    run_recorded(viewer)
    assert seen == ["So far in this call:\n\nfails()\n-> error: ValueError: bad input\n\n"
                    "[model call sim-1] retry?\n-> error: TimeoutError: slow"]


def test_nodes_of_parallel_branches_after_the_frame_started_are_not_shown():
    session = new_session()
    root = write_path.create_node(session.id, kind="code", name="root", doc="")
    branch_a = write_path.create_node(session.id, kind="code", name="branch_a", parent_id=root.id)
    write_path.create_node(session.id, kind="code", name="branch_b", parent_id=root.id)
    write_path.create_node(session.id, kind="llm", name="llm", parent_id=branch_a.id, status="completed",
                          output={"text": "mine", "tool_calls": []})
    text = render_frame_context(session.id, branch_a.id, None, None)
    assert text == ("Earlier in this session:\n\nroot()\n-> (still running)\n\n"
                    "So far in this call:\n\n[model call]\n-> mine")


def test_values_are_cut_in_the_prompt_but_stored_whole():
    seen = []

    @agentic_function
    def big() -> str:
        return "x" * 10_000

    @agentic_function
    def viewer():
        big()
        seen.append(visible_context())

    session = run_recorded(viewer)
    assert "more chars" in seen[0] and len(seen[0]) < 3000
    assert Node.objects.get(session=session, name="big").output == "x" * 10_000


def test_a_real_tool_loop_renders_each_exchange_once_without_the_runtimes_own_blocks():
    @function
    def lookup(key: str) -> str:
        """Look a key up."""
        return f"value-of-{key}"

    @agentic_function
    def researcher(runtime: Runtime = None):
        """Research with tools."""
        runtime.exec("first task", tools=[lookup])
        runtime.llm("second task")
        runtime.llm("third task")

    provider = ScriptedProvider([{"tool_calls": [{"name": "lookup", "arguments": {"key": "k"}}]}, "done",
                                 "second answer", "third answer"])
    run_recorded(researcher, Runtime(provider=provider))

    def context_of(request):
        return [block["text"] for block in request["messages"][0]["content"] if block.get("source") == "context"]

    assert context_of(provider.requests[0]) == []  # nothing recorded before the first call
    [third] = context_of(provider.requests[3])
    assert third == ("So far in this call:\n\n"
                     '[model call scripted] first task\n-> calls lookup(key="k")\n\n'
                     'lookup(key="k")\n-> value-of-k\n\n'
                     "[model call scripted] lookup returned: value-of-k\n-> done\n\n"
                     "[model call scripted] second task\n-> second answer")
    assert "Execution context" not in third  # the situational prompt is the runtime's, not history


def test_past_the_context_limit_the_oldest_calls_are_left_out_and_counted(monkeypatch):
    # 230 characters: the notice and the titles keep 129 of them, four calls' texts fit in the rest.
    monkeypatch.setattr(context_render, "CONTEXT_LIMIT", 230)
    monkeypatch.setattr(context_render, "_CHUNK", 3)  # several reads, newest first
    text = context_after_steps(10, lambda i: f"result {i}")
    assert text.startswith("(6 earlier calls left out: the context is limited to 230 characters)")
    assert [f"step(i={i})" in text for i in range(10)] == [False] * 6 + [True] * 4
    assert len(text) <= 230  # the notice and the titles count too


@pytest.mark.parametrize("limit", [120, 200, 500, 2_000])
def test_the_whole_context_with_its_notice_and_titles_stays_within_the_limit(monkeypatch, limit):
    monkeypatch.setattr(context_render, "CONTEXT_LIMIT", limit)
    text = context_after_steps(60, lambda i: f"result {i}" * 5)
    assert "earlier calls left out" in text
    assert len(text) <= limit


def context_after_steps(count: int, result) -> str:
    """What a frame sees after `count` calls of `step(i)`, each returning `result(i)`."""
    seen = []

    @agentic_function
    def step(i: int) -> str:
        return result(i)

    @agentic_function
    def many():
        for i in range(count):
            step(i)
        seen.append(visible_context())

    run_recorded(many)
    return seen[0]


def test_expose_filters_earlier_sibling_calls_too():
    seen = []

    @agentic_function(expose="llm")
    def planner():
        model_call("make a plan", "plan: two steps")
        return "the plan"

    @agentic_function(expose="io")
    def fetcher():
        model_call("fetch quietly", "fetched")
        return "the data"

    @agentic_function(render_range={"subcalls": 0})
    def writer():
        seen.append(visible_context())

    @agentic_function
    def entry():
        planner()
        fetcher()
        writer()

    run_recorded(entry)
    assert seen == ["Earlier in this session:\n\n"
                    "entry()\n-> (still running)\n\n"
                    "[model call sim-1] make a plan\n-> plan: two steps\n\n"
                    "fetcher()\n-> the data"]
