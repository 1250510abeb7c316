"""Code written for the reference implementation runs here: its Runtime(call=...) constructor, local
redefinitions of a function name (as its tests do), and the seed's tool-policy variable set by users."""
import pytest

from runtime import Runtime, ToolRegistrationError, agentic_function, registry, tool_policy
from runtime.function import _current_tool_policy
from runtime.messages import blocks_text
from runtime.registry import Registry


def test_runtime_call_is_a_plain_function_that_plays_the_model():
    seen = []

    def my_llm(content, model="default", response_format=None):
        seen.append((blocks_text(content), model))
        return "the answer"

    @agentic_function(register_globally=False)
    def asker(question: str, runtime=None) -> str:
        """Ask."""
        return runtime.exec(content=[{"type": "text", "text": question}], tools=[])

    assert asker("why?", runtime=Runtime(call=my_llm, model="gpt-4o")) == "the answer"
    text, model = seen[0]
    assert model == "gpt-4o" and "why?" in text and "INSIDE the agentic function `asker`" in text


def test_runtime_call_may_take_the_content_alone_and_be_given_first_as_in_the_reference():
    assert Runtime(call=lambda content: f"{len(content)} block").llm("hi") == "1 block"
    seen = []
    runtime = Runtime(lambda content, model: seen.append((content, model)) or "ok", model="openai:gpt-4o",
                      system="Be brief.")
    assert runtime.llm("hi") == "ok"
    content, model = seen[0]
    assert model == "openai:gpt-4o"  # as given, like the reference
    assert content[0] == {"type": "text", "text": "Be brief.", "role": "system"}


@pytest.mark.parametrize("call, message", [
    ("not callable", "takes a function"),
    (lambda content: 42, "must return the reply text"),
])
def test_runtime_call_errors_say_what_is_expected(call, message):
    with pytest.raises(TypeError, match=message):
        Runtime(call=call).llm("hi")


def test_runtime_takes_provider_or_call_not_both():
    from runtime.providers import ScriptedProvider
    with pytest.raises(TypeError, match="not both"):
        Runtime(provider=ScriptedProvider([]), call=lambda content: "x")


def test_functions_defined_inside_functions_replace_an_earlier_registration_from_their_module():
    with registry.isolated({}):
        def first_test():
            @agentic_function
            def f():
                return 1
            return f

        def second_test():
            @agentic_function
            def f():
                return 2
            return f

        first_test()
        second = second_test()  # the reference's test file does this; it was a ToolRegistrationError
        assert registry["f"] is second


def test_a_clash_between_module_level_functions_of_different_modules_stays_an_error():
    class Fake:
        def __init__(self, module, qualname):
            def fn():
                pass
            fn.__module__, fn.__qualname__ = module, qualname
            self.fn, self.tool_name, self.origin = fn, "shared", f"{module}.{qualname}"

    names = Registry()
    names.register(Fake("pkg.one", "shared"))
    with pytest.raises(ToolRegistrationError, match="already registered by pkg.one.shared"):
        names.register(Fake("pkg.two", "shared"))
    with pytest.raises(ToolRegistrationError):  # a local function of another module may not take it
        names.register(Fake("pkg.two", "factory.<locals>.shared"))


def test_tool_policy_sets_the_seeds_variable_and_nested_blocks_only_narrow():
    with tool_policy(deny=["shell"], allow=["read", "write", "search"], source="web") as outer:
        assert _current_tool_policy.get() == outer == {"deny": ["shell"], "allow": ["read", "search", "write"],
                                                       "source": "web"}
        with tool_policy(deny=["write"], allow=["read", "shell"]):
            policy = _current_tool_policy.get()
            assert policy["deny"] == ["shell", "write"] and policy["allow"] == ["read"]
            assert policy["source"] == "web"
        assert _current_tool_policy.get() == outer
    assert _current_tool_policy.get() is None


def test_tool_policy_is_applied_to_exec():
    from runtime import function
    from runtime.providers import ScriptedProvider

    @function(register_globally=False)
    def shell() -> str:
        """Run a command."""
        return "ran"

    provider = ScriptedProvider([{"tool_calls": [{"name": "shell"}]}, "done"])
    with tool_policy(deny=["shell"]):
        Runtime(provider=provider).exec("go", tools=[shell])
    assert provider.requests[0]["tools"] == []
    result = [m for m in provider.requests[1]["messages"] if m["role"] == "tool"][0]
    assert "denied by the tool policy" in result["content"]


def test_a_local_function_does_not_take_over_a_module_level_one():
    class Fake:
        def __init__(self, qualname):
            def fn():
                pass
            fn.__module__, fn.__qualname__ = "pkg.mod", qualname
            self.fn, self.tool_name, self.origin = fn, "research", f"pkg.mod.{qualname}"

    names = Registry()
    names.register(Fake("research"))
    with pytest.raises(ToolRegistrationError):
        names.register(Fake("make_helper.<locals>.research"))


def test_a_leaf_function_refuses_agentic_only_arguments():
    from runtime import Budget, function
    for bad in ({"budget": Budget(max_depth=1)}, {"system": "You are..."}):
        with pytest.raises(ToolRegistrationError, match="is for @agentic_function"):
            function(**bad)
