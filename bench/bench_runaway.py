"""How fast a runaway model is stopped: model calls and wall time until the run ends, per setting.

A scripted model that always asks to call the function it runs in (self-delegation), and one that
always calls several agentic functions at once (a breadth-first runaway). Each stops by itself after
CAP calls, so a broken bound shows as "capped" instead of hanging the bench. `make bench-peers` puts
the same runaway beside openai-agents and openprogram.
"""
import os
import sys
import threading
import time
from contextlib import nullcontext

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from runtime import Budget, Runtime, agentic_function  # noqa: E402
from runtime.messages import ModelReply, ToolCall  # noqa: E402
from runtime.providers import Provider  # noqa: E402

CAP = 100_000


class Capped(Exception):
    pass


class AlwaysCalls(Provider):
    name = "always"

    def __init__(self, *names):
        super().__init__("always")
        self.names, self.calls, self._lock = names, 0, threading.Lock()

    def complete(self, request, check=None):
        with self._lock:
            self.calls += 1
            if self.calls > CAP:
                raise Capped(f"capped at {CAP} model calls")
        return ModelReply(tool_calls=[ToolCall(f"c{i}", n, {"task": "again"}) for i, n in enumerate(self.names)])


def agents(names):
    tools = []
    for name in names:
        @agentic_function(name=name, register_globally=False)
        def agent(task: str, runtime=None) -> str:
            """Delegate the task."""
            return runtime.exec(task, tools=tools, max_iterations=20)
        tools.append(agent)
    return tools


def measure(label, names, budget=None, default_limit=None):
    before = os.environ.get("OPENPROGRAM_MAX_LLM_CALLS")
    if default_limit is not None:
        os.environ["OPENPROGRAM_MAX_LLM_CALLS"] = default_limit
    model = AlwaysCalls(*names)
    entry = agents(names)[0]
    started = time.perf_counter()
    try:
        with budget or nullcontext():
            outcome = f"returned {entry('go', runtime=Runtime(provider=model))!r:.40}"
    except Capped as exc:
        outcome = f"unbounded ({exc})"
    except Exception as exc:
        outcome = f"{type(exc).__name__}"
    finally:
        if default_limit is not None:
            if before is None:
                del os.environ["OPENPROGRAM_MAX_LLM_CALLS"]
            else:
                os.environ["OPENPROGRAM_MAX_LLM_CALLS"] = before
    elapsed = time.perf_counter() - started
    print(f"{label:58} {model.calls:>9} {elapsed * 1000:10.1f}  {outcome}")


def main():
    print(f"{'runaway, setting':58} {'calls':>9} {'wall ms':>10}  caller receives")
    self_call = ("loop",)
    measure("self-delegation, defaults", self_call)
    measure("self-delegation, default budget off (ceiling alone)", self_call, default_limit="0")
    measure("self-delegation, Budget(max_depth=1)", self_call, Budget(max_depth=1))
    measure("self-delegation, Budget(max_llm_calls=10)", self_call, Budget(max_llm_calls=10))
    fan_out = ("alpha", "beta", "gamma")
    measure("breadth-first (3 agents call each other), defaults", fan_out)
    measure("breadth-first, OPENPROGRAM_MAX_LLM_CALLS=50", fan_out, default_limit="50")


if __name__ == "__main__":
    main()
