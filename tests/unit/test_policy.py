"""Which tools an exec offers: toolsets, allow/deny, the tool policy, unattended mode, availability."""
import pytest

from runtime import agentic_function, function
from runtime.function import _current_tool_policy
from runtime.providers import ScriptedProvider
from runtime.runtime import DEFAULT_TOOLSET, Runtime


@pytest.fixture
def tools():
    @function(toolset=("files",))
    def read_file(path: str) -> str:
        """Read a file."""
        return "contents"

    @function(toolset=("files", "write"))
    def write_file(path: str, text: str) -> str:
        """Write a file."""
        return "ok"

    @function(toolset=("web",))
    def search(q: str) -> str:
        """Search the web."""
        return "results"

    return read_file, write_file, search


def offered(runtime_options=None, **exec_options):
    provider = ScriptedProvider(["done"])
    Runtime(provider=provider, **(runtime_options or {})).exec("task", **exec_options)
    return provider.requests[0]["tools"]


def test_default_toolset_is_full(tools):
    assert DEFAULT_TOOLSET == "full"
    assert offered() == ["read_file", "write_file", "search"]


def test_bare_exec_offers_the_running_agentic_function_itself(tools):
    provider = ScriptedProvider(["done"])

    @agentic_function
    def wiki_agent(task: str, runtime) -> str:
        """Maintain a wiki."""
        assert "wiki_agent" not in (_current_tool_policy.get() or {}).get("deny", ())
        return runtime.exec(task)

    wiki_agent("x", runtime=Runtime(provider=provider))
    assert "wiki_agent" in provider.requests[0]["tools"]


def test_named_toolsets_come_from_each_tools_toolset(tools):
    assert offered(toolset="files") == ["read_file", "write_file"]
    assert offered(toolset=["write", "web"]) == ["write_file", "search"]
    assert offered(toolset="none") == []
    with pytest.raises(ValueError, match="toolset 'fils': no registered tool is in it; "
                                         "the toolsets are full, none, files, web, write"):
        offered(toolset="fils")  # a misspelt toolset is named, not an exec with no tools
    with pytest.raises(TypeError, match="toolset= takes a toolset name or a list of them, got 3"):
        offered(toolset=3)


def test_an_empty_toolset_beside_ones_with_tools_is_left_alone(tools):
    # An optional plugin's toolset may have no tool installed: the others are still offered.
    assert offered(toolset=["files", "plugins"]) == ["read_file", "write_file"]


def test_one_tool_given_alone_is_offered_as_one(tools):
    _, _, search = tools
    assert offered(tools="write_file") == ["write_file"]  # not the letters of its name
    assert offered(tools=search) == ["search"]
    with pytest.raises(TypeError, match="tools= takes a list of decorated functions or registered tool names, got 7"):
        offered(tools=7)


def test_tools_passes_exactly_those(tools):
    read_file, _, search = tools
    assert offered(tools=[search, read_file]) == ["search", "read_file"]
    assert offered(tools=["write_file"]) == ["write_file"]
    with pytest.raises(KeyError, match="no tool named 'nope'"):
        offered(tools=["nope"])


def test_allow_and_deny(tools):
    assert offered(tools_allow=["search", "read_file"]) == ["read_file", "search"]
    assert offered(tools_deny=["search"]) == ["read_file", "write_file"]
    assert offered(toolset="files", tools_allow=["read_file", "search"]) == ["read_file"]


def test_the_tool_policy_context_applies_and_merges_with_exec_arguments(tools):
    token = _current_tool_policy.set({"deny": ["write_file"], "allow": ["read_file", "write_file", "search"],
                                      "toolset": "files"})
    try:
        assert offered() == ["read_file"]
        assert offered(toolset="web") == ["search"]
        assert offered(toolset="full", tools_allow=["search", "write_file"]) == ["search"]
    finally:
        _current_tool_policy.reset(token)


def test_unattended_deny_list(tools):
    assert offered(runtime_options={"unattended": True, "unattended_deny": ["search"]}) == ["read_file", "write_file"]
    assert offered(runtime_options={"unattended": False, "unattended_deny": ["search"]}) == \
        ["read_file", "write_file", "search"]


def test_unattended_deny_list_from_the_environment(tools, monkeypatch):
    monkeypatch.setenv("OPENPROGRAM_UNATTENDED_DENY", "search, write_file")
    monkeypatch.setenv("OPENPROGRAM_UNATTENDED", "1")
    assert offered() == ["read_file"]
    monkeypatch.setenv("OPENPROGRAM_UNATTENDED", "0")
    assert offered() == ["read_file", "write_file", "search"]


def test_requires_env_can_use_and_unsafe_in_hide_tools(monkeypatch):
    monkeypatch.delenv("FAKE_SERVICE_TOKEN", raising=False)
    usable = [False]

    @function(requires_env=("FAKE_SERVICE_TOKEN",))
    def service() -> str:
        """Needs a token."""
        return "s"

    @function(can_use=lambda: usable[0])
    def gadget() -> str:
        """Sometimes usable."""
        return "g"

    @function(unsafe_in=("web",))
    def shell(cmd: str) -> str:
        """Run a shell command."""
        return "sh"

    assert offered() == ["shell"]
    assert offered(runtime_options={"source": "web"}) == []
    monkeypatch.setenv("FAKE_SERVICE_TOKEN", "t")
    usable[0] = True
    assert offered() == ["service", "gadget", "shell"]
    token = _current_tool_policy.set({"source": "web"})
    try:
        assert offered() == ["service", "gadget"]
    finally:
        _current_tool_policy.reset(token)


def test_a_forced_call_to_a_denied_tool_gets_a_clear_refusal(tools):
    ran = []

    @function
    def secret() -> str:
        """Secret."""
        ran.append(1)
        return "s"

    provider = ScriptedProvider([{"tool_calls": [{"name": "secret"}, {"name": "ghost"}]}, "ok"])
    Runtime(provider=provider).exec("task", tools_deny=["secret"])
    results = [m["content"] for m in provider.requests[1]["messages"] if m["role"] == "tool"]
    assert ran == []
    assert results[0] == "Refused: tool 'secret' is not available here: denied by tools_deny"
    assert results[1].startswith("Refused: there is no tool named 'ghost'") and "read_file" in results[1]


def test_tool_choice_naming_a_tool_not_offered_is_an_error(tools):
    with pytest.raises(ValueError, match="tool_choice='search' forces a tool this exec does not offer"):
        Runtime(provider=ScriptedProvider(["x"])).exec("t", toolset="files", tool_choice="search")


def test_a_forced_tool_choice_is_sent_once(tools):
    provider = ScriptedProvider([{"tool_calls": [{"name": "search", "arguments": {"q": "a"}}]}, "ok"])
    captured = []
    original = provider.complete

    def spy(request, check=None):
        captured.append(request.tool_choice)
        return original(request, check)

    provider.complete = spy
    Runtime(provider=provider).exec("t", tool_choice="search")
    assert captured == ["search", "auto"]


def test_calling_a_registered_tool_outside_the_chosen_toolset_says_so(tools):
    provider = ScriptedProvider([{"tool_calls": [{"name": "search", "arguments": {"q": "x"}}]}, "ok"])
    Runtime(provider=provider).exec("task", toolset="files")
    result = [m["content"] for m in provider.requests[1]["messages"] if m["role"] == "tool"][0]
    assert result == "Refused: tool 'search' is not available here: not in this call's tools or toolset"
