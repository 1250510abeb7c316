"""Each example's outcome on the offline simulated model, recorded into a session as the web app runs it."""
from __future__ import annotations

import pytest

from dag.models import Node, Session
from dag.runs.lifecycle import run_session


# A run claims its session with a lease that the heartbeat thread renews on its own connection: inside
# a test's transaction it cannot see the claimed row, takes the lease for lost and stops the run.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def offline_model(monkeypatch):
    """The default model with no key configured: the simulation, whatever this machine's environment says."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "OPENPROGRAM_MODEL", "WIKI_API_TOKEN"):
        monkeypatch.delenv(name, raising=False)


def run(user, function, **args) -> tuple[Session, list[Node]]:
    session = Session.objects.create(owner=user, function=function, args=args)
    run_session(session.pk)
    session.refresh_from_db()
    return session, list(Node.objects.filter(session=session).order_by("seq"))


def code_nodes(nodes, name=None):
    return [n for n in nodes if n.kind == "code" and (name is None or n.name == name)]


def test_wiki_agent_searches_the_notes_and_does_not_call_itself(user):
    session, nodes = run(user, "wiki_agent", question="How does the recursion guard work?", mode="detailed")
    assert session.status == "completed", session.error
    assert "Recursion guard" in session.result
    assert len(code_nodes(nodes, "wiki_agent")) == 1  # it heeded the guard's prompt
    [search] = code_nodes(nodes, "search_notes")
    assert search.status == "completed" and search.output[0]["title"] == "Recursion guard"
    llm_calls = [n for n in nodes if n.kind == "llm"]
    assert llm_calls and all(n.status == "completed" for n in llm_calls)
    assert "wiki_agent" in llm_calls[0].input["tools"]  # offered, and not called: the prompt said not to


def test_research_agent_delegates_to_wiki_agent_with_its_hidden_token_defaulted(user):
    session, nodes = run(user, "research_agent", topic="the recursion guard", notes="depth ceiling\nstop button")
    assert session.status == "completed", session.error
    assert session.result["source"] == "built-in notes" and session.result["topic"] == "the recursion guard"
    [root] = code_nodes(nodes, "research_agent")
    [wiki] = code_nodes(nodes, "wiki_agent")
    assert wiki.depth == 2 and wiki.parent_id == root.pk and wiki.status == "completed"
    assert root.input["api_token"] == "<hidden>"  # a hidden parameter (a secret) is never stored
    assert "wiki_agent" in session.result["findings"]


def test_runaway_agent_is_refused_once_as_guidance_and_its_insisting_ends_the_run(user):
    session, nodes = run(user, "runaway_agent", task="Summarise the notes")
    message = "agentic function runaway_agent exceeded max nesting depth 5 — possible runaway recursion"
    assert session.status == "error" and message in session.error
    frames = code_nodes(nodes, "runaway_agent")
    assert [n.name_depth for n in frames] == [1, 2, 3, 4, 5, 6, 6]
    assert [n.status for n in frames] == ["error"] * 5 + ["refused"] * 2
    assert all(message in n.error for n in frames)
    assert len([n for n in nodes if n.kind == "llm"]) == 6  # a handful of model calls, not 20**5
    assert not [n for n in nodes if n.status == "running"]


def test_slow_count_counts_through_child_calls(user):
    session, nodes = run(user, "slow_count", n=4, delay_s=0)
    assert session.status == "completed" and session.result == 4
    steps = code_nodes(nodes, "count_step")
    assert [n.output for n in steps] == [1, 2, 3, 4] and all(n.depth == 2 for n in steps)


def test_slow_count_refuses_out_of_range_arguments_clearly(user):
    session, _ = run(user, "slow_count", n=5, delay_s=60)
    assert session.status == "error" and "argument 'delay_s' of tool 'slow_count': must be from 0 to 10, got 60" \
        in session.error


def test_example_forms_exercise_the_input_metadata(logged_in):
    wiki = logged_in.get("/functions/wiki_agent/").content.decode()
    assert '<option value="brief" selected>' in wiki and '<option value="detailed">' in wiki
    assert 'placeholder="How does the recursion guard work?"' in wiki
    research = logged_in.get("/functions/research_agent/").content.decode()
    assert '<textarea name="notes"' in research and "One thought per line" in research
    assert 'name="api_token"' not in research
    slow = logged_in.get("/functions/slow_count/").content.decode()
    assert 'type="number"' in slow and 'value="10"' in slow and 'value="0.5"' in slow


def test_every_example_documents_itself():
    # Imported here, inside the test's isolated registry: importing registers the example tools.
    from examples import functions as examples

    for tool in (examples.wiki_agent, examples.research_agent, examples.runaway_agent, examples.slow_count):
        assert tool.doc and tool.input and all(name in tool.hints for name in tool.spec["parameters"]["properties"])


def test_no_example_tells_models_about_a_parameter_hidden_from_them():
    from examples import functions as examples

    for tool in (examples.wiki_agent, examples.research_agent, examples.runaway_agent, examples.slow_count):
        hidden = [name for name, meta in tool.input.items() if meta.get("hidden")]
        assert not any(name in tool.spec["description"] for name in hidden), tool.tool_name
