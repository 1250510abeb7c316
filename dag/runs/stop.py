"""Stopping a run: persist the request, then make the run's next function entry or model call raise.

A stop is written to the session row first (`cancel_requested`), so it survives a stop pressed before the
run started and reaches a run in another process. A run in this process is signalled at once through
an in-memory event; runs elsewhere learn of it from one watcher thread per process that polls the flag
for all of its active runs together. The pre-invocation hook itself only reads that event, so it adds no
database query to a call (and works inside async functions, where the ORM may not be used).

Hooks are process-global, so the hook acts only on a call made in a run's own context: `watch()` puts the
run's StopSignal in a ContextVar that its calls (and the threads and tasks they copy context into) see.
The hook is installed while at least one run is watched, and removed when the last one ends.
"""
from __future__ import annotations

import logging
import threading
import time
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator, Optional

from django.db import connection

from runtime import CancelledError, add_pre_invocation_hook, remove_pre_invocation_hook

from ..models import Session

log = logging.getLogger(__name__)

# How often the watcher reads the cancel flags of this process's runs: the worst-case latency of a stop
# requested from another process (a stop in this process is immediate).
POLL_INTERVAL_S = 0.2

STOPPED = "stopped"
SHUTDOWN = "shutdown"


class StopSignal:
    """The stop state of one run in this process."""

    def __init__(self, session_id):
        self.session_id = str(session_id)
        self.reason: Optional[str] = None  # STOPPED (by request) or SHUTDOWN (the process is exiting)
        self._event = threading.Event()
        self._lock = threading.Lock()

    @property
    def is_set(self) -> bool:
        return self._event.is_set()

    def set(self, reason: str = STOPPED) -> None:
        with self._lock:
            if self._event.is_set():
                return
            self.reason = reason  # before the event: whoever sees it set reads the reason
            self._event.set()

    def raise_if_set(self) -> None:
        if self._event.is_set():
            raise CancelledError(f"session {self.session_id} was stopped"
                                 + (" because the server is shutting down" if self.reason == SHUTDOWN else ""))


_current_signal: ContextVar[Optional[StopSignal]] = ContextVar("openprogram_stop_signal", default=None)
_active: dict[str, StopSignal] = {}
_active_lock = threading.Lock()
_watcher: Optional[threading.Thread] = None
_watched = 0  # runs inside watch() in this process


def _stop_hook(event) -> None:
    signal = _current_signal.get()
    if signal is not None:
        signal.raise_if_set()


@contextmanager
def watch(session_id) -> Iterator[StopSignal]:
    """Make calls in this block stop when session `session_id` is stopped."""
    signal = StopSignal(session_id)
    global _watched
    with _active_lock:
        _active[signal.session_id] = signal
        _watched += 1
        if _watched == 1:  # the hook is installed only while some run is watched: no cost otherwise
            add_pre_invocation_hook(_stop_hook)
    _ensure_watcher()
    token = _current_signal.set(signal)
    try:
        # A stop persisted before the signal was registered (between a run's claim and here) found
        # nothing to signal, and the watcher may poll only after the run's first calls; any later stop
        # finds the signal registered.
        if Session.objects.filter(pk=signal.session_id, cancel_requested=True).exists():
            signal.set(STOPPED)
        yield signal
    finally:
        _current_signal.reset(token)
        with _active_lock:
            if _active.get(signal.session_id) is signal:
                del _active[signal.session_id]
            _watched -= 1
            if _watched == 0:
                remove_pre_invocation_hook(_stop_hook)


def _ensure_watcher() -> None:
    global _watcher
    with _active_lock:
        if _watcher is not None and _watcher.is_alive():
            return
        _watcher = threading.Thread(target=_watch_flags, name="openprogram-stop-watcher", daemon=True)
        _watcher.start()


def _watch_flags() -> None:
    """Signal this process's runs whose stop was requested elsewhere; exits when none is active."""
    global _watcher
    try:
        while True:
            time.sleep(POLL_INTERVAL_S)
            with _active_lock:
                pending = {sid: sig for sid, sig in _active.items() if not sig.is_set}
                if not _active:
                    _watcher = None
                    return
            if not pending:
                continue
            try:
                # One connection for the watcher's life (not one per poll); dropped only on a failure.
                stopped = Session.objects.filter(pk__in=list(pending), cancel_requested=True).values_list("pk", flat=True)
                for session_id in stopped:
                    pending[str(session_id)].set(STOPPED)
            except Exception:  # a database hiccup must not end the watcher; the next poll reconnects
                log.exception("stop watcher could not read cancel flags")
                connection.close()
    finally:
        connection.close()


def signal_local(session_id, reason: str = STOPPED) -> bool:
    """Signal the run of `session_id` if it runs in this process; True if it does."""
    with _active_lock:
        signal = _active.get(str(session_id))
    if signal is None:
        return False
    signal.set(reason)
    return True


def stop_local_runs(reason: str = SHUTDOWN) -> int:
    """Signal every run in this process (e.g. on shutdown); returns how many."""
    with _active_lock:
        signals = list(_active.values())
    for signal in signals:
        signal.set(reason)
    return len(signals)
