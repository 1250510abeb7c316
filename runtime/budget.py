"""An inherited delegation budget: one set of limits over a whole tree of agentic calls.

`Budget(max_depth=..., max_llm_calls=..., max_tokens=..., timeout_s=..., max_cost_usd=...)` is opened either as a block
(`with Budget(max_depth=2): ...`, or `async with`) or per call, as a template given to
`@agentic_function(budget=Budget(...))`. Each opening creates a `BudgetScope`; the scopes form a tree
that mirrors the delegation tree:

- depth counts agentic frames entered inside a scope, whatever their names; a decorated function is
  level 1 of its own budget, and entering level `max_depth + 1` is refused before the body runs;
- a scope opened inside another gets at most what remains of its parent's (tighten, never relax);
- spend is shared: a model call counts against every enclosing scope, and admission is atomic
  (reserve under the root's lock, then commit or release);
- money (`max_cost_usd`, US dollars, priced by `runtime.prices`) is checked like tokens, once spent; a
  call still in flight counts as the dearest call the tree has made so far, so parallel branches stop
  within about one call of the limit. A call whose cost is unknown (an unpriced model) cannot be
  counted: the first one under a money limit is logged, and the spend reports how many there were.

The innermost scope is held in the ContextVar `runtime.context._current_budget`, set only where a
scope opens; a frame's level is read from the guard's per-name counts, so entering a frame under a
budget sets nothing. Threads and tasks that copy the context (asyncio tasks, `to_thread`,
`runtime.submit`) carry the scope along and share the scope objects, hence the one lock per root.

Apart from these explicit budgets, every tree of agentic calls has a default bound on its model calls
(OPENPROGRAM_MAX_LLM_CALLS) and its spend (OPENPROGRAM_MAX_COST_USD), kept on the tree's entry frame: see
`runtime.default_budget`. A breach of it under an explicit root scope is noted on that scope, so its
reports keep showing it.
"""
from __future__ import annotations

import logging
import math
import threading
import time
from typing import Any, Optional

from .budget_breaches import deadline_breach, depth_breach, notify_recorder, raise_breach, spend_breach
from .context import _current_budget, _current_frame, open_agentic_levels
from .errors import BudgetExceeded
from .prices import log_unpriced

logger = logging.getLogger("runtime")

# Read through this name so tests can drive deadlines with a fake clock instead of sleeping.
_clock = time.monotonic

def _positive_int(name: str, value: Any) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"Budget({name}={value!r}): {name} must be a positive integer or None")
    return value


def _positive_number(name: str, value: Any, unit: str) -> Optional[float]:
    if value is None:
        return None
    if (isinstance(value, bool) or not isinstance(value, (int, float))
            or not math.isfinite(value) or value <= 0):
        raise ValueError(f"Budget({name}={value!r}): {name} must be a positive number of {unit} or None")
    return float(value)


def _tighter(requested: Optional[float], remaining: Optional[float]) -> Optional[float]:
    if requested is None:
        return remaining
    if remaining is None:
        return requested
    return min(requested, remaining)


# A budget's spend before anything was spent.
NO_SPEND = {"depth": 0, "llm_calls": 0, "tokens": 0, "elapsed_s": 0.0, "cost_usd": 0.0, "unpriced_calls": 0}


class Budget:
    """The limits of a delegation tree; `None` means "no limit" for that dimension.

    Reusable: every `with`/`async with` block and every call of a function decorated with
    `budget=` opens a fresh `BudgetScope` from it (`with Budget(...) as scope:` gives the block's).
    `snapshot()` reports the most recently opened one.
    """

    def __init__(self, max_depth: Optional[int] = None, max_llm_calls: Optional[int] = None,
                 max_tokens: Optional[int] = None, timeout_s: Optional[float] = None,
                 max_cost_usd: Optional[float] = None):
        self.max_depth = _positive_int("max_depth", max_depth)
        self.max_llm_calls = _positive_int("max_llm_calls", max_llm_calls)
        self.max_tokens = _positive_int("max_tokens", max_tokens)
        self.timeout_s = _positive_number("timeout_s", timeout_s, "seconds")
        self.max_cost_usd = _positive_number("max_cost_usd", max_cost_usd, "US dollars")
        self.last_scope: Optional[BudgetScope] = None

    @property
    def limits(self) -> dict:
        return {"max_depth": self.max_depth, "max_llm_calls": self.max_llm_calls,
                "max_tokens": self.max_tokens, "timeout_s": self.timeout_s, "max_cost_usd": self.max_cost_usd}

    def open_scope(self, parent: Optional["BudgetScope"] = None, anchor: int = 0) -> "BudgetScope":
        """A new scope under `parent`, limited to what `parent` has left; `anchor` agentic frames are
        open where it starts (its level 1 is the next one)."""
        scope = BudgetScope(self, parent, anchor)
        self.last_scope = scope
        return scope

    def snapshot(self) -> dict:
        """Limits and spend of the most recent scope opened from this budget (zero spend if none yet)."""
        if self.last_scope is not None:
            return self.last_scope.snapshot()
        return {"limits": self.limits, "spend": dict(NO_SPEND)}

    # A `with` block is a scope at depth 0: the first agentic call inside it is level 1.
    def __enter__(self) -> "BudgetScope":
        scope = self.open_scope(_current_budget.get(), open_agentic_levels())
        scope._token = _current_budget.set(scope)
        try:
            scope._started()
        except BaseException:
            # `with` does not call __exit__ when __enter__ raises: undo here, or the scope would
            # bound whatever this thread runs next.
            _current_budget.reset(scope._token)
            scope._token = None
            scope.close(report=False)
            raise
        return scope

    def __exit__(self, exc_type, exc, tb) -> None:
        scope = _current_budget.get()
        if scope is None or scope.budget is not self or scope._token is None:
            raise RuntimeError("Budget block exited in a different context than it was entered in")
        token, scope._token = scope._token, None
        _current_budget.reset(token)
        try:
            scope.close()
        except Exception:
            if exc is None:
                raise
            # The block's own error says what went wrong (often the budget's breach itself); a report of
            # the budget that failed after it must not take its place.
            logger.warning("reporting the budget of a block that failed failed too", exc_info=True)

    async def __aenter__(self) -> "BudgetScope":
        return self.__enter__()

    async def __aexit__(self, exc_type, exc, tb) -> None:
        self.__exit__(exc_type, exc, tb)

    def __repr__(self) -> str:
        given = ", ".join(f"{k}={v!r}" for k, v in self.limits.items() if v is not None)
        return f"Budget({given})"


class BudgetScope:
    """One opening of a Budget: effective limits (already tightened by the parent) and shared spend.

    `anchor` is how many agentic frames were open where the scope starts, so a frame's level in it is
    the chain's open agentic frames minus `anchor`: nothing needs to be set per frame to know it.
    """

    def __init__(self, budget: Budget, parent: Optional["BudgetScope"], anchor: int = 0):
        now = _clock()
        self.budget = budget
        self.parent = parent
        self.root: BudgetScope = parent.root if parent is not None else self
        self.anchor = anchor
        # Level d of this scope is level d + base_depth of the parent's.
        self.base_depth = anchor - parent.anchor if parent is not None else 0
        self._lock = parent._lock if parent is not None else threading.Lock()
        self._token = None
        self.started = now
        self.ended: Optional[float] = None
        self.depth_reached = 0
        self.llm_calls = 0
        self.tokens = 0
        self.cost_usd = 0.0
        self.unpriced_calls = 0
        self.reserved_calls = 0
        # On a root: the dearest call the tree has made, what a call in flight is counted as against a
        # money limit; and whether the first call of unknown cost under a money limit was logged.
        self.dearest_call = 0.0
        self.unpriced_logged = False
        # Set on a root when the tree's default budget (runtime.default_budget) was breached under it:
        # {limit name: (limit, spend name, spent)}, so that every later report of this scope still shows it.
        self.default_breach: dict[str, tuple] = {}
        self.max_depth = budget.max_depth
        self.max_llm_calls = budget.max_llm_calls
        self.max_tokens = budget.max_tokens
        self.max_cost_usd = budget.max_cost_usd
        self.deadline = now + budget.timeout_s if budget.timeout_s is not None else None
        if parent is not None:
            with self._lock:
                self._tighten_to(parent)

    def _tighten_to(self, parent: "BudgetScope") -> None:
        # Calls still in flight are not subtracted: they may be released, and every admission is
        # checked against the parent too, so the parent's own limit still holds.
        if parent.max_depth is not None:
            self.max_depth = _tighter(self.max_depth, max(parent.max_depth - self.base_depth, 0))
        if parent.max_llm_calls is not None:
            left = parent.max_llm_calls - parent.llm_calls
            self.max_llm_calls = _tighter(self.max_llm_calls, max(left, 0))
        if parent.max_tokens is not None:
            self.max_tokens = _tighter(self.max_tokens, max(parent.max_tokens - parent.tokens, 0))
        if parent.max_cost_usd is not None:
            self.max_cost_usd = _tighter(self.max_cost_usd, max(parent.max_cost_usd - parent.cost_usd, 0.0))
        self.deadline = _tighter(self.deadline, parent.deadline)

    @property
    def is_root(self) -> bool:
        return self.parent is None

    def chain(self) -> list["BudgetScope"]:
        """This scope and every enclosing one, outermost first."""
        scopes = []
        scope: Optional[BudgetScope] = self
        while scope is not None:
            scopes.append(scope)
            scope = scope.parent
        scopes.reverse()
        return scopes

    def limits(self) -> dict:
        timeout = None if self.deadline is None else round(self.deadline - self.started, 6)
        money = None if self.max_cost_usd is None else round(self.max_cost_usd, 6)
        return {"max_depth": self.max_depth, "max_llm_calls": self.max_llm_calls,
                "max_tokens": self.max_tokens, "timeout_s": timeout, "max_cost_usd": money}

    def snapshot(self) -> dict:
        with self._lock:
            end = self.ended if self.ended is not None else _clock()
            spend = {"depth": self.depth_reached, "llm_calls": self.llm_calls, "tokens": self.tokens,
                     "elapsed_s": round(end - self.started, 6), "cost_usd": round(self.cost_usd, 6),
                     "unpriced_calls": self.unpriced_calls}
            breaches = dict(self.default_breach)
        limits = self.limits()
        for limit_name, (limit, spend_name, spent) in breaches.items():
            limits[limit_name] = min(limit, limits[limit_name] or limit)
            spend[spend_name] = max(spend[spend_name], spent)
        return {"limits": limits, "spend": spend}

    def close(self, report: bool = True) -> None:
        """The block or the call that opened this scope ended; freeze elapsed time and report."""
        with self._lock:
            if self.ended is not None:
                return
            self.ended = _clock()
        if report and self.is_root:
            notify_recorder(self)

    def _started(self) -> None:
        if self.is_root:
            notify_recorder(self)

    def __repr__(self) -> str:
        return (f"<BudgetScope {self.limits()} spent {self.llm_calls} calls, {self.tokens} tokens, "
                f"${self.cost_usd:.6f}>")


# --- the hooks the agentic wrapper calls ------------------------------------------------------------

def admit_frame(frame) -> None:
    """Admit one agentic frame into the current budget (the frame is already on the chain).

    Raises BudgetExceeded, before the body runs, if a depth limit or a deadline would be crossed.
    Nothing is set, so there is nothing to undo when the frame ends.
    """
    scope = _current_budget.get()
    if scope is not None:
        _admit(scope, open_agentic_levels(), frame)


def enter_frame(frame, template: Budget):
    """Admit an agentic frame whose function carries `budget=`: open its scope (level 1 is this frame).

    Returns a token for `exit_frame`.
    """
    levels = open_agentic_levels()
    opened = template.open_scope(_current_budget.get(), levels - 1)
    try:
        _admit(opened, levels, frame)
    except BudgetExceeded:
        opened.close(report=False)  # never started; the breach report covers it
        raise
    opened._started()
    return _current_budget.set(opened), opened


def _admit(scope: BudgetScope, levels: int, frame) -> None:
    # A scope's limits are already tightened by all its ancestors, so the innermost scope alone
    # decides admission; the slow path below finds the widest limit crossed, for the message.
    depth = levels - scope.anchor
    if ((scope.max_depth is not None and depth > scope.max_depth)
            or (scope.deadline is not None and _clock() >= scope.deadline)):
        scopes = scope.chain()
        raise_breach(depth_breach(scopes, levels, frame) or deadline_breach(scopes, frame, _clock()))
    while scope is not None:  # raise `depth_reached`; the lock only when a new deepest level is hit
        depth = levels - scope.anchor
        if depth > scope.depth_reached:
            with scope._lock:
                if depth > scope.depth_reached:
                    scope.depth_reached = depth
        scope = scope.parent


def exit_frame(token) -> None:
    """Leave the frame entered by `enter_frame`, closing the scope it opened."""
    var_token, opened = token
    _current_budget.reset(var_token)
    opened.close()


# --- model calls: reserve, then commit or release ----------------------------------------------------

class Reservation:
    """One admitted model call. Exactly one of `commit(tokens, cost_usd)` or `release()` must follow."""

    __slots__ = ("scopes", "done")

    def __init__(self, scopes: list[BudgetScope]):
        self.scopes = scopes
        self.done = False

    def commit(self, tokens: int = 0, cost_usd: Optional[float] = 0.0, model: Optional[str] = None) -> None:
        """The call happened: count it, the tokens it used and its cost in USD (None: unknown, for an
        unpriced `model`) against every enclosing scope."""
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
            raise ValueError(f"Reservation.commit(tokens={tokens!r}): tokens must be an integer >= 0")
        if cost_usd is not None and (isinstance(cost_usd, bool) or not isinstance(cost_usd, (int, float))
                                     or not math.isfinite(cost_usd) or cost_usd < 0):
            raise ValueError(f"Reservation.commit(cost_usd={cost_usd!r}): cost_usd must be a number >= 0 or None")
        if self._settle(calls=1, tokens=tokens, cost_usd=cost_usd):
            limit = min(scope.max_cost_usd for scope in self.scopes if scope.max_cost_usd is not None)
            log_unpriced(model, f"the money budget max_cost_usd={limit:g}")

    def release(self) -> None:
        """The call failed (before or at the provider): give the slot back."""
        self._settle(calls=0, tokens=0, cost_usd=0.0)

    def _settle(self, calls: int, tokens: int, cost_usd: Optional[float]) -> bool:
        """Count the call; True when it is the tree's first of unknown cost under a money limit."""
        # Settling twice (a commit after a release, say) is a no-op, not double counting.
        root = self.scopes[0]
        with root._lock:
            if self.done:
                return False
            self.done = True
            for scope in self.scopes:
                scope.reserved_calls -= 1
                scope.llm_calls += calls
                scope.tokens += tokens
                if cost_usd is None:
                    scope.unpriced_calls += 1
                else:
                    scope.cost_usd += cost_usd
            if cost_usd is None:
                first = not root.unpriced_logged and any(s.max_cost_usd is not None for s in self.scopes)
                root.unpriced_logged = root.unpriced_logged or first
                return first
            root.dearest_call = max(root.dearest_call, cost_usd)
            return False


def reserve_llm_call(frame=None) -> Optional[Reservation]:
    """Admit one model call under every enclosing budget, atomically; None when no budget applies.

    Raises BudgetExceeded when the call would cross a limit: the call count (admitted calls still in
    flight included), tokens already at or over the maximum, money at or over it (calls in flight
    counted as the dearest call so far), or a passed deadline.
    """
    scope = _current_budget.get()
    if scope is None:
        return None
    frame = frame if frame is not None else _current_frame.get()
    scopes = scope.chain()
    with scope._lock:
        breach = deadline_breach(scopes, frame, _clock()) or spend_breach(scopes, frame)
        if breach is None:
            for each in scopes:
                each.reserved_calls += 1
    if breach is not None:
        raise_breach(breach)
    return Reservation(scopes)


def check_deadline(frame=None) -> None:
    """Raise BudgetExceeded(dimension="time") if any enclosing budget's deadline has passed."""
    scope = _current_budget.get()
    if scope is None:
        return
    frame = frame if frame is not None else _current_frame.get()
    breach = deadline_breach(scope.chain(), frame, _clock())
    if breach is not None:
        raise_breach(breach)


def time_left() -> Optional[float]:
    """Seconds until the nearest deadline of an enclosing budget (negative once passed); None if none."""
    scope = _current_budget.get()
    if scope is None:
        return None
    deadlines = [each.deadline for each in scope.chain() if each.deadline is not None]
    return min(deadlines) - _clock() if deadlines else None


def current_scope() -> Optional[BudgetScope]:
    """The innermost budget scope the current call runs under, or None."""
    return _current_budget.get()
