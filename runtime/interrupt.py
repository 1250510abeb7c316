"""Waiting on slow work without being stuck behind it: a stop or a deadline can end the wait.

Python cannot kill a thread, so slow work (an HTTP request, a tool with a timeout) runs in a daemon
thread and the caller waits on it in short slices, checking between slices whether to give up. Giving
up abandons the thread (the caller's `on_abandon` closes what it can, e.g. the HTTP client); a daemon
thread never holds the process open at exit.

A check that only changes its answer when a `Bell` rings (a `BellCheck`: the web app's stop and pause
ring their run's bell) is not polled: the wait blocks until the bell rings, the work ends or the check's
own deadline comes, so hundreds of runs waiting on their models cost no CPU.
"""
from __future__ import annotations

import contextvars
import threading
import time
from concurrent.futures import Future
from typing import Any, Callable, Optional

from .errors import CancelledError

POLL_INTERVAL_S = 0.05
# The longest a wait on a bell goes without calling its check. Whatever the check reads rings the bell,
# so this only bounds the cost of a ring that was missed.
BELL_WAKE_S = 5.0

# The flags of the callers that may give up on the work running in this context (an awaiting task of
# `Runtime.aexec` that was cancelled sets its flag): outermost first, any one set abandons the work.
_abandoned: contextvars.ContextVar[tuple] = contextvars.ContextVar("openprogram_abandoned", default=())


class WaitTimedOut(TimeoutError):
    """`wait` gave up on the work after its timeout (the work itself did not raise)."""


class Bell:
    """Rung when something a run's checks read may have changed (a stop, a pause asked for).

    It counts its rings: a waiter reads the count before its check and waits only while the count is
    unchanged, so a ring during the check is never lost, and a ring wakes every waiter of the run.
    """

    def __init__(self) -> None:
        self._rings = 0
        self._rung = threading.Condition(threading.Lock())

    def ring(self) -> None:
        with self._rung:
            self._rings += 1
            self._rung.notify_all()

    def rings(self) -> int:
        return self._rings

    def wait(self, rings: int, timeout: float) -> None:
        """Block until the bell has rung more than `rings` times, or `timeout` seconds."""
        with self._rung:
            if self._rings == rings:
                self._rung.wait(timeout)


_bell: contextvars.ContextVar[Optional[Bell]] = contextvars.ContextVar("openprogram_bell", default=None)


def use_bell(bell: Bell) -> contextvars.Token:
    """Make `bell` the current context's (a run's): checks built in it may wait on the bell. Returns the
    token for `reset_bell`."""
    return _bell.set(bell)


def reset_bell(token: contextvars.Token) -> None:
    _bell.reset(token)


def current_bell() -> Optional[Bell]:
    return _bell.get()


class BellCheck:
    """A check whose answer changes only when `bell` rings, or at the monotonic time `until` (a deadline
    it enforces; None: none): `wait` and `sleep` call it then instead of every poll."""

    __slots__ = ("check", "bell", "until")

    def __init__(self, check: Callable[[], None], bell: Bell, until: Optional[float] = None):
        self.check, self.bell, self.until = check, bell, until

    def __call__(self) -> None:
        self.check()

    def slice_s(self) -> float:
        """How long a wait may go before calling the check again."""
        if self.until is None:
            return BELL_WAKE_S
        return max(0.0, min(BELL_WAKE_S, self.until - time.monotonic()))


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
    """The future's result, waiting at most `timeout` seconds and calling `check()` every `poll` (a
    BellCheck: when its bell rings, or by its own deadline).

    `check` raising (a stop: CancelledError) or the timeout (WaitTimedOut) abandons the work:
    `on_abandon()` runs and the exception propagates at once, without waiting for the thread.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    on_bell = check if isinstance(check, BellCheck) else None
    if on_bell is not None:
        future.add_done_callback(lambda _: on_bell.bell.ring())  # the wait below ends with the work
    rings = on_bell.bell.rings() if on_bell is not None else 0
    try:
        while True:
            slice_s = _slice(check, poll)
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise WaitTimedOut(f"gave up after {timeout:g}s")
                slice_s = remaining if slice_s is None else min(slice_s, remaining)
            if on_bell is not None:
                on_bell.bell.wait(rings, slice_s)
                if future.done():
                    return future.result()
                rings = on_bell.bell.rings()
            else:
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
    """Sleep, but let `check()` end the sleep early by raising (a stop during a retry backoff): a wait
    for work that never ends, given up after `seconds`."""
    try:
        wait(Future(), check=check, timeout=seconds, poll=poll)
    except WaitTimedOut:
        return


def _slice(check: Optional[Callable[[], None]], poll: float) -> Optional[float]:
    """The longest a wait goes between calls of `check`: None (no check) is as long as the work takes."""
    if check is None:
        return None
    return check.slice_s() if isinstance(check, BellCheck) else poll


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
