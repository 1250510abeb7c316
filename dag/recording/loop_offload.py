"""Running ORM work from a thread that is running an event loop, where Django refuses it.

Async agentic functions call the recorder from inside their event loop (a worker thread's
`asyncio.run`). `LoopOffload.run` calls straight through anywhere else; inside a loop it hands the
call to a private thread and waits for it, so the loop is blocked for one short write, exactly as a
sync function would be, and events keep their order.

The private thread holds a database connection, so it ends with `close()`, or when its owner is
garbage-collected: a forgotten connection keeps PostgreSQL from dropping a test database.
"""
from __future__ import annotations

import asyncio
import threading
import weakref
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Optional

from django.db import connections

from ..thread_names import name_native_thread


def _stop(executor: ThreadPoolExecutor) -> Future:
    done = executor.submit(connections.close_all)
    # No waiting here: this may run in the private thread itself, when it drops the last reference.
    executor.shutdown(wait=False)
    return done


class LoopOffload:
    def __init__(self):
        self._executor: Optional[ThreadPoolExecutor] = None
        self._finalizer: Optional[weakref.finalize] = None
        self._lock = threading.Lock()

    def run(self, call: Callable, *args, **kwargs) -> Any:
        # `_get_running_loop` answers None off a loop where `get_running_loop` raises: this is on every
        # recorded call's path, and raising and catching costs more than the rest of the check.
        if asyncio._get_running_loop() is None:
            return call(*args, **kwargs)
        return self._thread().submit(call, *args, **kwargs).result()

    def _thread(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dag-recorder",
                                                    initializer=name_native_thread)
                self._finalizer = weakref.finalize(self, _stop, self._executor)
                self._finalizer.atexit = False  # at exit the executor already refuses new work
            return self._executor

    def close(self) -> None:
        """End the private thread (if one was started) after closing its database connection."""
        with self._lock:
            finalizer, self._executor, self._finalizer = self._finalizer, None, None
        if finalizer is not None and finalizer.alive:
            finalizer().result()
