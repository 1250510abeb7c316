"""Pre-invocation hooks: run at the top of every agentic call and before every model call.

A hook is a callable taking one `HookEvent`-like argument (the frame being entered, or the model call
about to be made). Raising `runtime.CancelledError` aborts it; that is how the stop button works.

The hooks are kept in a tuple that is replaced on change (copy-on-write), so the hot path reads one
global and iterates nothing when no hook is installed.
"""
from __future__ import annotations

import threading
from typing import Callable

from .context import _current_frame

_lock = threading.Lock()
_hooks: tuple[Callable, ...] = ()


def add_pre_invocation_hook(hook: Callable) -> None:
    """Install `hook`; adding the same hook twice keeps one copy."""
    global _hooks
    with _lock:
        if hook not in _hooks:
            _hooks = _hooks + (hook,)


def remove_pre_invocation_hook(hook: Callable) -> None:
    """Remove `hook`; removing a hook that is not installed does nothing."""
    global _hooks
    with _lock:
        _hooks = tuple(h for h in _hooks if h is not hook and h != hook)


def installed_hooks() -> tuple[Callable, ...]:
    return _hooks


def run_pre_invocation_hooks(event) -> None:
    """Call every installed hook with `event`; exceptions (CancelledError above all) propagate."""
    for hook in _hooks:
        hook(event)


def checkpoint() -> None:
    """Let a stop act here, inside long-running code of a tool (a loop, a long wait).

    Runs the pre-invocation hooks with the current frame, so a stopped run raises CancelledError at
    this point instead of at the next function entry or model call. Free when no hook is installed.
    """
    if _hooks:
        run_pre_invocation_hooks(_current_frame.get())
