"""The default bound on every tree of agentic calls: at most OPENPROGRAM_MAX_LLM_CALLS model calls and
OPENPROGRAM_MAX_COST_USD US dollars.

A depth ceiling bounds depth, not cost; without this a model that keeps calling tools makes model calls
until someone notices. Every tree (the calls under one entry frame, across its threads and tasks) gets
`max_llm_calls` from OPENPROGRAM_MAX_LLM_CALLS (default 500; 0 turns it off) and `max_cost_usd` from
OPENPROGRAM_MAX_COST_USD (default 10; 0 turns it off), checked as `runtime.Budget` checks them, and
nothing else. An explicit `Budget` still applies on top, so it can only tighten this.

It costs nothing at frame entry: the tally hangs on the entry frame and is made at the tree's first
model call, when the variable is read. A call in a thread that lost the caller's context (a bare
`threading.Thread`, `executor.submit`) starts a tree of its own, so it is still bounded.

A model loop run outside any agentic function (a top-level `Runtime.exec` or `llm`) is a tree too
(`open_frameless_tree`): its own model calls, and those of every agentic call its tools start, share one
tally. Without it, each tool call would start a tree with a whole limit of its own, and a model that
fans out would multiply the bound.
"""
from __future__ import annotations

import threading
from contextvars import ContextVar
from typing import Optional

from .budget import NO_SPEND
from .budget_breaches import money_reached, spent_text
from .context import Frame, _current_budget, _current_recorder, current_frame, open_agentic_levels
from .errors import BudgetExceeded
from .prices import log_unpriced
from .settings_table import default_of, raw_text, read_number

ENV_VAR = "OPENPROGRAM_MAX_LLM_CALLS"
DEFAULT_MAX_LLM_CALLS = default_of(ENV_VAR)
COST_ENV_VAR = "OPENPROGRAM_MAX_COST_USD"
DEFAULT_MAX_COST_USD = default_of(COST_ENV_VAR)

_create_lock = threading.Lock()
_OFF = object()  # the tally of a tree whose default bound is turned off

# The frameless model loop the current call runs under (see `open_frameless_tree`), or None.
_frameless_tree: ContextVar[Optional["_FramelessTree"]] = ContextVar("openprogram_frameless_tree", default=None)


def default_llm_calls() -> int:
    """The default model-call limit per tree from OPENPROGRAM_MAX_LLM_CALLS (0: no default bound)."""
    raw = raw_text(ENV_VAR)
    if not raw:
        return DEFAULT_MAX_LLM_CALLS
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise ValueError(f"{ENV_VAR}={raw!r}: expected a whole number of model calls >= 0 "
                         f"(0 turns the default budget off; unset means {DEFAULT_MAX_LLM_CALLS})")
    return value


def default_max_cost_usd() -> float:
    """The default money limit per tree in USD from OPENPROGRAM_MAX_COST_USD (0: no default money limit)."""
    return read_number(COST_ENV_VAR)


class CallTally:
    """Model calls admitted in one tree and their spend, against its limits (None: off). Admission is
    atomic under `lock`; a call in flight counts as the tree's dearest call against the money limit."""

    __slots__ = ("limit", "max_cost_usd", "calls", "tokens", "cost_usd", "unpriced_calls", "in_flight",
                 "dearest_call", "lock")

    def __init__(self, limit: Optional[int], max_cost_usd: Optional[float] = None):
        self.limit = limit
        self.max_cost_usd = max_cost_usd
        self.calls = 0
        self.tokens = 0
        self.cost_usd = 0.0
        self.unpriced_calls = 0
        self.in_flight = 0
        self.dearest_call = 0.0
        self.lock = threading.Lock()

    def release(self) -> None:
        """The admitted call failed (before or at the provider): give its slot back."""
        with self.lock:
            self.calls -= 1
            self.in_flight -= 1

    def commit(self, tokens: int, cost_usd: Optional[float] = 0.0, model: Optional[str] = None) -> None:
        """The admitted call happened: count its tokens and its cost (None: unknown, for an unpriced
        `model`; the first such call under the money limit is logged)."""
        with self.lock:
            self.in_flight -= 1
            self.tokens += tokens
            if cost_usd is not None:
                self.cost_usd += cost_usd
                self.dearest_call = max(self.dearest_call, cost_usd)
                return
            self.unpriced_calls += 1
            first = self.unpriced_calls == 1 and self.max_cost_usd is not None
        if first:
            log_unpriced(model, f"the default money limit {COST_ENV_VAR}={self.max_cost_usd:g}")

    def over_limit(self) -> Optional[str]:
        """Which limit one more call would cross ("llm_calls", "cost_usd"), or None; under `lock`."""
        if self.limit is not None and self.calls >= self.limit:
            return "llm_calls"
        if (self.max_cost_usd is not None
                and money_reached(self.cost_usd + self.in_flight * self.dearest_call, self.max_cost_usd)):
            return "cost_usd"
        return None


def _new_tally():
    limit, money = default_llm_calls(), default_max_cost_usd()
    return CallTally(limit or None, money or None) if limit or money else _OFF


class _FramelessTree:
    """A frameless loop's tree; its tally is made at its first model call, as an entry frame's is."""

    __slots__ = ("tally",)

    def __init__(self) -> None:
        self.tally = None


def open_frameless_tree():
    """Before a model loop: outside any agentic function (and any frameless loop), open a tree whose tally
    its own model calls and the trees its tools start all count against. Returns the token for
    `close_frameless_tree` (None when it opened nothing)."""
    if current_frame() is not None or _frameless_tree.get() is not None:
        return None
    return _frameless_tree.set(_FramelessTree())


def close_frameless_tree(token) -> None:
    if token is not None:
        _frameless_tree.reset(token)


def _frameless_tally():
    tree = _frameless_tree.get()
    if tree is None:
        return None
    if tree.tally is None:
        with _create_lock:  # its tools' threads may make their first model calls at once
            if tree.tally is None:
                tree.tally = _new_tally()
    return tree.tally


def _entry_frame(frame: Frame) -> Frame:
    while frame.parent is not None:
        frame = frame.parent
    return frame


def _tally_of(root: Frame):
    tally = root.__dict__.get("_call_tally")
    if tally is None:
        with _create_lock:  # parallel branches may make the tree's first model calls at once
            tally = root.__dict__.get("_call_tally")
            if tally is None:
                outer = _frameless_tally()  # a tree started by a frameless loop's tool: part of it
                tally = root._call_tally = outer if outer is not None else _new_tally()
    return tally


def admit_default_call(frame: Optional[Frame]) -> Optional[CallTally]:
    """Count one model call made in `frame`'s tree (the frameless loop's, for None); None outside both,
    or when turned off.

    Raises BudgetExceeded(dimension="llm_calls") when the tree has made its limit of model calls, and
    BudgetExceeded(dimension="cost_usd") when its spend has reached its money limit.
    """
    tally = _frameless_tally() if frame is None else _tally_of(_entry_frame(frame))
    if tally is None or tally is _OFF:
        return None
    with tally.lock:
        dimension = tally.over_limit()
        if dimension is None:
            tally.calls += 1
            tally.in_flight += 1
            return tally
        in_flight = tally.in_flight
    _raise_breach(tally, dimension, in_flight, frame)


def _raise_breach(tally: CallTally, dimension: str, in_flight: int, frame: Optional[Frame]):
    path = frame.path() if frame is not None else ["runtime.exec"]
    where = " → ".join(path)
    if dimension == "llm_calls":
        limit, observed = tally.limit, tally.limit + 1
        message = (f"default budget exceeded: {ENV_VAR}={limit}, this would be model call {observed} of the "
                   f"tree at {where}; make fewer model calls (a model that keeps calling tools is a "
                   f"runaway), or raise {ENV_VAR} (0 turns the default off)")
    else:
        limit, observed = round(tally.max_cost_usd, 6), round(tally.cost_usd, 6)
        message = (f"default budget exceeded: {COST_ENV_VAR}={limit:g}, {spent_text(tally.cost_usd, in_flight)} "
                   f"by the tree at {where}; make fewer or cheaper model calls, or raise {COST_ENV_VAR} "
                   f"(0 turns the default money limit off)")
    error = BudgetExceeded(message, dimension=dimension, limit=limit, observed=observed, path=path)
    recorder = _current_recorder.get()
    if recorder is not None:
        recorder.budget_updated(*_gauge(tally, dimension))
    raise error


def _gauge(tally: CallTally, dimension: str) -> tuple[dict, dict]:
    """What the budget gauge shows at a breach of the default's `dimension`: an explicit root budget's
    state, if one is open (the breach noted on it, so its later reports show it too), else the default's
    alone."""
    scope = _current_budget.get()
    if scope is not None:
        root = scope.root
        with root._lock:
            if dimension == "llm_calls":
                root.default_breach["max_llm_calls"] = (tally.limit, "llm_calls", tally.calls)
            else:
                root.default_breach["max_cost_usd"] = (round(tally.max_cost_usd, 6), "cost_usd",
                                                       round(tally.cost_usd, 6))
        snapshot = root.snapshot()
        return snapshot["limits"], snapshot["spend"]
    money = None if tally.max_cost_usd is None else round(tally.max_cost_usd, 6)
    limits = {"max_depth": None, "max_llm_calls": tally.limit, "max_tokens": None, "timeout_s": None,
              "max_cost_usd": money}
    spend = {**NO_SPEND, "depth": open_agentic_levels(), "llm_calls": tally.calls, "tokens": tally.tokens,
             "cost_usd": round(tally.cost_usd, 6), "unpriced_calls": tally.unpriced_calls}
    return limits, spend
