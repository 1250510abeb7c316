"""Functions for the cost and loop tests (issue 38): a model whose every call costs $0.002, by its own figure."""
from __future__ import annotations

from runtime import Runtime, agentic_function, function
from runtime.messages import ModelReply, ToolCall
from runtime.providers.base import Provider

CALL_COST = 0.002


class Metered(Provider):
    """Calls `lookup` once a turn, `steps` times (with a new key each turn, or the same one with `repeat`),
    then answers; each reply's usage carries its cost, as a gateway's does. `priced=False`: no cost given,
    and the model has no price (an unpriced model)."""

    name = "metered"

    def __init__(self, steps: int, repeat: bool = False, priced: bool = True):
        super().__init__("meter-1" if priced else "unpriced-1")
        self.steps, self.repeat, self.priced = steps, repeat, priced

    def complete(self, request, check=None):
        done = sum(1 for message in request.messages if message["role"] == "tool")
        usage = {"input_tokens": 100, "output_tokens": 10, **({"cost_usd": CALL_COST} if self.priced else {})}
        if done >= self.steps:
            return ModelReply(text=f"looked up {done} keys", usage=usage)
        key = "same" if self.repeat else f"k{done}"
        return ModelReply(tool_calls=[ToolCall(f"call{done}", "lookup", {"key": key})], usage=usage)


@function(register_globally=False)
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


# Kept out of the global tool registry, like the launch-test functions (tests/web/launch_helpers.py).
@agentic_function(register_globally=False)
def spend(steps: int = 3, repeat: bool = False, priced: bool = True) -> str:
    """Look keys up with a model that costs $0.002 a call."""
    runtime = Runtime(provider=Metered(steps, repeat, priced))
    return runtime.exec("look the keys up", tools=[lookup], max_iterations=50)
