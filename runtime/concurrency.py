"""Carrying the call context (frame, recorder, runtime, budget) into a user's own thread pool.

asyncio tasks and `asyncio.to_thread` copy the context by themselves; `concurrent.futures`
executors do not, so work submitted there would run outside the caller's budget and DAG.
"""
from __future__ import annotations

import contextvars
from concurrent.futures import Executor, Future
from typing import Any, Callable


def submit(executor: Executor, fn: Callable, /, *args: Any, **kwargs: Any) -> Future:
    """`executor.submit(fn, *args, **kwargs)`, run in a copy of the caller's context."""
    context = contextvars.copy_context()
    return executor.submit(context.run, fn, *args, **kwargs)
