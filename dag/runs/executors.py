"""The embedded executor: runs in the server's own process, on a bounded pool of threads; and running one
session on the calling thread, as every executor does. The base class and the choice of executor by
`conf.EXECUTOR` are `dag.runs.executor_setting`'s."""
from __future__ import annotations

import atexit
import logging
import threading
import time
from collections import deque

from django.db import close_old_connections, connection, transaction

from ..models import Session
from ..thread_names import name_native_thread
from ..recording import write_path
from . import leases, lifecycle, stop
# Their old home: tests, dag.executor and the dotted paths of settings name them here.
from .executor_setting import EXECUTORS, Executor, executor_class, executor_path, get_executor  # noqa: F401

log = logging.getLogger(__name__)


_STOP = object()  # tells a worker thread to end
EXITED_DURING_RUN = "the process running this session exited before the run had stopped"
SUBMITTED_AFTER_SHUTDOWN = "the server was shutting down when this session was launched; run it again"


class InProcessExecutor(Executor):
    """The embedded default: runs in the server's own process on a bounded pool of threads.

    At most `workers` sessions run at once; later ones wait, queued, for a thread. A run stuck in code
    that no stop reaches (a read with no timeout) is ended for it by the cancel deadline or the reaper;
    its thread, still stuck, is then set aside and another takes its place, so written-off runs cannot
    use the pool up (at most `workers` threads are set aside; past that, sessions wait for one to come
    back). When the process exits, the runs still going are stopped (they end `interrupted`) and given
    `exit_grace_s` seconds to record that, so exit is not held up by a runaway run; a run that has not
    ended by then dies with the process, and its session is ended `interrupted` for it. Sessions still
    waiting for a thread are not started: they end `interrupted` too. The threads are daemon threads,
    so the interpreter does not wait for them before running `atexit` hooks, where all this happens.
    """

    def __init__(self, workers: int, *, exit_grace_s: float = 5.0):
        if workers < 1:
            raise ValueError(f"OPENPROGRAM_EXECUTOR_WORKERS must be at least 1, got {workers}")
        self.workers = workers
        self.exit_grace_s = exit_grace_s
        # All of the pool's state is kept under one lock, so that whether a queued session has a thread
        # to take it is known exactly (not from a count that a busy thread could leave behind).
        self._lock = threading.Lock()
        self._work_queued = threading.Condition(self._lock)
        self._queue: deque = deque()  # session ids waiting for a thread, and _STOP
        self._waiting = 0  # threads waiting for the queue
        self._threads: list[threading.Thread] = []  # the pool: at most `workers`
        self._set_aside: set[threading.Thread] = set()  # stuck in a written-off run, out of the pool
        self._running: dict[threading.Thread, str] = {}  # the session each busy thread took
        self._closed = False
        atexit.register(self._stop_runs_at_exit)
        leases.process_leases.add_lost_listener(self._set_aside_thread_of)

    @classmethod
    def from_settings(cls, settings) -> "InProcessExecutor":
        return cls(workers=settings.EXECUTOR_WORKERS)

    def submit(self, session_id) -> None:
        # After commit: the run's thread has its own connection and must see the session row.
        transaction.on_commit(lambda: self._enqueue(session_id))

    def _enqueue(self, session_id) -> None:
        with self._lock:
            closed = self._closed
            if not closed:
                self._start(session_id)
        if closed:
            # Launched as the process exits (or on a pool its settings replaced): no thread will take it,
            # and left queued it would count against its owner's active runs until the next start.
            log.warning("session %s was submitted to an in-process pool that was shut down", session_id)
            _end_interrupted([session_id], SUBMITTED_AFTER_SHUTDOWN)

    def _start(self, session_id) -> None:
        """Queue the session for a thread (under the lock), starting one if none is free."""
        self._put(session_id)
        self._grow()

    def _put(self, item) -> None:  # called with the lock held
        self._queue.append(item)
        self._work_queued.notify()

    def _grow(self) -> None:  # called with the lock held
        """Start a thread if more sessions wait than threads wait for them, and the pool has room."""
        if len(self._queue) > self._waiting and len(self._threads) < self.workers:
            thread = threading.Thread(target=self._work, daemon=True,
                                      name=f"openprogram-run-{len(self._threads) + len(self._set_aside)}")
            self._threads.append(thread)
            thread.start()

    def _take(self):
        """The next queued session (or _STOP) for the calling thread, waiting for one."""
        with self._lock:
            self._waiting += 1
            try:
                while not self._queue:
                    self._work_queued.wait()
                return self._queue.popleft()
            finally:
                self._waiting -= 1

    def _work(self) -> None:
        name_native_thread()
        me = threading.current_thread()
        while True:
            session_id = self._take()
            if session_id is _STOP:
                return
            with self._lock:
                self._running[me] = str(session_id)
            try:
                run_in_this_thread(session_id)
            finally:
                with self._lock:
                    del self._running[me]
                    replaced = me in self._set_aside
                    self._set_aside.discard(me)
            if replaced:
                return  # another thread took this one's place while it was stuck

    def _set_aside_thread_of(self, session_id: str) -> None:
        """The session was written off while its run goes on here (its lease lost: ended by the cancel
        deadline or the reaper): if that run's thread is one of the pool's, take it out and start
        another in its place. A run that is merely slow to notice its stop is set aside too; it ends
        soon, and its thread with it."""
        with self._lock:
            thread = next((t for t, running in self._running.items() if running == session_id), None)
            if thread is None or thread not in self._threads or self._closed:
                return
            if len(self._set_aside) >= self.workers:
                log.error("session %s was written off but its run is still stuck in thread %s; %d threads are "
                          "stuck already, so it keeps its place in the pool", session_id, thread.name,
                          len(self._set_aside))
                return
            self._threads.remove(thread)
            self._set_aside.add(thread)
            log.error("session %s was written off but its run is still stuck in thread %s (in code that no "
                      "stop reaches); it leaves the pool, so another thread can take its place", session_id,
                      thread.name)
            self._grow()  # at once if sessions wait; else the next launch starts it

    def shutdown(self, wait: bool = True) -> None:
        with self._lock:
            self._closed = True
            threads = list(self._threads)
            for _ in threads:
                self._put(_STOP)  # after the runs already queued: they still run
        atexit.unregister(self._stop_runs_at_exit)
        leases.process_leases.remove_lost_listener(self._set_aside_thread_of)
        if wait:
            for thread in threads:
                thread.join()

    def leave_runs_at_exit(self) -> None:
        """Give this process's runs no grace at exit: the one leaving (a second Ctrl-C) will not wait.
        Their sessions are ended `interrupted` as the process exits, as for runs that overstay the grace."""
        self.exit_grace_s = 0.0

    def _stop_runs_at_exit(self) -> None:
        with self._lock:
            self._closed = True
            never_started = [item for item in self._queue if item is not _STOP]
            self._queue.clear()
            for _ in self._threads:
                self._put(_STOP)  # ahead of nothing: no thread starts another run
        _end_interrupted(never_started, lifecycle.QUEUED_IN_DEAD_SERVER)
        if not any(thread.is_alive() for thread in self._threads):
            return
        stop.shut_down_local_runs()
        deadline = time.monotonic() + self.exit_grace_s
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        with self._lock:  # a run taken off the queue but not yet watched is not among the local runs
            taken = set(self._running.values())
        _end_interrupted(sorted(taken.union(stop.local_runs())), EXITED_DURING_RUN)  # they die with the process


def _end_interrupted(session_ids, error: str) -> None:
    """End each session `interrupted` at exit; one that cannot be ended (the database gone) is logged and
    left to the next start's recovery, and the others are still ended."""
    for session_id in session_ids:
        try:
            write_path.finish_session(session_id, Session.Status.INTERRUPTED, error=error)
        except Exception:
            log.exception("session %s could not be ended at exit; the next start ends it", session_id)


def run_in_this_thread(session_id) -> None:
    """Run the session on the calling (pool) thread, with a database connection of its own."""
    close_old_connections()
    try:
        lifecycle.run_session(session_id)
    except Exception:  # run_session records the run's own failures; this is a failure to record
        log.exception("session %s could not be run", session_id)
    except (SystemExit, KeyboardInterrupt) as exc:
        # Raised by the run's code (the session has ended); in a worker thread it cannot end the
        # process, so the thread keeps serving instead of dying quietly.
        log.warning("session %s raised %s in a worker thread; the thread goes on", session_id,
                    type(exc).__name__)
    finally:
        connection.close()
