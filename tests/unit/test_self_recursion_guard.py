"""The recursion guard of seed 000: situational prompt text, no self-deny, and the per-name depth ceiling.

The first eight tests are the seed's contracts, named as in its table; the rest cover what the issue
adds (async, `name=`, exact message, threads).
"""
import asyncio
import threading

import pytest

from runtime import agentic_function, function
from runtime.function import _MAX_AGENTIC_RECURSION_DEPTH, _current_tool_policy, _recursion_depth
from runtime.runtime import _situational_prefix

LIMIT = _MAX_AGENTIC_RECURSION_DEPTH


def _deny():
    return (_current_tool_policy.get(None) or {}).get("deny") or []


def _depth(name):
    return (_recursion_depth.get(None) or {}).get(name, 0)


def _self_caller(name="self_caller", on_entry=None):
    """An agentic function that, like a model ignoring the guidance, calls itself with no end."""
    entries = []

    @agentic_function(name=name)
    def self_caller():
        entries.append(_depth(name))
        if on_entry is not None:
            on_entry()
        return self_caller()

    return self_caller, entries


# --- the eight contracts of seed 000 ------------------------------------------------------------------

def test_situational_prefix_warns_against_self_call():
    doc = "Maintain a wiki vault — route to ingest, query or lint."
    text = _situational_prefix("wiki_agent", doc)
    assert "wiki_agent" in text
    assert "do NOT call it" in text
    assert "recursion" in text
    assert text.endswith("This function's job: " + doc)
    assert text.index("recursion") < text.index(doc)


def test_situational_prefix_handles_empty_doc():
    for doc in ("", "   \n\t"):
        text = _situational_prefix("wiki_agent", doc)
        assert "This function's job" not in text
        assert "wiki_agent" in text


def test_self_name_NOT_denied_during_call():
    seen = {}

    @agentic_function
    def wiki_agent():
        seen["deny"] = list(_deny())

    wiki_agent()
    assert "wiki_agent" not in seen["deny"]

    # A caller's own deny list passes through untouched: the wrapper neither adds to it nor drops it.
    token = _current_tool_policy.set({"deny": ["shell"]})
    try:
        wiki_agent()
    finally:
        _current_tool_policy.reset(token)
    assert seen["deny"] == ["shell"]


def test_depth_increments_during_call():
    seen = {}

    @agentic_function
    def research_agent():
        seen["depth"] = _depth("research_agent")

    assert _depth("research_agent") == 0
    research_agent()
    assert seen["depth"] == 1


def test_depth_backstop_raises_past_limit():
    self_caller, entries = _self_caller()
    with pytest.raises(RecursionError) as caught:
        self_caller()
    assert len(entries) == LIMIT == 5
    assert entries == [1, 2, 3, 4, 5]
    assert "self_caller" in str(caught.value)
    assert "5" in str(caught.value)


def test_distinct_subcalls_not_collateral_damage():
    seen = {}

    @agentic_function
    def inner(level):
        seen.setdefault("inner", []).append((_depth("inner"), _depth("outer")))
        if level < LIMIT:
            inner(level + 1)

    @agentic_function
    def outer(level):
        seen.setdefault("outer", []).append(_depth("outer"))
        if level < LIMIT:
            outer(level + 1)
        else:
            inner(1)  # the full five levels of `inner`, at the bottom of five levels of `outer`

    outer(1)
    assert seen["outer"] == [1, 2, 3, 4, 5]
    assert seen["inner"] == [(1, 5), (2, 5), (3, 5), (4, 5), (5, 5)]


def test_depth_restored_after_return():
    seen = {}

    @agentic_function
    def child():
        seen["child"] = _depth("child")

    @agentic_function
    def parent():
        child()
        seen["after_child"] = _depth("child")
        seen["parent"] = _depth("parent")

    before = _recursion_depth.get()
    parent()
    assert seen == {"child": 1, "after_child": 0, "parent": 1}
    assert _recursion_depth.get() is before
    assert _depth("parent") == 0


def test_depth_restored_after_exception():
    @agentic_function
    def failing():
        raise ValueError("boom")

    before = _recursion_depth.get()
    with pytest.raises(ValueError):
        failing()
    assert _recursion_depth.get() is before
    assert _depth("failing") == 0

    # After the backstop fires five levels deep, every level is unwound too.
    self_caller, _ = _self_caller()
    with pytest.raises(RecursionError):
        self_caller()
    assert _depth("self_caller") == 0


# --- beyond the seed ------------------------------------------------------------------------------------

def test_depth_counter_is_a_contextvar_defaulting_to_none():
    assert _recursion_depth.get() is None
    assert _MAX_AGENTIC_RECURSION_DEPTH == 5


def test_recursion_error_text_is_exact():
    self_caller, _ = _self_caller("wiki_agent")
    with pytest.raises(RecursionError) as caught:
        self_caller()
    assert str(caught.value) == (
        "agentic function wiki_agent exceeded max nesting depth 5 — possible runaway recursion")


async def test_async_recursion_stops_at_the_ceiling():
    entries = []

    @agentic_function
    async def async_agent():
        entries.append(_depth("async_agent"))
        await asyncio.sleep(0)
        return await async_agent()

    with pytest.raises(RecursionError) as caught:
        await async_agent()
    assert entries == [1, 2, 3, 4, 5]
    assert str(caught.value) == (
        "agentic function async_agent exceeded max nesting depth 5 — possible runaway recursion")
    assert _depth("async_agent") == 0


async def test_async_depth_restored_after_return_and_exception():
    @agentic_function
    async def async_child(fail):
        assert _depth("async_child") == 1
        if fail:
            raise KeyError("x")
        return "ok"

    assert await async_child(False) == "ok"
    with pytest.raises(KeyError):
        await async_child(True)
    assert _recursion_depth.get() is None


def test_name_override_counts_under_the_registered_name():
    seen = []

    @agentic_function(name="wiki")
    def implementation():
        seen.append((_depth("wiki"), _depth("implementation")))
        implementation()

    with pytest.raises(RecursionError) as caught:
        implementation()
    assert seen == [(1, 0), (2, 0), (3, 0), (4, 0), (5, 0)]
    assert str(caught.value).startswith("agentic function wiki exceeded")


def test_two_names_recursing_alternately_each_count_their_own_depth():
    # The seed's documented limitation: an A→B→A→B cycle advances both names, one step each per pair,
    # so it takes ten frames before `a` hits its own ceiling.
    frames = []

    @agentic_function
    def a():
        frames.append(("a", _depth("a"), _depth("b")))
        b()

    @agentic_function
    def b():
        frames.append(("b", _depth("a"), _depth("b")))
        a()

    with pytest.raises(RecursionError) as caught:
        a()
    assert len(frames) == 2 * LIMIT
    assert frames[-1] == ("b", 5, 5)
    assert "function a exceeded" in str(caught.value)


def test_plain_functions_are_not_counted():
    seen = []

    @function
    def leaf(level):
        seen.append(_depth("leaf"))
        if level < LIMIT + 3:
            leaf(level + 1)

    leaf(1)
    assert seen == [0] * (LIMIT + 3)


def test_each_thread_has_its_own_depth():
    # Both threads hold five open frames at the same moment; neither sees the other's.
    at_bottom = threading.Barrier(2, timeout=10)
    results = {}

    @agentic_function
    def descend(label, level):
        if level == LIMIT:
            at_bottom.wait()
            results[label] = _depth("descend")
            try:
                descend(label, level + 1)
            except RecursionError:
                results[label + " refused"] = True
            return
        descend(label, level + 1)

    threads = [threading.Thread(target=descend, args=(label, 1)) for label in ("one", "two")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert results == {"one": 5, "two": 5, "one refused": True, "two refused": True}
    assert _depth("descend") == 0


async def test_parallel_tasks_each_carry_their_own_depth():
    seen = []

    @agentic_function
    async def worker(level):
        seen.append(_depth("worker"))
        if level < 3:
            await worker(level + 1)

    @agentic_function
    async def fan_out():
        await asyncio.gather(*(worker(1) for _ in range(4)))

    await fan_out()
    assert sorted(seen) == [1] * 4 + [2] * 4 + [3] * 4


def test_the_public_ceiling_follows_the_guard_constant(monkeypatch):
    import runtime
    import runtime.function as guard

    assert runtime.max_recursion_depth() == _MAX_AGENTIC_RECURSION_DEPTH == 5
    monkeypatch.setattr(guard, "_MAX_AGENTIC_RECURSION_DEPTH", 3)
    assert runtime.max_recursion_depth() == 3
