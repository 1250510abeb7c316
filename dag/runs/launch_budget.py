"""A budget asked for at launch (form, API, CLI): checked here, stored on the session, opened around the run.

The shape is `runtime.Budget`'s: {"max_depth": int, "max_llm_calls": int, "max_tokens": int,
"timeout_s": seconds, "max_cost_usd": US dollars}, each optional and from MINIMUM to MAXIMUM. It is
opened as a `with Budget(...)` block around the entry call, so it tightens the function's own budget
(and the default ones) and never relaxes them.
"""
from __future__ import annotations

import math
from contextlib import nullcontext
from typing import Any, ContextManager, Optional

from runtime import Budget

FIELDS = ("max_depth", "max_llm_calls", "max_tokens", "timeout_s", "max_cost_usd")
COUNTS = ("max_depth", "max_llm_calls", "max_tokens")
# The unit of each limit that is not a count, as its messages name it.
UNITS = {"timeout_s": "seconds", "max_cost_usd": "US dollars"}
# Far beyond any run, small enough for every database's integer column and JSON reader.
MAX_COUNT = 10**9
MAX_TIMEOUT_S = 7 * 24 * 3600.0
# Above 0: a millisecond, the smallest step the form offers (a float has no "just above 0").
MIN_TIMEOUT_S = 0.001
# A hundredth of a cent: less than one call of the cheapest priced model costs; a million dollars: more
# than anyone means to spend on one run.
MIN_COST_USD = 0.0001
MAX_COST_USD = 1_000_000.0
# Each limit's bounds: the check below and the API schema (dag.api.serializers) both read them.
MINIMUM = {**{name: 1 for name in COUNTS}, "timeout_s": MIN_TIMEOUT_S, "max_cost_usd": MIN_COST_USD}
MAXIMUM = {**{name: MAX_COUNT for name in COUNTS}, "timeout_s": MAX_TIMEOUT_S, "max_cost_usd": MAX_COST_USD}

HELP = {
    "max_depth": "How many agentic calls may nest, whatever their names (1: the function itself only).",
    "max_llm_calls": "How many model calls the whole run may make.",
    "max_tokens": "How many tokens (in and out) the whole run may spend.",
    "timeout_s": "How many seconds the run may take.",
    "max_cost_usd": "How many US dollars the run's model calls may cost (calls to a model without a price "
                    "cannot be counted).",
}


class BudgetProblem(ValueError):
    """The budget asked for is wrong. `errors` is {field: [message]} or {"__all__": [message]}."""

    def __init__(self, errors: dict):
        self.errors = errors
        super().__init__("; ".join(f"{name}: {' '.join(messages)}" for name, messages in errors.items()))


def _field_problem(name: str, value: Any) -> Optional[str]:
    low, high = MINIMUM[name], MAXIMUM[name]
    if name in COUNTS:
        if isinstance(value, bool) or not isinstance(value, int):
            return f"must be a whole number from {low} to {high}, got {value!r}"
        if not low <= value <= high:
            return f"must be from {low} to {high}, got {value}"
        return None
    # An int is never infinite, and one too large for a float (JSON's 1 and 400 zeros) must not be
    # turned into one: math.isfinite and the "g" format both would, and raise.
    unit = UNITS[name]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (
            isinstance(value, float) and not math.isfinite(value)):
        return f"must be a number of {unit} from {low:g} to {high:g}, got {value!r}"
    if not low <= value <= high:
        shown = value if isinstance(value, int) else format(value, "g")
        return f"must be from {low:g} to {high:g} {unit}, got {shown}"
    return None


def clean_budget(value: Any) -> Optional[dict]:
    """`value` as a launch budget (only the limits given), None for no budget; BudgetProblem if wrong."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise BudgetProblem({"__all__": [f"must be an object with any of {', '.join(FIELDS)}"]})
    unknown = [key for key in value if key not in FIELDS]
    if unknown:
        raise BudgetProblem({"__all__": [f"unknown limit(s) {', '.join(map(repr, unknown))}; "
                                         f"the limits are {', '.join(FIELDS)}"]})
    given = {name: value[name] for name in FIELDS if value.get(name) is not None}
    errors = {name: [problem] for name, problem in ((n, _field_problem(n, v)) for n, v in given.items()) if problem}
    if errors:
        raise BudgetProblem(errors)
    return {name: v if name in COUNTS else float(v) for name, v in given.items()} or None


def parse_budget_text(text: str) -> Optional[dict]:
    """`"max_llm_calls=20,timeout_s=60"` (the CLI's --budget) as a launch budget; BudgetProblem if wrong."""
    budget: dict[str, Any] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, sep, raw = part.partition("=")
        name, raw = name.strip(), raw.strip()
        if not sep or not name:
            raise BudgetProblem({"__all__": [f"{part!r} is not NAME=VALUE; the limits are {', '.join(FIELDS)}"]})
        budget[name] = _number(name, raw)
    return clean_budget(budget)


def _number(name: str, raw: str) -> Any:
    try:
        return int(raw)
    except ValueError:
        digits = raw.lstrip("+-")
        if digits.isdigit() and name in FIELDS:
            # More digits than Python converts (about 4,300): float() would make it inf, which is not
            # what was typed.
            low, high = MINIMUM[name], MAXIMUM[name]
            bounds = f"{low} to {high}" if name in COUNTS else f"{low:g} to {high:g} {UNITS[name]}"
            raise BudgetProblem({name: [f"must be from {bounds}, got a number of {len(digits)} digits"]}) from None
    try:
        return float(raw)
    except ValueError:
        return raw  # not a number (or not a limit): clean_budget names the field and what it must be


def opened(launch_budget: Optional[dict]) -> ContextManager:
    """The block to run a session's entry call in: its launch budget, or nothing."""
    return Budget(**launch_budget) if launch_budget else nullcontext()


def describe(launch_budget: Optional[dict]) -> str:
    """One line for pages and the CLI: "max_llm_calls 20 · timeout_s 60 s · max_cost_usd $0.5"."""
    if not launch_budget:
        return ""
    shown = {"timeout_s": "{:g} s", "max_cost_usd": "${:g}"}
    return " · ".join(f"{name} {shown.get(name, '{}').format(launch_budget[name])}"
                      for name in FIELDS if name in launch_budget)
