"""Exceptions the runtime raises on purpose, each one a thing a caller can act on.

`OpenProgramError` is the base of the runtime's own errors (a stop is apart: see CancelledError). Each
also derives from the builtin a caller would expect (ValueError, RuntimeError, RecursionError...), so
code that catches those keeps working.
"""
import asyncio


class OpenProgramError(Exception):
    """Base of the errors the runtime raises on purpose."""


class CancelledError(BaseException):
    """A stop was requested for this run.

    Derives from BaseException (like KeyboardInterrupt) so that a user's `except Exception:`
    inside an agentic function cannot swallow a stop.
    """


class ToolArgumentError(OpenProgramError, ValueError):
    """Arguments given to a tool do not match its spec.

    `param` names the offending parameter (None when the problem is not about one parameter).
    """

    def __init__(self, message: str, *, tool: str | None = None, param: str | None = None):
        super().__init__(message)
        self.tool = tool
        self.param = param


class ToolRegistrationError(OpenProgramError, ValueError):
    """Two different functions asked for the same tool name, or a decorator argument is wrong."""


class BudgetExceeded(OpenProgramError, RuntimeError):
    """A delegation budget (runtime.Budget, or the default one) would be exceeded; raised before the work.

    `dimension` is which limit ("depth", "llm_calls", "tokens", "cost_usd", "time"), `limit` its value,
    `observed` what the call would have reached, `path` the chain of function names where it happened.
    """

    def __init__(self, message: str, *, dimension: str, limit, observed, path: list[str]):
        super().__init__(message)
        self.dimension = dimension
        self.limit = limit
        self.observed = observed
        self.path = list(path)

    @property
    def refusal(self) -> str:
        """What refused the call, as data: "budget:<dimension>"."""
        return f"budget:{self.dimension}"


class DepthCeilingExceeded(OpenProgramError, RecursionError):
    """The per-name depth ceiling (seed 000) refused a nested call of `function` past `limit` frames.

    The first refusal of a name in a frame goes back to that frame's model as a tool result (guidance);
    a second call of a refused name sets `ends_run` and propagates through every enclosing tool loop,
    ending the run. It is a RecursionError, so `except RecursionError` catches it.
    """

    refusal = "depth"

    def __init__(self, message: str, *, function: str, limit: int):
        super().__init__(message)
        self.function = function
        self.limit = limit
        self.ends_run = False


class LoopDetected(OpenProgramError, RuntimeError):
    """A model repeated one tool call (same `name`, same `arguments`) past the repeat limits of its frame.

    Like the depth ceiling's refusal: the first refusal of a repeated call goes back to the model as its
    tool result; if the model makes that call again, this ends the run (`ends_run` set), through every
    enclosing tool loop. `count` is how many times the call was made, this one included.
    """

    refusal = "loop"

    def __init__(self, message: str, *, name: str, arguments, count: int):
        super().__init__(message)
        self.name = name
        self.arguments = arguments
        self.count = count
        self.ends_run = False


class ExecLimitExceeded(OpenProgramError, RuntimeError):
    """`Runtime.exec` used all of its `max_iterations` model calls without a final answer.

    A loop that does not converge is an error of its frame and of the run, never a result.
    """

    def __init__(self, message: str, *, function: str | None, limit: int):
        super().__init__(message)
        self.function = function
        self.limit = limit


def status_of(exc: BaseException) -> str:
    """The node status a call that raised `exc` ends with: "cancelled" for a stop (ours, asyncio's, or
    Ctrl-C), "error" for anything else. One rule for code and model nodes alike."""
    if isinstance(exc, (CancelledError, asyncio.CancelledError, KeyboardInterrupt)):
        return "cancelled"
    return "error"
