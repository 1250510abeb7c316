"""Waiting on slow work without being stuck behind it: a stop or a deadline can end the wait.

Python cannot kill a thread, so slow work (an HTTP request, a tool with a timeout) runs in a daemon
thread and the caller waits on it in short slices, checking between slices whether to give up. Giving
up abandons the thread (the caller's `on_abandon` closes what it can, e.g. the HTTP client); a daemon
thread never holds the process open at exit.
"""
from __future__ import annotations

import contextvars
import threading
import time
from concurrent.futures import Future
from typing import Any, Callable, Optional

from .errors import CancelledError

POLL_INTERVAL_S = 0.05

# The flags of the callers that may give up on the work running in this context (an awaiting task of
# `Runtime.aexec` that was cancelled sets its flag): outermost first, any one set abandons the work.
_abandoned: contextvars.ContextVar[tuple] = contextvars.ContextVar("openprogram_abandoned", default=())


class WaitTimedOut(TimeoutError):
    """`wait` gave up on the work after its timeout (the work itself did not raise)."""


def spawn(fn: Callable, *args: Any) -> Future:
    """Run `fn(*args)` in a new daemon thread with a copy of the caller's context; return its Future."""
    future: Future = Future()
    context = contextvars.copy_context()

    def run() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            result = context.run(fn, *args)
        except BaseException as exc:  # handed to the waiter, who decides what it means
            future.set_exception(exc)
        else:
            future.set_result(result)

    threading.Thread(target=run, daemon=True, name=f"openprogram-{getattr(fn, '__name__', 'work')}").start()
    return future


def wait(future: Future, *, check: Optional[Callable[[], None]] = None, timeout: Optional[float] = None,
         on_abandon: Optional[Callable[[], None]] = None, poll: float = POLL_INTERVAL_S) -> Any:
    """The future's result, waiting at most `timeout` seconds and calling `check()` every `poll`.

    `check` raising (a stop: CancelledError) or the timeout (WaitTimedOut) abandons the work:
    `on_abandon()` runs and the exception propagates at once, without waiting for the thread.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        while True:
            slice_s = poll if check is not None else None
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise WaitTimedOut(f"gave up after {timeout:g}s")
                slice_s = remaining if slice_s is None else min(slice_s, remaining)
            try:
                return future.result(timeout=slice_s)
            except TimeoutError:
                if future.done():
                    # The work raised TimeoutError itself, or it finished just as the slice ran out:
                    # its own outcome either way, never the slice's timeout.
                    return future.result()
            if check is not None:
                check()
    except BaseException:
        if not future.done() and on_abandon is not None:
            on_abandon()
        raise


def sleep(seconds: float, check: Optional[Callable[[], None]] = None, poll: float = POLL_INTERVAL_S) -> None:
    """Sleep, but let `check()` end the sleep early by raising (a stop during a retry backoff)."""
    deadline = time.monotonic() + seconds
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return
        time.sleep(min(poll, remaining) if check is not None else remaining)
        if check is not None:
            check()


def run_abandonable(fn: Callable, flag: threading.Event, *args: Any, **kwargs: Any) -> Any:
    """`fn(*args, **kwargs)` in the current context, abandoned (see `check_abandoned`) once `flag` is set.

    For work run in a thread its caller may stop waiting for: the caller sets `flag`, and the work ends
    at its next model call instead of going on unseen.
    """
    _abandoned.set((*_abandoned.get(), flag))
    return fn(*args, **kwargs)


def abandonable() -> bool:
    """Whether some caller may abandon the work of this context (so it is worth checking)."""
    return bool(_abandoned.get())


def check_abandoned() -> None:
    """Raise CancelledError if a caller gave up on the work of this context."""
    for flag in _abandoned.get():
        if flag.is_set():
            raise CancelledError("abandoned: the task awaiting this work was cancelled")
