"""Pre-invocation hooks: run at the top of every decorated call (agentic or leaf) and before every model call.

A hook takes either no argument (the reference implementation's shape: `def stop_hook(): raise
CancelledError(...)`) or one: the event, i.e. the frame being entered or the `ModelCall` about to be
made. Which one is decided once, when the hook is added, from its signature. Raising
`runtime.CancelledError` aborts the call; that is how the stop button works.

The hooks are kept in a tuple that is replaced on change (copy-on-write), so the hot path reads one
global and iterates nothing when no hook is installed.

A hook added with `rings_bell=True` promises to change its answer only after ringing the current
run's `runtime.interrupt.Bell`; while every installed hook does, a model call in flight waits on the
bell instead of polling the hooks (`runtime.interrupt.BellCheck`). A hook added while such a call
waits is first called within `interrupt.BELL_WAKE_S`.
"""
from __future__ import annotations

import inspect
import threading
from typing import Callable

from .context import _current_frame

_lock = threading.Lock()
# What the hot path calls, each taking the event; `_added` holds the hooks as given, in the same order.
_hooks: tuple[Callable, ...] = ()
_added: tuple[Callable, ...] = ()
# The hooks of `_added` that ring the run's bell when their answer changes.
_ringing: tuple[Callable, ...] = ()


def _takes_no_event(hook: Callable) -> bool:
    """True for a hook with no positional parameter at all (`def hook(): ...`); one with any, optional or
    `*args`, gets the event, and so does one whose signature cannot be read. A required keyword-only
    parameter, or a second required positional one, could never be filled, so they are refused here
    rather than failing at every call."""
    try:
        parameters = list(inspect.signature(hook).parameters.values())
    except (TypeError, ValueError):
        return False
    required_keywords = [p.name for p in parameters if p.kind is p.KEYWORD_ONLY and p.default is p.empty]
    required_positional = [p.name for p in parameters
                           if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty]
    if required_keywords or len(required_positional) > 1:
        unfillable = required_keywords or required_positional[1:]
        raise TypeError(f"pre-invocation hook {hook!r} has required parameter(s) {', '.join(unfillable)} "
                        f"beyond the event; a hook takes no argument, or the event")
    return not any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL) for p in parameters)


def _event_taking(hook: Callable) -> Callable:
    if not _takes_no_event(hook):
        return hook

    def without_event(_event) -> None:
        hook()
    return without_event


def add_pre_invocation_hook(hook: Callable, *, rings_bell: bool = False) -> None:
    """Install `hook` (taking no argument, or the event); adding the same hook twice keeps one copy.

    `rings_bell`: the hook raises (or blocks) only after ringing the run's bell, so a wait need not
    poll it (see the module's docstring)."""
    global _hooks, _added, _ringing
    if not callable(hook):
        raise TypeError(f"a pre-invocation hook must be callable, got {hook!r}")
    with _lock:
        if hook not in _added:
            _added = _added + (hook,)
            _hooks = _hooks + (_event_taking(hook),)
            if rings_bell:
                _ringing = _ringing + (hook,)


def remove_pre_invocation_hook(hook: Callable) -> None:
    """Remove `hook`; removing a hook that is not installed does nothing."""
    global _hooks, _added, _ringing
    with _lock:
        kept = [(given, called) for given, called in zip(_added, _hooks) if given is not hook and given != hook]
        _added = tuple(given for given, _ in kept)
        _hooks = tuple(called for _, called in kept)
        _ringing = tuple(given for given in _ringing if given in _added)


def all_ring_bells() -> bool:
    """Whether every installed hook rings the run's bell when its answer changes."""
    ringing = _ringing
    return all(hook in ringing for hook in _added)


def installed_hooks() -> tuple[Callable, ...]:
    """The installed hooks, as they were added."""
    return _added


def run_pre_invocation_hooks(event) -> None:
    """Call every installed hook (with `event` if it takes one); exceptions (CancelledError above all)
    propagate."""
    for hook in _hooks:
        hook(event)


def checkpoint() -> None:
    """Let a stop act here, inside long-running code of a tool (a loop, a long wait).

    Runs the pre-invocation hooks with the current frame, so a stopped run raises CancelledError at
    this point instead of at the next function entry or model call. Free when no hook is installed.
    """
    if _hooks:
        run_pre_invocation_hooks(_current_frame.get())
