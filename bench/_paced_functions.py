"""A function for the live-view latency bench: writes nodes at a fixed rate, whatever each write costs.

Loaded by the bench's server through OPENPROGRAM_FUNCTION_MODULES=examples.functions,bench._paced_functions.
"""
from __future__ import annotations

import time

from runtime import agentic_function, function


@function
def tick(i: int) -> int:
    """One recorded call: a node entered and exited."""
    return i


@agentic_function
def paced_writer(n: int = 2500, rate: float = 500.0) -> int:
    """Make `n` child calls at `rate` per second, on an absolute schedule so slow writes do not drift it."""
    start = time.monotonic()
    for i in range(n):
        delay = start + i / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        tick(i)
    return n
