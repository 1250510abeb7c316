"""Shared timing helper for the bench scripts: best-of-N per-call cost, robust to a noisy machine."""
from __future__ import annotations

import timeit
from typing import Callable


def per_call_seconds(fn: Callable[[], object], number: int = 200_000, repeat: int = 7) -> float:
    """The fastest of `repeat` runs of `number` calls, divided by `number`.

    The minimum, not the mean: on a shared machine, noise only ever adds time. One untimed pass first,
    so the first row of a table does not also pay for warming caches and the CPU clock.
    """
    timeit.timeit(fn, number=number)
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number
