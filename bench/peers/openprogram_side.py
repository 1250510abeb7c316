"""openprogram 0.5.0's side of `bench/bench_peers.py`: run by the peers' venv.

openprogram runs `Runtime.exec(tools=...)` through its agent loop (`AgentSession`) against a model from
its provider registry, so the scripted model is an API provider registered under its own API name
(`register_api_provider`) and a `Model` naming it, set as the runtime's `api_model`. (`Runtime(call=fn)`
takes text in and text out, with no tool calls, so it cannot drive a delegation.) Tools handed to
`exec(tools=[...])` reach the model only when their names are on openprogram's exposure whitelist,
`TOOLSETS["full"]["tools"]`, so the bench's functions are added to it. Its state directory (session
store, memory) is a scratch HOME, removed at exit.
"""
from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
import uuid

SCRATCH = tempfile.TemporaryDirectory(prefix="bench-peers-openprogram-")
os.environ["HOME"] = SCRATCH.name
# One attempt per exec: no row's model fails before the runaway's cap, and past the cap each level's
# exec would otherwise retry with backoff sleeps (1.5 s doubling, 6 attempts) while the run unwinds.
os.environ["OPENPROGRAM_MAX_RETRIES"] = "1"
for _key in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY"):
    os.environ.pop(_key, None)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _worker import ScriptCapReached, mean_ms, outcome, per_call_us, serve  # noqa: E402

from openprogram.agentic_programming import Runtime, agentic_function  # noqa: E402
from openprogram.agentic_programming.function import CancelledError  # noqa: E402
from openprogram.functions import TOOLSETS  # noqa: E402
from openprogram.providers.api_registry import register_api_provider  # noqa: E402
from openprogram.providers.types import (AssistantMessage, EventDone, Model, TextContent, ToolCall,  # noqa: E402
                                         Usage)



class CapReached(ScriptCapReached, CancelledError):
    """The cap, raised as openprogram's own stop (its CancelledError): its agent loop ends a run cleanly
    on that, while any other BaseException dies in an unretrieved task and leaves exec() waiting forever."""


API = "bench-scripted"
MODEL = Model(id="scripted", name="scripted", api=API, provider="bench", base_url="")


class Responder:
    """The scripted model: `respond(context, n)` gives (content, stop reason); past `cap` it raises."""

    def __init__(self):
        self.respond, self.cap, self.delay_s, self.calls = None, None, 0.0, 0
        self._lock = threading.Lock()

    def script(self, respond, cap=None, delay_s=0.0):
        with self._lock:
            self.respond, self.cap, self.delay_s, self.calls = respond, cap, delay_s, 0

    async def _reply(self, model, context, options):
        with self._lock:
            if self.cap is not None and self.calls >= self.cap:
                raise CapReached(f"the scripted model's cap of {self.cap} calls was reached")
            self.calls += 1
            n = self.calls
        if self.delay_s:
            time.sleep(self.delay_s)  # each exec runs its own event loop in its own thread
        content, reason = self.respond(context, n)
        message = AssistantMessage(content=content, api=model.api, provider=model.provider, model=model.id,
                                   usage=Usage(), stop_reason=reason, timestamp=int(time.time() * 1000))
        yield EventDone(reason=reason, message=message)

    def stream(self, model, context, options=None):
        return self._reply(model, context, options)

    stream_simple = stream


MODEL_SCRIPT = Responder()
register_api_provider(API, MODEL_SCRIPT, source_id="bench")


def new_runtime() -> Runtime:
    runtime = Runtime(model="scripted")
    runtime.api_model = MODEL
    return runtime


def tool_results(context) -> int:
    return sum(1 for m in context.messages if getattr(m, "role", "") == "toolResult")


def call(name, n, **arguments):
    return [ToolCall(id=f"call_{n}_{name}", name=name, arguments=arguments)], "toolUse"


def text(value):
    return [TextContent(text=value)], "stop"


def ask(task: str):
    return [{"type": "text", "text": task}]


# --- 1. the standalone wrapper --------------------------------------------------------------------

def plain(x):
    return x


@agentic_function(register_globally=False)
def agentic(x):
    return x


def wrapper(number=10_000, repeat=3) -> dict:
    return {"plain_us": per_call_us(lambda: plain(1), number, repeat),
            "agentic_us": per_call_us(lambda: agentic(1), number, repeat)}


# --- 2. a recorded call: the git-backed session store ---------------------------------------------

@agentic_function(register_globally=False)
def leaf(i: int, note: str = "a short argument") -> dict:
    """A leaf call: what a tool call inside a run looks like."""
    return {"i": i, "ok": True}


_stores = {}


def recorded(calls=300) -> dict:
    """Entry and exit of each call written by openprogram's own path: the `_store` ContextVar holding a
    GraphStoreShim over a SessionStore (what its dispatcher installs for a turn), a fresh session each
    round."""
    from openprogram.store import GraphStoreShim, SessionStore, _store
    store = _stores.setdefault("store", SessionStore(os.path.join(SCRATCH.name, "sessions")))
    session_id = f"bench-{uuid.uuid4().hex[:12]}"
    store.create_session(session_id, "bench")
    token = _store.set(GraphStoreShim(store, session_id))
    try:
        leaf(-1)
        started = time.perf_counter()
        for i in range(calls):
            leaf(i)
        elapsed = time.perf_counter() - started
    finally:
        _store.reset(token)
    written = len(store.get_nodes(session_id))
    if written < calls:
        raise RuntimeError(f"the session store holds {written} nodes after {calls} recorded calls")
    return {"ms_per_call": elapsed / calls * 1e3}


# --- 3. a four-level delegation chain -------------------------------------------------------------

@agentic_function(register_globally=False)
def chain_d(task: str, runtime=None) -> str:
    """Level D: answers."""
    # Not `tools=[]`: an empty list leaves the caller's tools in force (exec only sets its tools
    # ContextVar for a non-empty list), so D would be offered itself; an empty allow-list offers none.
    return runtime.exec(content=ask(task), tools_allow=[])


@agentic_function(register_globally=False)
def chain_c(task: str, runtime=None) -> str:
    """Level C: delegates to D."""
    return runtime.exec(content=ask(task), tools=[chain_d])


@agentic_function(register_globally=False)
def chain_b(task: str, runtime=None) -> str:
    """Level B: delegates to C."""
    return runtime.exec(content=ask(task), tools=[chain_c])


@agentic_function(register_globally=False)
def chain_a(task: str, runtime=None) -> str:
    """Level A: delegates to B."""
    return runtime.exec(content=ask(task), tools=[chain_b])


def delegate_once(context, n):
    names = [t.name for t in (context.tools or [])]
    if names and not tool_results(context):
        return call(names[0], n, task="go one level down")
    return text(f"answer {n}")


def chain(runs=20) -> dict:
    MODEL_SCRIPT.script(delegate_once)
    runtime = new_runtime()
    answers = []
    ms = mean_ms(lambda: answers.append(chain_a("delegate", runtime=runtime)), runs)
    return {"ms_per_run": ms, "model_calls_per_run": MODEL_SCRIPT.calls / (runs + 1), "answer": answers[-1]}


# --- 4. runaway self-delegation -------------------------------------------------------------------

@agentic_function(register_globally=False)
def runaway(task: str, runtime=None) -> str:
    """Handle the task (the model keeps handing it back to this very function)."""
    return runtime.exec(content=ask(task), tools=[runaway])  # tools are opt-in here: it offers itself


def runaway_row(setting: str = "defaults", cap=2000) -> dict:
    if setting != "defaults":
        raise ValueError(f"unknown runaway setting {setting!r}")
    MODEL_SCRIPT.script(lambda context, n: call("runaway", n, task="handle it"), cap=cap)
    result = outcome(lambda: runaway("handle it", runtime=new_runtime()), lambda: MODEL_SCRIPT.calls)
    result["cap"] = cap
    return result


# --- 5. fan-out: no budget; nothing spans nested execs --------------------------------------------

@agentic_function(register_globally=False)
def noop() -> str:
    """Do nothing."""
    return "ok"


@agentic_function(register_globally=False)
def branch(i: int, runtime=None) -> str:
    """One branch: two tool calls, then an answer (three model calls)."""
    return runtime.exec(content=ask(f"branch {i}"), tools=[noop])


@agentic_function(register_globally=False)
def orchestrator(runtime=None) -> str:
    """Fan out to the branches (from inside a function, so they inherit its runtime)."""
    return runtime.exec(content=ask("fan out"), tools=[branch])


def fan_out(trials=50, branches=16, delay_s=0.001) -> dict:
    def respond(context, n):
        names = [t.name for t in (context.tools or [])]
        if "branch" in names:
            if tool_results(context):
                return text("all branches done")
            return [ToolCall(id=f"call_{n}_{i}", name="branch", arguments={"i": i}) for i in range(branches)], "toolUse"
        return call("noop", n) if tool_results(context) < 2 else text("branch done")

    admitted, receives = [], set()
    for _ in range(trials):
        MODEL_SCRIPT.script(respond, delay_s=delay_s)
        result = outcome(lambda: orchestrator(runtime=new_runtime()),
                         lambda: MODEL_SCRIPT.calls)
        admitted.append(result["calls"])
        receives.add(result["receives"].split(":")[0])
    return {"max": max(admitted), "min": min(admitted), "trials": trials,
            "demand": 1 + branches * 3 + 1, "receives": sorted(receives)}


TOOLSETS["full"]["tools"].extend(["chain_b", "chain_c", "chain_d", "runaway", "branch", "noop"])

if __name__ == "__main__":
    serve({"wrapper": wrapper, "recorded": recorded, "chain": chain, "runaway": runaway_row,
           "fan_out": fan_out})
