"""Exceptions the runtime raises on purpose, each one a thing a caller can act on."""


class CancelledError(BaseException):
    """A stop was requested for this run.

    Derives from BaseException (like KeyboardInterrupt) so that a user's `except Exception:`
    inside an agentic function cannot swallow a stop.
    """


class ToolArgumentError(ValueError):
    """Arguments given to a tool do not match its spec.

    `param` names the offending parameter (None when the problem is not about one parameter).
    """

    def __init__(self, message: str, *, tool: str | None = None, param: str | None = None):
        super().__init__(message)
        self.tool = tool
        self.param = param


class ToolRegistrationError(ValueError):
    """Two different functions asked for the same tool name, or a decorator argument is wrong."""


class BudgetExceeded(RuntimeError):
    """A delegation budget (runtime.Budget) would be exceeded; raised before the work starts.

    `dimension` is which limit ("depth", "llm_calls", "tokens", "time"), `limit` its value, `observed`
    what the call would have reached, `path` the chain of function names where it happened.
    """

    def __init__(self, message: str, *, dimension: str, limit, observed, path: list[str]):
        super().__init__(message)
        self.dimension = dimension
        self.limit = limit
        self.observed = observed
        self.path = list(path)
