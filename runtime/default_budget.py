"""The default bound on every tree of agentic calls: at most OPENPROGRAM_MAX_LLM_CALLS model calls.

A depth ceiling bounds depth, not cost; without this a model that keeps calling tools makes model calls
until someone notices. Every tree (the calls under one entry frame, across its threads and tasks) gets
`max_llm_calls` from OPENPROGRAM_MAX_LLM_CALLS (default 500; 0 turns the default off) and nothing else.
An explicit `Budget` still applies on top, so it can only tighten this.

It costs nothing at frame entry: the tally hangs on the entry frame and is made at the tree's first
model call, when the variable is read. A call in a thread that lost the caller's context (a bare
`threading.Thread`, `executor.submit`) starts a tree of its own, so it is still bounded.

A model loop run outside any agentic function (a top-level `Runtime.exec` or `llm`) is a tree too
(`open_frameless_tree`): its own model calls, and those of every agentic call its tools start, share one
tally. Without it, each tool call would start a tree with a whole limit of its own, and a model that
fans out would multiply the bound.
"""
from __future__ import annotations

import os
import threading
from contextvars import ContextVar
from typing import Optional

from .context import Frame, _current_budget, _current_recorder, current_frame, open_agentic_levels
from .errors import BudgetExceeded

ENV_VAR = "OPENPROGRAM_MAX_LLM_CALLS"
DEFAULT_MAX_LLM_CALLS = 500

_create_lock = threading.Lock()
_OFF = object()  # the tally of a tree whose default bound is turned off

# The frameless model loop the current call runs under (see `open_frameless_tree`), or None.
_frameless_tree: ContextVar[Optional["_FramelessTree"]] = ContextVar("openprogram_frameless_tree", default=None)


def default_llm_calls() -> int:
    """The default model-call limit per tree from OPENPROGRAM_MAX_LLM_CALLS (0: no default bound)."""
    raw = os.environ.get(ENV_VAR, "").strip()
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


class CallTally:
    """Model calls admitted in one tree, against its limit. Admission is atomic under `lock`."""

    __slots__ = ("limit", "calls", "tokens", "lock")

    def __init__(self, limit: int):
        self.limit = limit
        self.calls = 0
        self.tokens = 0
        self.lock = threading.Lock()

    def release(self) -> None:
        """The admitted call failed (before or at the provider): give its slot back."""
        with self.lock:
            self.calls -= 1

    def commit(self, tokens: int) -> None:
        with self.lock:
            self.tokens += tokens


def _new_tally():
    limit = default_llm_calls()
    return CallTally(limit) if limit else _OFF


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

    Raises BudgetExceeded(dimension="llm_calls") when the tree has made its limit of model calls.
    """
    tally = _frameless_tally() if frame is None else _tally_of(_entry_frame(frame))
    if tally is None or tally is _OFF:
        return None
    with tally.lock:
        if tally.calls < tally.limit:
            tally.calls += 1
            return tally
    _raise_breach(tally, frame)


def _raise_breach(tally: CallTally, frame: Optional[Frame]):
    path = frame.path() if frame is not None else ["runtime.exec"]
    observed = tally.limit + 1
    error = BudgetExceeded(
        f"default budget exceeded: {ENV_VAR}={tally.limit}, this would be model call {observed} of the "
        f"tree at {' → '.join(path)}; make fewer model calls (a model that keeps calling tools is a "
        f"runaway), or raise {ENV_VAR} (0 turns the default off)",
        dimension="llm_calls", limit=tally.limit, observed=observed, path=path)
    recorder = _current_recorder.get()
    if recorder is not None:
        recorder.budget_updated(*_gauge(tally))
    raise error


def _gauge(tally: CallTally) -> tuple[dict, dict]:
    """What the budget gauge shows at a breach of the default: an explicit root budget's state, if one
    is open (noted on it, so its later reports show the breach too), else the default's alone."""
    scope = _current_budget.get()
    if scope is not None:
        root = scope.root
        with root._lock:
            root.default_breach = (tally.limit, tally.calls)
        snapshot = root.snapshot()
        return snapshot["limits"], snapshot["spend"]
    limits = {"max_depth": None, "max_llm_calls": tally.limit, "max_tokens": None, "timeout_s": None}
    spend = {"depth": open_agentic_levels(), "llm_calls": tally.calls, "tokens": tally.tokens, "elapsed_s": 0.0}
    return limits, spend
