"""The workload of bench_scaled.py: agent runs that wait on a model for as long as they are told, on no network.

Every process of the bench (driver, web server, workers) loads it through OPENPROGRAM_FUNCTION_MODULES and
selects the provider with OPENPROGRAM_MODEL=bench._waiting_functions.SleepingProvider. A run names its
model's latency in each call's model name ("wait-1000ms"), so one provider serves both loads: the I/O-bound
one (runs that spend nearly all their life waiting) and the CPU-bound one ("wait-0ms": a model that
answers at once, so the run's cost is its recording).
"""
from __future__ import annotations

import re
from typing import Callable, Optional

from runtime import agentic_function, function
from runtime.interrupt import sleep
from runtime.messages import ModelReply
from runtime.providers.base import Provider
from runtime.runtime import llm

_WAIT = re.compile(r"^wait-(\d+)ms$")


def model_waiting(milliseconds: int) -> str:
    """The model name of a call that SleepingProvider answers after `milliseconds`."""
    return f"wait-{milliseconds}ms"


class SleepingProvider(Provider):
    """Answers each request after the wait its model name gives ("wait-250ms"; any other name: at once).
    A stop during the wait ends it, as it would a real provider's."""

    def complete(self, request, check: Optional[Callable[[], None]] = None) -> ModelReply:
        match = _WAIT.match(request.model or "")
        if match and int(match.group(1)):
            sleep(int(match.group(1)) / 1000, check)
        # Its cost said (nothing: no network), so the default money limit does not warn about every call.
        return ModelReply(text="noted", usage={"input_tokens": 20, "output_tokens": 2, "cost_usd": 0.0})


@function
def tool_step(i: int) -> int:
    """One recorded tool call that does nothing else."""
    return i


@agentic_function
def waiting_agent(calls: int = 3, wait_ms: int = 1000, steps: int = 0) -> int:
    """Make `calls` model calls one after another, each answered after `wait_ms` milliseconds and followed
    by `steps` tool calls (an agent's turn: a model call, then what it asked for)."""
    for i in range(calls):
        llm(f"Step {i}: anything to add?", model=model_waiting(wait_ms))
        for j in range(steps):
            tool_step(j)
    return calls
