"""Coalescing of row updates for the live session list: at most one per session per interval.

A run writing thousands of nodes a second changes its list row as often; the list needs a few updates a
second. `Coalescer` decides, per key (a session id), whether a change goes out now, later (one trailing
update carries every change made meanwhile: the receiver reads the row when it is sent, so the last
value wins), or rides on an update already due. A final change (the run ended) always goes out at once.

Pure and clock-injected, so its decisions are tested without sleeping; `session_list_notify` drives it
from real time.
"""
from __future__ import annotations

import time
from typing import Callable, Hashable

SEND_NOW = 0.0
# Tracked keys before those idle for a whole interval are forgotten (they would send at once anyway).
PRUNE_AT = 1000


class Coalescer:
    """Per-key throttle with a trailing update. Not thread-safe: its caller holds a lock."""

    def __init__(self, interval_s: float, clock: Callable[[], float] = time.monotonic):
        self.interval_s = interval_s
        self.clock = clock
        self._sent_at: dict[Hashable, float] = {}
        self._due_at: dict[Hashable, float] = {}

    def offer(self, key: Hashable, *, final: bool = False) -> float | None:
        """A change of `key`: SEND_NOW (0.0), the seconds after which `take(key)` is to be called, or None
        when an update is already due and will carry this change."""
        now = self.clock()
        if final:  # the end of a run is never held back, and nothing is tracked for it afterwards
            self._due_at.pop(key, None)
            self._sent_at.pop(key, None)
            return SEND_NOW
        due = self._due_at.get(key)
        # A due update long overdue was lost (its event loop closed): this change takes its place.
        if due is not None and now < due + self.interval_s:
            return None
        sent = self._sent_at.get(key)
        if sent is None or now - sent >= self.interval_s:
            self._due_at.pop(key, None)
            self._sent_at[key] = now
            if len(self._sent_at) > PRUNE_AT:
                self._prune(now)
            return SEND_NOW
        self._due_at[key] = sent + self.interval_s
        return self._due_at[key] - now

    def take(self, key: Hashable) -> bool:
        """At the time `offer` named: True if an update of `key` is still due (it counts as sent now);
        False if a final update went out meanwhile."""
        if self._due_at.pop(key, None) is None:
            return False
        self._sent_at[key] = self.clock()
        return True

    def _prune(self, now: float) -> None:
        idle = [key for key, sent in self._sent_at.items()
                if now - sent >= self.interval_s and key not in self._due_at]
        for key in idle:
            del self._sent_at[key]
