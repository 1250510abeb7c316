"""Functions for the debugging tests: one that fails three calls down, and ones whose model calls a
replay or a fork must serve (tests/web/debugging)."""
from __future__ import annotations

from runtime import agentic_function, function


# Kept out of the global tool registry, like the launch-test functions (tests/web/launch_helpers.py).
@function(register_globally=False)
def divide(a: int, b: int) -> float:
    """a / b."""
    return a / b  # the line a traceback must name


@agentic_function(register_globally=False)
def average(numbers: list[int]) -> float:
    """The mean of the numbers."""
    return divide(sum(numbers), len(numbers))


@agentic_function(register_globally=False)
def report(numbers: list[int] = []) -> str:
    """Say the mean of the numbers (fails for none: a division by zero three calls down)."""
    return f"mean {average(numbers)}"


@agentic_function(register_globally=False)
def two_questions(topic: str = "tea", runtime=None) -> list[str]:
    """Ask the model two things about `topic`, the second after the first's answer."""
    first = runtime.llm(f"One word about {topic}?")
    second = runtime.llm(f"And after {first!r}, another about {topic}?")
    return [first, second]


@agentic_function(register_globally=False)
def asks_more_when(extra: bool = False, runtime=None) -> list[str]:
    """One model call, or two when a flag the test flips between recording and replay is set."""
    answers = [runtime.llm("first question")]
    if EXTRA_CALL["on"] or extra:
        answers.append(runtime.llm("a question the recording never saw"))
    return answers


EXTRA_CALL = {"on": False}
