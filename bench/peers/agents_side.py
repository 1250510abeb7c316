"""The OpenAI Agents SDK's side of `bench/bench_peers.py`: run by the peers' venv (openai-agents==0.24.0).

The model is a fake `agents.models.interface.Model` that answers from the request it gets (no network,
no key); tracing is turned off, so nothing tries to export spans.
"""
from __future__ import annotations

import asyncio
import itertools
import json
import os
import sys

os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"
for _key in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
    os.environ.pop(_key, None)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _worker import ScriptCapReached, mean_ms, outcome, serve  # noqa: E402

from agents import Agent, Runner, function_tool, set_tracing_disabled  # noqa: E402
from agents.items import ModelResponse  # noqa: E402
from agents.models.interface import Model  # noqa: E402
from agents.usage import Usage  # noqa: E402
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText  # noqa: E402

set_tracing_disabled(True)
_ids = itertools.count()


def tool_call(name: str, arguments: dict) -> ResponseFunctionToolCall:
    n = next(_ids)
    return ResponseFunctionToolCall(id=f"fc_{n}", call_id=f"call_{n}", name=name,
                                    arguments=json.dumps(arguments), type="function_call", status="completed")


def answer(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(id=f"msg_{next(_ids)}", type="message", role="assistant", status="completed",
                                 content=[ResponseOutputText(type="output_text", text=text, annotations=[])])


def tool_results(items) -> int:
    if isinstance(items, str):
        return 0
    return sum(1 for item in items if isinstance(item, dict) and item.get("type") == "function_call_output")


class Counter:
    """Model calls made through every FakeModel sharing it; past `cap` the next call raises."""

    def __init__(self, cap=None):
        self.calls, self.cap = 0, cap

    def admit(self):
        if self.cap is not None and self.calls >= self.cap:
            raise ScriptCapReached(f"the scripted model's cap of {self.cap} calls was reached")
        self.calls += 1


class FakeModel(Model):
    """`respond(input_items, tool_names)` gives the output items of each call."""

    def __init__(self, respond, counter: Counter, delay_s: float = 0.0):
        self.respond, self.counter, self.delay_s = respond, counter, delay_s

    async def get_response(self, system_instructions, input, model_settings, tools, output_schema, handoffs,
                           tracing, *, previous_response_id=None, conversation_id=None, prompt=None):
        self.counter.admit()
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        return ModelResponse(output=self.respond(input, [t.name for t in tools]), usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError("the bench runs the SDK without streaming")


def delegate_once(items, names):
    """Each level: one tool call to the next level (the one tool it is offered), then an answer."""
    if names and not tool_results(items):
        return [tool_call(names[0], {"input": "go one level down"})]
    return [answer("answer")]


# --- 3. a four-level delegation chain A -> B -> C -> D (Agent.as_tool) ---------------------------

def chain(runs=20) -> dict:
    counter = Counter()
    model = FakeModel(delegate_once, counter)
    d = Agent(name="chain_d", instructions="Level D: answer.", model=model)
    c = Agent(name="chain_c", instructions="Level C.", model=model, tools=[d.as_tool("chain_d", "Level D.")])
    b = Agent(name="chain_b", instructions="Level B.", model=model, tools=[c.as_tool("chain_c", "Level C.")])
    a = Agent(name="chain_a", instructions="Level A.", model=model, tools=[b.as_tool("chain_b", "Level B.")])
    loop = asyncio.new_event_loop()
    answers = []
    try:
        ms = mean_ms(lambda: answers.append(loop.run_until_complete(Runner.run(a, "delegate")).final_output), runs)
    finally:
        loop.close()
    return {"ms_per_run": ms, "model_calls_per_run": counter.calls / (runs + 1), "answer": answers[-1]}


# --- 4. runaway self-delegation ------------------------------------------------------------------

def runaway_row(setting: str, cap=2000) -> dict:
    """`defaults`: an agent whose tool is itself, a model that always calls it, Runner.run() as shipped.
    `max_turns=1`: Runner.run(max_turns=1) and as_tool(max_turns=1), on seed 002's four-delegation
    script (four tool calls, then answers)."""
    counter = Counter(cap)
    if setting == "defaults":
        respond, run_kwargs, tool_kwargs = (lambda items, names: [tool_call("runaway", {"input": "handle it"})]), {}, {}
    elif setting == "max_turns=1":
        script = iter(range(4))

        def respond(items, names):
            return [tool_call("runaway", {"input": "handle it"})] if next(script, None) is not None else [answer("done")]
        run_kwargs, tool_kwargs = {"max_turns": 1}, {"max_turns": 1}
    else:
        raise ValueError(f"unknown runaway setting {setting!r}")
    agent = Agent(name="runaway", instructions="Handle the task.", model=FakeModel(respond, counter))
    agent.tools = [agent.as_tool("runaway", "Handle the task.", **tool_kwargs)]
    result = outcome(lambda: asyncio.run(Runner.run(agent, "handle it", **run_kwargs)).final_output,
                     lambda: counter.calls)
    result["cap"] = cap
    return result


# --- 5. fan-out: the nearest control is max_turns, per run -------------------------------------

@function_tool
def noop() -> str:
    """Do nothing."""
    return "ok"


def fan_out(trials=50, branches=16, max_turns=10, delay_s=0.001) -> dict:
    def orchestrate(items, names):
        if tool_results(items):
            return [answer("all branches done")]
        return [tool_call("branch", {"input": f"branch {i}"}) for i in range(branches)]

    def work(items, names):
        return [tool_call("noop", {})] if tool_results(items) < 2 else [answer("branch done")]

    admitted, receives = [], set()
    for _ in range(trials):
        counter = Counter()
        worker = Agent(name="branch", instructions="One branch.", model=FakeModel(work, counter, delay_s),
                       tools=[noop])
        top = Agent(name="orchestrator", instructions="Fan out.", model=FakeModel(orchestrate, counter, delay_s),
                    tools=[worker.as_tool("branch", "One branch.")])
        result = outcome(lambda: asyncio.run(Runner.run(top, "fan out", max_turns=max_turns)).final_output,
                         lambda: counter.calls)
        admitted.append(result["calls"])
        receives.add(result["receives"].split(":")[0])
    return {"max": max(admitted), "min": min(admitted), "trials": trials,
            "demand": 1 + branches * 3 + 1, "receives": sorted(receives)}


if __name__ == "__main__":
    serve({"chain": chain, "runaway": runaway_row, "fan_out": fan_out})
