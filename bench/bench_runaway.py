"""How fast a runaway model is stopped: model calls, wall time and spend until the run ends, per setting.

Scripted models, each a runaway of one kind: one that always asks to call the function it runs in
(self-delegation); one that always calls several agentic functions at once (breadth-first); one that
repeats one tool call, invalid or valid (a loop that is not recursion, as SmolLM2 was seen doing); and
one that makes progress (new arguments each time) at $0.01 a call (a money runaway). Each stops by itself
after CAP calls, so a broken bound shows as "unbounded" instead of hanging the bench. `make bench-peers`
puts the self-delegation runaway beside openai-agents and openprogram.
"""
import os
import sys
import threading
import time
from contextlib import contextmanager, nullcontext

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from runtime import Budget, Runtime, agentic_function, function, set_price  # noqa: E402
from runtime.messages import ModelReply, ToolCall  # noqa: E402
from runtime.providers import Provider  # noqa: E402

CAP = 100_000
CALL_COST_USD = 0.01
# What the peers' users get against a repeated call: a step cap only (their defaults), so a loop runs
# until the cap whatever it repeats.
PEER_STEP_CAPS = "openai-agents max_turns=10, LangGraph recursion_limit=25, smolagents max_steps=20"


class Capped(Exception):
    pass


class Runaway(Provider):
    """Answers every request with tool calls of `names`; `arguments(n)` gives the n-th call's arguments."""

    name = "runaway"

    def __init__(self, *names, arguments=lambda n: {"task": "again"}, cost_usd=None):
        super().__init__("runaway")
        self.names, self.arguments, self.cost_usd = names, arguments, cost_usd
        self.calls, self._lock = 0, threading.Lock()

    def complete(self, request, check=None):
        with self._lock:
            self.calls += 1
            if self.calls > CAP:
                raise Capped(f"capped at {CAP} model calls")
            n = self.calls
        usage = {"input_tokens": 100, "output_tokens": 10}
        if self.cost_usd is not None:
            usage["cost_usd"] = self.cost_usd  # the provider's own figure, as some gateways give it
        calls = [ToolCall(f"c{n}_{i}", name, self.arguments(n)) for i, name in enumerate(self.names)]
        return ModelReply(tool_calls=calls, usage=usage)


@function(name="lookup", register_globally=False)
def lookup(task: str) -> str:
    """Look something up."""
    return "found"


def agents(names, extra_tools=(), max_iterations=20):
    tools = list(extra_tools)
    for name in names:
        @agentic_function(name=name, register_globally=False)
        def agent(task: str, runtime=None) -> str:
            """Delegate the task."""
            return runtime.exec(task, tools=tools, max_iterations=max_iterations)
        tools.append(agent)
    return tools[len(extra_tools)]


@contextmanager
def environment(settings):
    before = {name: os.environ.get(name) for name in settings}
    os.environ.update(settings)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def measure(label, model, entry, budget=None, env=None):
    started = time.perf_counter()
    try:
        with environment(env or {}), budget or nullcontext():
            outcome = f"returned {entry('go', runtime=Runtime(provider=model))!r:.40}"
    except Capped as exc:
        outcome = f"unbounded ({exc})"
    except Exception as exc:
        outcome = f"{type(exc).__name__}" + (f" ({exc.dimension})" if hasattr(exc, "dimension") else "")
    elapsed = time.perf_counter() - started
    spent = f"${model.calls * model.cost_usd:.2f}" if model.cost_usd is not None else ""
    print(f"{label:68} {model.calls:>7} {elapsed * 1000:9.1f} {spent:>8}  {outcome}")


def self_delegation():
    names = ("loop",)
    measure("self-delegation, defaults", Runaway(*names), agents(names))
    measure("self-delegation, default budget off (ceiling alone)", Runaway(*names), agents(names),
            env={"OPENPROGRAM_MAX_LLM_CALLS": "0"})
    measure("self-delegation, Budget(max_depth=1)", Runaway(*names), agents(names), Budget(max_depth=1))
    measure("self-delegation, Budget(max_llm_calls=10)", Runaway(*names), agents(names), Budget(max_llm_calls=10))


def breadth_first():
    names = ("alpha", "beta", "gamma")
    measure("breadth-first (3 agents call each other), defaults", Runaway(*names), agents(names))
    measure("breadth-first, OPENPROGRAM_MAX_LLM_CALLS=50", Runaway(*names), agents(names),
            env={"OPENPROGRAM_MAX_LLM_CALLS": "50"})


def repeated_calls():
    print(f"  (peers against a repeated call: their step caps alone, {PEER_STEP_CAPS})")
    off = {"OPENPROGRAM_MAX_REPEATS": "0", "OPENPROGRAM_MAX_FAILED_REPEATS": "0"}
    invalid = lambda n: {"query": "again"}  # noqa: E731  (`solve` takes `task`: never valid)
    for what, arguments, tools in (("an invalid self-call", invalid, ("solve",)),
                                   ("a valid lookup", lambda n: {"task": "tides"}, ("lookup",))):
        model = lambda: Runaway(*tools, arguments=arguments)  # noqa: E731
        measure(f"repeats {what}, defaults", model(), agents(("solve",), [lookup]))
        measure(f"repeats {what}, repeat guard off, max_iterations=20", model(), agents(("solve",), [lookup]),
                env=off)
        measure(f"repeats {what}, repeat guard off, max_iterations=1000", model(),
                agents(("solve",), [lookup], max_iterations=1000), env=off)


def money():
    progress = lambda n: {"task": f"step {n}"}  # noqa: E731  (new arguments each time: no repeat)
    walker = agents(("walk",), [lookup], max_iterations=100_000)

    def model(*names):
        return Runaway(*(names or ("lookup",)), arguments=progress, cost_usd=CALL_COST_USD)
    measure("money ($0.01 a call), defaults", model(), walker)
    measure("money, OPENPROGRAM_MAX_LLM_CALLS=0 (the default $10 alone)", model(), walker,
            env={"OPENPROGRAM_MAX_LLM_CALLS": "0"})
    measure("money, Budget(max_cost_usd=0.5)", model(), walker, Budget(max_cost_usd=0.5))
    fan = agents(("fan",), [walker], max_iterations=100_000)
    measure("money, 8 parallel branches, Budget(max_cost_usd=0.5)", fan_model(walker), fan, Budget(max_cost_usd=0.5))


def fan_model(walker):
    """The entry's model starts 8 walkers at once; each walker's model then walks, at $0.01 a call."""
    branches = Runaway(*(["walk"] * 8), arguments=lambda n: {"task": f"branch {n}"}, cost_usd=CALL_COST_USD)
    steps = Runaway("lookup", arguments=lambda n: {"task": f"step {n}"}, cost_usd=CALL_COST_USD)

    class Both(Provider):
        name = "runaway"
        cost_usd = CALL_COST_USD

        @property
        def calls(self):
            return branches.calls + steps.calls

        def complete(self, request, check=None):
            offered = {spec["name"] for spec in request.tools}
            return (branches if "fan" in offered else steps).complete(request, check)
    return Both("runaway")


def main():
    set_price("runaway:runaway", 0, 0)  # free where no cost is given: a bench of runaways, not of prices
    print(f"{'runaway, setting':68} {'calls':>7} {'wall ms':>9} {'spent':>8}  caller receives")
    self_delegation()
    breadth_first()
    repeated_calls()
    money()


if __name__ == "__main__":
    main()
