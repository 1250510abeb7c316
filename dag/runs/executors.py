"""Where runs execute: a small base class, chosen by name or dotted path in `conf.EXECUTOR`.

Like Django's cache and email backends, a new place to run sessions (Celery, a subprocess) is a new
subclass in its own module, named in the setting (by a short name from EXECUTORS, or its dotted path). It receives its settings as constructor parameters;
`from_settings` is the one place that reads them from `dag.conf`.
"""
from __future__ import annotations

import atexit
import logging
import queue
import threading
import time

from django.db import close_old_connections, connection, transaction
from django.utils.module_loading import import_string

from ..conf import conf
from ..models import Session
from ..recording import write_path
from . import lifecycle, stop

log = logging.getLogger(__name__)


# The short names OPENPROGRAM_EXECUTOR accepts; any other value is a dotted path.
EXECUTORS = {
    "inprocess": "dag.runs.executors.InProcessExecutor",
    "celery": "dag.runs.celery_executor.CeleryExecutor",
}


def executor_path(name: str) -> str:
    """The dotted path OPENPROGRAM_EXECUTOR's value stands for."""
    return EXECUTORS.get(name.strip().lower(), name)


class Executor:
    """Runs sessions somewhere. `submit` must return quickly; the run happens elsewhere."""

    @classmethod
    def from_settings(cls, settings) -> "Executor":
        """The executor configured by `settings` (`dag.conf.conf`); a subclass with parameters reads its own."""
        return cls()

    def submit(self, session_id) -> None:
        """Run session `session_id` (already saved, status queued) once the current transaction commits."""
        raise NotImplementedError

    def shutdown(self, wait: bool = True) -> None:
        """Stop accepting work; with `wait`, return when submitted runs have ended."""


_STOP = object()  # tells a worker thread to end
EXITED_DURING_RUN = "the process running this session exited before the run had stopped"
SUBMITTED_AFTER_SHUTDOWN = "the server was shutting down when this session was launched; run it again"


class InProcessExecutor(Executor):
    """The embedded default: runs in the server's own process on a bounded pool of threads.

    At most `workers` sessions run at once; later ones wait, queued, for a thread. When the process
    exits, the runs still going are stopped (they end `interrupted`) and given `exit_grace_s` seconds to
    record that, so exit is not held up by a runaway run; a run that has not ended by then dies with
    the process, and its session is ended `interrupted` for it. Sessions still waiting for a thread are
    not started: they end `interrupted` too. The threads are daemon threads, so the interpreter does not
    wait for them before running `atexit` hooks, where all this happens.
    """

    def __init__(self, workers: int, *, exit_grace_s: float = 5.0):
        if workers < 1:
            raise ValueError(f"OPENPROGRAM_EXECUTOR_WORKERS must be at least 1, got {workers}")
        self.workers = workers
        self.exit_grace_s = exit_grace_s
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._idle = threading.Semaphore(0)  # released by a thread that finished a run and waits again
        self._lock = threading.Lock()
        self._closed = False
        atexit.register(self._stop_runs_at_exit)

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
        self._queue.put(session_id)
        if self._idle.acquire(blocking=False):
            return  # a waiting thread takes it
        if len(self._threads) < self.workers:
            thread = threading.Thread(target=self._work, name=f"openprogram-run-{len(self._threads)}",
                                      daemon=True)
            self._threads.append(thread)
            thread.start()

    def _work(self) -> None:
        while True:
            session_id = self._queue.get()
            if session_id is _STOP:
                return
            run_in_this_thread(session_id)
            self._idle.release()

    def shutdown(self, wait: bool = True) -> None:
        with self._lock:
            self._closed = True
            threads = list(self._threads)
        for _ in threads:
            self._queue.put(_STOP)  # after the runs already queued: they still run
        atexit.unregister(self._stop_runs_at_exit)
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
            never_started = self._take_queued()
            for _ in self._threads:
                self._queue.put(_STOP)  # ahead of nothing: no thread starts another run
        _end_interrupted(never_started, lifecycle.QUEUED_IN_DEAD_SERVER)
        if not any(thread.is_alive() for thread in self._threads):
            return
        stop.stop_local_runs(stop.SHUTDOWN)
        deadline = time.monotonic() + self.exit_grace_s
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        _end_interrupted(stop.local_runs(), EXITED_DURING_RUN)  # they die with the process

    def _take_queued(self) -> list:
        taken = []
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return taken
            if item is not _STOP:
                taken.append(item)


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


_executor: Executor | None = None
_built_from: int | None = None  # the settings' generation the current executor was built from
_executor_lock = threading.Lock()


def get_executor() -> Executor:
    """The process's executor, built from `conf.EXECUTOR` on first use and again after settings changed.

    Runs already submitted to a replaced executor finish there.
    """
    global _executor, _built_from
    with _executor_lock:
        if _executor is None or _built_from != conf.generation:
            name = conf.EXECUTOR
            try:
                cls = import_string(executor_path(name))
            except ImportError as exc:
                raise ImportError(f"OPENPROGRAM_EXECUTOR={name!r} cannot be imported: {exc} (use "
                                  f"{' or '.join(EXECUTORS)}, or a dotted path to an Executor subclass)") from exc
            if not (isinstance(cls, type) and issubclass(cls, Executor)):
                raise TypeError(f"OPENPROGRAM_EXECUTOR={name!r} is not a dag.runs.executors.Executor subclass")
            replaced, _executor, _built_from = _executor, cls.from_settings(conf), conf.generation
            if replaced is not None:
                replaced.shutdown(wait=False)
        return _executor
