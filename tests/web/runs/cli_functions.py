"""Functions for the `run_function` tests: runs that complete although some of their calls were refused."""
from __future__ import annotations

from runtime import agentic_function
from runtime.errors import BudgetExceeded


# Kept out of the global tool registry, like the launch-test functions (tests/web/launch_helpers.py).
@agentic_function(register_globally=False)
def dig(level: int = 0) -> int:
    """Call itself until the depth ceiling or a depth budget refuses, then say how deep it got."""
    try:
        return dig(level + 1)
    except (RecursionError, BudgetExceeded):
        return level
