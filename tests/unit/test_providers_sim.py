"""The simulated model: deterministic tool choice, arguments from the schema, heeding the prompt."""
from runtime.messages import ModelRequest, text_block
from runtime.providers.sim import SimProvider, arguments_for, best_tool, forbidden_names
from runtime.runtime import _situational_prefix

TOOLS = [
    {"name": "wiki_agent", "description": "Maintain a wiki vault: ingest, query or lint pages.",
     "parameters": {"type": "object", "properties": {"task": {"type": "string"}}, "required": ["task"]}},
    {"name": "grep_pages", "description": "Search wiki pages for a phrase.",
     "parameters": {"type": "object", "required": ["phrase", "mode", "limit", "exact"],
                    "properties": {"phrase": {"type": "string"},
                                   "mode": {"type": "string", "enum": ["fuzzy", "regex", "literal"]},
                                   "limit": {"type": "integer", "default": 20},
                                   "exact": {"type": "boolean"}}}},
    {"name": "send_email", "description": "Send an email.", "parameters": {"type": "object", "properties": {}}},
]


def request(task, situational=None, model=None, tool_results=(), tool_choice="auto", tools=TOOLS):
    blocks = ([text_block(situational, "situational")] if situational else []) + [text_block(task)]
    messages = [{"role": "user", "content": blocks}]
    if tool_results:
        messages.append({"role": "assistant", "content": "", "tool_calls": []})
        messages += [{"role": "tool", "tool_call_id": f"c{i}", "name": n, "content": c, "is_error": e}
                     for i, (n, c, e) in enumerate(tool_results)]
    return ModelRequest(system="", messages=messages, tools=list(tools), model=model, tool_choice=tool_choice)


def test_picks_the_best_matching_tool_deterministically():
    sim = SimProvider()
    first = sim.complete(request("maintain the wiki vault"))
    again = sim.complete(request("maintain the wiki vault"))
    assert [c.name for c in first.tool_calls] == ["wiki_agent"]
    assert first.tool_calls[0].arguments == {"task": "maintain the wiki vault"}
    assert first.as_dict() == again.as_dict()


def test_heeds_the_situational_prompt_unless_naive():
    prompt = _situational_prefix("wiki_agent", "Maintain a wiki vault.")
    heeding = SimProvider().complete(request("maintain the wiki vault pages", prompt))
    naive = SimProvider().complete(request("maintain the wiki vault pages", prompt, model="naive"))
    assert [c.name for c in heeding.tool_calls] == ["grep_pages"]
    assert [c.name for c in naive.tool_calls] == ["wiki_agent"]
    assert SimProvider("naive").complete(request("maintain the wiki vault", prompt)).tool_calls[0].name == "wiki_agent"


def test_every_name_on_the_call_path_is_avoided():
    prompt = _situational_prefix("grep_pages", "", ["wiki_agent", "grep_pages"])
    assert forbidden_names(prompt) == {"wiki_agent", "grep_pages"}
    reply = SimProvider().complete(request("wiki pages", prompt))
    assert reply.tool_calls == [] and reply.text.startswith("(simulated model)")


def test_arguments_follow_the_schema():
    args = arguments_for(TOOLS[1], "find the literal phrase hello")
    assert args == {"phrase": "find the literal phrase hello", "mode": "literal", "limit": 20, "exact": False}


def test_several_tools_named_in_the_task_are_called_in_parallel():
    reply = SimProvider().complete(request("run grep_pages and send_email"))
    assert [c.name for c in reply.tool_calls] == ["grep_pages", "send_email"]
    assert len({c.id for c in reply.tool_calls}) == 2


def test_answers_with_the_tool_results_and_quotes_errors_instead_of_retrying():
    ok = SimProvider().complete(request("wiki", tool_results=[("grep_pages", "3 hits", False)]))
    assert ok.tool_calls == [] and "grep_pages: 3 hits" in ok.text
    failed = SimProvider("naive").complete(
        request("wiki", tool_results=[("wiki_agent", "Error: RecursionError: too deep", True)]))
    assert failed.tool_calls == [] and "Error: RecursionError: too deep" in failed.text and "failed" in failed.text


def test_no_overlap_no_tools_or_tool_choice_none_gives_a_direct_answer():
    assert SimProvider().complete(request("bake bread")).tool_calls == []
    assert SimProvider().complete(request("wiki vault", tool_choice="none")).tool_calls == []
    assert SimProvider().complete(request("wiki vault", tools=[])).tool_calls == []


def test_tool_choice_required_or_named_forces_a_call():
    assert SimProvider().complete(request("bake bread", tool_choice="required")).tool_calls[0].name == "wiki_agent"
    assert SimProvider().complete(request("wiki vault", tool_choice="send_email")).tool_calls[0].name == "send_email"


def test_reports_usage():
    reply = SimProvider().complete(request("maintain the wiki vault"))
    assert reply.usage["input_tokens"] > 0 and reply.usage["output_tokens"] > 0


def test_best_tool_ties_go_to_the_first_listed():
    tools = [{"name": "alpha", "description": "wiki"}, {"name": "beta", "description": "wiki"}]
    assert best_tool("wiki", tools)["name"] == "alpha"
