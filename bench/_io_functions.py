"""An I/O-bound workload for bench_scaled.py: model calls that wait like a real provider's, on no network.

Every process of the bench (web, workers) loads it through OPENPROGRAM_FUNCTION_MODULES and selects the
provider with OPENPROGRAM_MODEL=bench._io_functions.WaitingProvider:io.
"""
from __future__ import annotations

from typing import Callable, Optional

from runtime import agentic_function
from runtime.interrupt import sleep
from runtime.messages import ModelReply
from runtime.providers.base import Provider
from runtime.runtime import llm

WAIT_S = 0.1  # a fast hosted model's time to a short reply


class WaitingProvider(Provider):
    """Answers every request after WAIT_S seconds (a stop during the wait ends it, as with a real one)."""

    def complete(self, request, check: Optional[Callable[[], None]] = None) -> ModelReply:
        sleep(WAIT_S, check)
        return ModelReply(text="noted", usage={"input_tokens": 20, "output_tokens": 2})


@agentic_function
def io_agent(calls: int = 5) -> int:
    """Make `calls` model calls one after another (a short agent turn on a slow model)."""
    for i in range(calls):
        llm(f"Step {i}: anything to add?")
    return calls
