"""The default bound on every tree of agentic calls: at most OPENPROGRAM_MAX_LLM_CALLS model calls.

A depth ceiling bounds depth, not cost; without this a model that keeps calling tools makes model calls
until someone notices. Every tree (the calls under one entry frame, across its threads and tasks) gets
`max_llm_calls` from OPENPROGRAM_MAX_LLM_CALLS (default 500; 0 turns the default off) and nothing else.
An explicit `Budget` still applies on top, so it can only tighten this.

It costs nothing at frame entry: the tally hangs on the entry frame and is made at the tree's first
model call, when the variable is read. A call in a thread that lost the caller's context (a bare
`threading.Thread`, `executor.submit`) starts a tree of its own, so it is still bounded.
"""
from __future__ import annotations

import os
import threading
from typing import Optional

from .context import Frame, _current_budget, _current_recorder, open_agentic_levels
from .errors import BudgetExceeded

ENV_VAR = "OPENPROGRAM_MAX_LLM_CALLS"
DEFAULT_MAX_LLM_CALLS = 500

_create_lock = threading.Lock()
_OFF = object()  # the tally of a tree whose default bound is turned off


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
                limit = default_llm_calls()
                tally = root._call_tally = CallTally(limit) if limit else _OFF
    return tally


def admit_default_call(frame: Optional[Frame]) -> Optional[CallTally]:
    """Count one model call made in `frame`'s tree; None outside agentic functions or when turned off.

    Raises BudgetExceeded(dimension="llm_calls") when the tree has made its limit of model calls.
    """
    if frame is None:
        return None
    tally = _tally_of(_entry_frame(frame))
    if tally is _OFF:
        return None
    with tally.lock:
        if tally.calls < tally.limit:
            tally.calls += 1
            return tally
    _raise_breach(tally, frame)


def _raise_breach(tally: CallTally, frame: Frame):
    path = frame.path()
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
