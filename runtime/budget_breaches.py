"""A budget's breaches: found under the root scope's lock (`runtime.budget`), then reported to the
recorder and raised as BudgetExceeded after it is released.

Each finder takes the chain of scopes a call runs under, innermost first, and returns the first breach
as (error, root scope), or None: depth on entering a frame, the deadline (at `now`, on the budget's
clock), and spend (tokens, money with the calls in flight, model calls) before a model call.
"""
from __future__ import annotations

from typing import NoReturn

from .context import _current_recorder
from .errors import BudgetExceeded

# The constructor argument behind each dimension, and the advice a breach message ends with.
ARGUMENT = {"depth": "max_depth", "llm_calls": "max_llm_calls", "tokens": "max_tokens",
            "cost_usd": "max_cost_usd", "time": "timeout_s"}
ADVICE = {
    "depth": "raise max_depth or restructure the delegation so fewer agentic calls nest",
    "llm_calls": "raise max_llm_calls or make fewer model calls in this delegation tree",
    "tokens": "raise max_tokens or send shorter prompts in this delegation tree",
    "cost_usd": "raise max_cost_usd, or make fewer or cheaper model calls in this delegation tree",
    "time": "raise timeout_s or split the work into shorter runs",
}

# Costs are floats: a thousand calls of $0.01 add up to 9.99999999999983, which must read as $10 reached.
MONEY_TOLERANCE_USD = 1e-9


def money_reached(spent: float, limit: float) -> bool:
    """Whether `spent` US dollars (calls in flight included) reach the money limit `limit`."""
    return spent >= limit - MONEY_TOLERANCE_USD


def depth_breach(scopes, levels: int, frame):
    for scope in scopes:
        depth = levels - scope.anchor
        if scope.max_depth is not None and depth > scope.max_depth:
            return _breach(scope, "depth", scope.max_depth, depth, frame,
                           f"entering {frame.name} would be level {depth} of the delegation")
    return None


def deadline_breach(scopes, frame, now: float):
    for scope in scopes:
        if scope.deadline is not None and now >= scope.deadline:
            limit = round(scope.deadline - scope.started, 6)
            observed = round(now - scope.started, 6)
            return _breach(scope, "time", limit, observed, frame,
                           f"{observed:.3f} s have passed since the budget opened")
    return None


def spend_breach(scopes, frame):
    for scope in scopes:
        if scope.max_tokens is not None and scope.tokens >= scope.max_tokens:
            return _breach(scope, "tokens", scope.max_tokens, scope.tokens, frame,
                           f"{scope.tokens} tokens are already spent")
        if scope.max_cost_usd is not None:
            in_flight = scope.reserved_calls * scope.root.dearest_call
            if money_reached(scope.cost_usd + in_flight, scope.max_cost_usd):
                return _breach(scope, "cost_usd", round(scope.max_cost_usd, 6), round(scope.cost_usd, 6), frame,
                               spent_text(scope.cost_usd, scope.reserved_calls))
        taken = scope.llm_calls + scope.reserved_calls
        if scope.max_llm_calls is not None and taken >= scope.max_llm_calls:
            return _breach(scope, "llm_calls", scope.max_llm_calls, taken + 1, frame,
                           f"this would be model call {taken + 1}")
    return None


def spent_text(cost_usd: float, in_flight: int) -> str:
    """"$0.5012 is already spent" (and the calls in flight), for a money breach's message."""
    text = f"${cost_usd:.4f} is already spent"
    if in_flight:
        text += f" and {in_flight} model call{'s are' if in_flight > 1 else ' is'} in flight"
    return text


def _breach(scope, dimension: str, limit, observed, frame, what: str):
    path = frame.path() if frame is not None else []
    where = " → ".join(path) if path else "outside any agentic function"
    error = BudgetExceeded(
        f"delegation budget exceeded: {ARGUMENT[dimension]}={limit}, {what} (observed {observed}) "
        f"at {where}; {ADVICE[dimension]}",
        dimension=dimension, limit=limit, observed=observed, path=path)
    return error, scope.root


def raise_breach(breach) -> NoReturn:
    error, root = breach
    notify_recorder(root)
    raise error


def notify_recorder(root) -> None:
    recorder = _current_recorder.get()
    if recorder is not None:
        snapshot = root.snapshot()
        recorder.budget_updated(snapshot["limits"], snapshot["spend"])
