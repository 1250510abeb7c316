"""@agentic_function / @function: forms, sync and async, methods, options and their checks, registry."""
import asyncio

import pytest

from runtime import ToolRegistrationError, agentic_function, function, registry
from runtime.function import AsyncTool, Tool
from runtime.options import DEFAULT_HEAD_RATIO, DEFAULT_MAX_RESULT_CHARS, ToolOptions


def test_bare_form_wraps_and_registers():
    @agentic_function
    def summarize(text: str) -> str:
        """Summarize text."""
        return text[:3]

    assert isinstance(summarize, Tool) and summarize.agentic
    assert summarize("abcdef") == "abc"
    assert summarize.__name__ == "summarize" and summarize.__doc__ == "Summarize text."
    assert registry.get("summarize") is summarize


def test_parameterized_form_stores_agentic_parameters():
    @agentic_function(expose="full", render_range={"callers": 3, "subcalls": 0}, system="Be brief.",
                      input={"text": {"description": "What to read", "multiline": True}})
    def read(text: str) -> str:
        return text

    assert read.expose == "full"
    assert read.render_range == {"callers": 3, "subcalls": 0}
    assert read.system == "Be brief."
    assert read.input == {"text": {"description": "What to read", "multiline": True}}


def test_defaults_match_the_documented_ones():
    @agentic_function
    def f():
        pass

    assert f.expose == "io" and f.render_range is None and f.input == {} and f.system is None
    options = f.options
    assert options == ToolOptions()
    assert options.as_tool is True and options.name is None and options.description is None
    assert options.parameters is None and options.label is None and options.toolset == ()
    assert options.unsafe_in == () and options.check_fn is None and options.requires_env == ()
    assert options.can_use is None and options.max_result_chars == DEFAULT_MAX_RESULT_CHARS == 30_000
    assert options.persist_full is False and options.head_ratio == DEFAULT_HEAD_RATIO == 0.7
    assert options.requires_approval is None and options.cache is False and options.cache_ttl == 300.0
    assert options.timeout is None and options.available_if is None and options.defer is False
    assert options.register_globally is True


def test_every_tool_registration_parameter_is_stored():
    def check(**kwargs):
        return True

    given = dict(name="lookup_notes", description="Look up notes.", label="Lookup",
                 toolset=("notes", "read"), unsafe_in=("email",), check_fn=check,
                 requires_env=("NOTES_DIR",), can_use=check, max_result_chars=500, persist_full=True,
                 head_ratio=0.5, requires_approval=True, cache=True, cache_ttl=10.0, timeout=2.5,
                 available_if=lambda: True, defer=True, register_globally=True, as_tool=True,
                 parameters={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]})

    @function(**given)
    def lookup(q):
        return q

    for key, value in given.items():
        assert getattr(lookup.options, key) == value, key
    assert lookup.tool_name == "lookup_notes" and registry.get("lookup_notes") is lookup
    assert lookup.spec["description"] == "Look up notes."
    assert lookup.spec["parameters"] == given["parameters"]
    assert lookup.label == "Lookup"


@pytest.mark.parametrize("kwargs, message", [
    ({"expose": "everything"}, "expose must be one of 'io', 'llm', 'full', 'hidden'"),
    ({"render_range": {"callers": -1}}, "render_range"),
    ({"render_range": {"subcalls": -2}}, "render_range"),
    ({"render_range": {"before": 1}}, "unknown key"),
    ({"render_range": [1, 2]}, "render_range must be a dict"),
    ({"input": {"nope": {"description": "x"}}}, "input['nope'] names no parameter"),
    ({"input": {"text": {"colour": "red"}}}, "unknown key(s) colour"),
    ({"input": {"text": {"hidden": True}}}, "hidden but the parameter has no default"),
    ({"input": {"text": {"options": []}}}, "non-empty list"),
    ({"max_result_chars": 0}, "max_result_chars must be a positive integer"),
    ({"head_ratio": 1.5}, "head_ratio must be a number from 0 to 1"),
    ({"timeout": -1}, "timeout must be a positive number"),
    ({"timeout": float("inf")}, "timeout must be a positive number"),  # a wait with no end overflows
    ({"cache_ttl": float("nan")}, "cache_ttl must be a positive number"),  # would never expire
    ({"timeout": 10**400}, "timeout must be a positive number of seconds, got 1000"),  # no float holds it
    ({"name": "工具"}, "name must be 1 to 64 ASCII letters"),
    ({"name": "n" * 65}, "name must be 1 to 64 ASCII letters"),
    ({"toolset": [1]}, "toolset must be a tuple of names"),
    ({"check_fn": "yes"}, "check_fn must be a callable"),
    ({"name": "has space"}, "name must be 1 to 64 ASCII letters"),
    ({"budget": {"max_depth": 2}}, "budget must be a runtime.Budget(...) or None"),
    ({"system": ["not", "text"]}, "system must be a string"),
])
def test_bad_decorator_arguments_fail_at_decoration_naming_the_field(kwargs, message):
    with pytest.raises(ValueError, match=None) as info:
        @agentic_function(**kwargs)
        def f(text: str):
            return text
    assert message in str(info.value)


def test_unknown_decorator_argument_lists_the_allowed_ones():
    with pytest.raises(TypeError, match="unknown decorator argument.*exposes.*allowed: expose"):
        @agentic_function(exposes="io")
        def f():
            pass


def test_options_outside_allowed_values_coerce_to_parameter_type_or_fail():
    @agentic_function(input={"n": {"options": ["1", "2"]}})
    def f(n: int = 1):
        return n

    assert f.spec["parameters"]["properties"]["n"]["enum"] == [1, 2]
    with pytest.raises(ValueError, match="option 'many' is not a valid int"):
        @agentic_function(input={"n": {"options": ["many"]}})
        def g(n: int = 1):
            return n


def test_available_if_falsy_or_raising_returns_the_plain_function():
    def plain():
        return 1

    assert agentic_function(available_if=lambda: False)(plain) is plain

    def broken():
        raise RuntimeError("cannot tell")

    assert function(available_if=broken)(plain) is plain
    assert "plain" not in registry


def test_as_tool_false_and_register_globally_false_stay_out_of_registry():
    @agentic_function(as_tool=False)
    def direct_only():
        return 1

    @agentic_function(register_globally=False)
    def private():
        return 2

    assert direct_only() == 1 and private() == 2
    assert "direct_only" not in registry and "private" not in registry
    assert private.spec["name"] == "private"


def test_name_clash_between_functions_of_different_modules_is_an_error():
    def one():
        pass

    def two():
        pass

    one.__module__, two.__module__ = "pkg.first", "pkg.second"
    function(name="shared")(one)
    with pytest.raises(ToolRegistrationError, match="'shared' is already registered by pkg.first.*one"):
        function(name="shared")(two)


def test_redecorating_the_same_function_replaces_it():
    def make():
        @function
        def again():
            return 1
        return again

    first, second = make(), make()
    assert registry.get("again") is second and first is not second


def test_registry_lookup_listing_toolsets_and_unregister():
    @function(toolset=("notes",))
    def search_notes(q: str):
        return q

    @function
    def unrelated():
        pass

    assert registry["search_notes"] is search_notes
    assert search_notes in registry.all() and unrelated in registry.all()
    assert registry.toolset("notes") == [search_notes]
    assert set(registry.toolset("full")) == set(registry.all())
    assert registry.toolset("none") == []
    registry.unregister("search_notes")
    assert registry.get("search_notes") is None
    registry.unregister("search_notes")  # absent: silent
    with pytest.raises(KeyError, match="no tool named 'search_notes'"):
        registry["search_notes"]


def test_async_functions_are_wrapped_and_awaited():
    @agentic_function
    async def fetch(x: int) -> int:
        await asyncio.sleep(0)
        return x * 2

    assert isinstance(fetch, AsyncTool) and fetch.is_async
    assert asyncio.run(fetch(21)) == 42
    assert asyncio.run(fetch.execute(x=2)) == 4


def test_methods_bind_to_their_instance_and_hide_self_from_the_spec():
    class Librarian:
        def __init__(self, shelf):
            self.shelf = shelf

        @agentic_function
        def find(self, title: str) -> bool:
            """Is the title on the shelf?"""
            return title in self.shelf

    lib = Librarian(["Dune"])
    assert lib.find("Dune") is True
    assert lib.find.execute(title="Emma") is False
    assert list(lib.find.spec["parameters"]["properties"]) == ["title"]
    assert Librarian.find.is_method
    assert "find" not in registry  # a method needs an instance: not a global tool


def test_function_decorator_makes_a_leaf_tool_without_guard():
    from runtime.function import _recursion_depth

    @function
    def leaf(x: int) -> int:
        return dict(_recursion_depth.get())

    assert not leaf.agentic
    assert leaf(1) == {}  # no per-name depth counted for a leaf tool


def test_a_tool_registered_while_a_toolset_is_being_listed_does_not_break_the_listing():
    from runtime.options import ToolOptions

    class Stub:
        def __init__(self, name, on_options=None):
            self.tool_name, self.origin, self._on_options = name, f"tests.{name}", on_options

        @property
        def options(self):
            if self._on_options:
                self._on_options()  # as another thread importing a module of tools would, mid-listing
            return ToolOptions(toolset=("x",))

    late = Stub("late")
    with registry.isolated({}):
        registry.register(Stub("early", on_options=lambda: registry.register(late)))
        assert [t.tool_name for t in registry.toolset("x")] == ["early"]
        assert registry.get("late") is late


@pytest.mark.parametrize("decorator", [agentic_function, function])
def test_generator_functions_are_refused_at_decoration(decorator):
    # Calling one would only create the generator, and its body would run after the frame closed:
    # outside the guard, the budgets and the record.
    with pytest.raises(ToolRegistrationError, match="stream is a generator function.*rather than yield"):
        @decorator(register_globally=False)
        def stream(n: int):
            yield n
    with pytest.raises(ToolRegistrationError, match="astream is a generator function"):
        @decorator(register_globally=False)
        async def astream(n: int):
            yield n


def test_a_function_whose_own_name_no_model_api_takes_needs_a_name_to_be_a_tool():
    # Offered under its Python name, it would make the provider refuse every request that lists it.
    def summarize_the_quarterly_report_for_the_board_with_every_detail_it_has():
        return 1

    long_one = summarize_the_quarterly_report_for_the_board_with_every_detail_it_has  # 70 characters
    with pytest.raises(ToolRegistrationError, match=f"its tool name '{long_one.__name__}' is not 1 to 64 ASCII"):
        function(register_globally=False)(long_one)
    with pytest.raises(ToolRegistrationError, match="its tool name '<lambda>'"):
        agentic_function(register_globally=False)(lambda: 1)
    assert function(register_globally=False, name="summarize")(long_one).tool_name == "summarize"
    assert function(register_globally=False, as_tool=False)(lambda: 1)() == 1  # never offered: any name
