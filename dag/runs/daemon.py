"""A named daemon thread that a process runs at most once at a time, started on demand.

The reaper, the lease heartbeat, the stop watcher and the stop listener each want exactly one thread
per process, started by whatever first needs it and restarted if it has ended. `ensure()` does that
under a lock; a thread that ends by itself while its owner may call `ensure()` again (the stop watcher,
when no run is left to watch) calls `forget()` under the same lock, so the next `ensure()` starts a
fresh one instead of trusting a thread that is about to return.
"""
from __future__ import annotations

import threading
from typing import Callable, Optional

from ..thread_names import name_native_thread


class DaemonThread:
    def __init__(self, name: str, target: Callable[..., None], lock: Optional[threading.Lock] = None):
        self.name, self.target = name, target
        # A caller's own lock, when the thread's start or end must be atomic with the caller's state.
        self.lock = lock or threading.Lock()
        self._thread: Optional[threading.Thread] = None

    def ensure(self, *args) -> None:
        """Start the thread with `args` unless it is running (idempotent, cheap)."""
        with self.lock:
            self.ensure_locked(*args)

    def ensure_locked(self, *args) -> None:
        """`ensure()` for a caller already holding `lock`."""
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, args=args, name=self.name, daemon=True)
            self._thread.start()

    def _run(self, *args) -> None:
        name_native_thread()
        self.target(*args)

    def forget(self) -> None:
        """Called by the thread, holding `lock`, as it decides to end: the next `ensure()` starts anew."""
        self._thread = None
