"""Where runs execute: a small base class, chosen by dotted path in settings.OPENPROGRAM_EXECUTOR.

Like Django's cache and email backends, a new place to run sessions (Celery, a subprocess) is a new
subclass in its own module, named in the setting; nothing else changes.
"""
from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings
from django.core.signals import setting_changed
from django.db import close_old_connections, connection, transaction
from django.dispatch import receiver
from django.utils.module_loading import import_string

log = logging.getLogger(__name__)


class Executor:
    """Runs sessions somewhere. `submit` must return quickly; the run happens elsewhere."""

    # True when a stop requested in this process reaches the run without the database round trip.
    supports_local_stop = False

    def submit(self, session_id) -> None:
        """Run session `session_id` (already saved, status queued) once the current transaction commits."""
        raise NotImplementedError

    def shutdown(self, wait: bool = True) -> None:
        """Stop accepting work; with `wait`, return when submitted runs have ended."""


class InProcessExecutor(Executor):
    """The embedded default: runs in the server's own process on a bounded pool of threads.

    At most OPENPROGRAM_EXECUTOR_WORKERS sessions run at once; later ones wait, queued, for a thread.
    When the process exits, the runs still going are stopped (they end `interrupted`) so that exit is
    not held up by a runaway run.
    """

    supports_local_stop = True

    def __init__(self, workers: int | None = None):
        self.workers = settings.OPENPROGRAM_EXECUTOR_WORKERS if workers is None else workers
        if self.workers < 1:
            raise ValueError(f"OPENPROGRAM_EXECUTOR_WORKERS must be at least 1, got {self.workers}")
        self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="openprogram-run")
        # threading's exit hooks run newest first, so this one stops runs before the pool is joined.
        threading._register_atexit(self._stop_runs_at_exit)

    def submit(self, session_id) -> None:
        # After commit: the run's thread has its own connection and must see the session row.
        transaction.on_commit(lambda: self._pool.submit(_run_in_thread, session_id))

    def shutdown(self, wait: bool = True) -> None:
        self._pool.shutdown(wait=wait, cancel_futures=True)

    @staticmethod
    def _stop_runs_at_exit() -> None:
        from . import stop

        stop.stop_local_runs(stop.SHUTDOWN)


def _run_in_thread(session_id) -> None:
    from .lifecycle import run_session

    close_old_connections()
    try:
        run_session(session_id)
    except Exception:  # run_session records the run's own failures; this is a failure to record
        log.exception("session %s could not be run", session_id)
    finally:
        connection.close()


_executor: Executor | None = None
_executor_lock = threading.Lock()


@receiver(setting_changed)
def _forget_executor(setting, **kwargs) -> None:
    """Build the executor anew after its settings change (tests' override_settings)."""
    global _executor
    if setting in ("OPENPROGRAM_EXECUTOR", "OPENPROGRAM_EXECUTOR_WORKERS"):
        with _executor_lock:
            _executor = None  # runs already submitted to the old one finish there


def get_executor() -> Executor:
    """The process's executor, built on first use from settings.OPENPROGRAM_EXECUTOR."""
    global _executor
    with _executor_lock:
        if _executor is None:
            path = settings.OPENPROGRAM_EXECUTOR
            try:
                cls = import_string(path)
            except ImportError as exc:
                raise ImportError(f"OPENPROGRAM_EXECUTOR={path!r} cannot be imported: {exc}") from exc
            if not (isinstance(cls, type) and issubclass(cls, Executor)):
                raise TypeError(f"OPENPROGRAM_EXECUTOR={path!r} is not a dag.runs.executors.Executor subclass")
            _executor = cls()
        return _executor
