"""Which executor runs this process's launches: the base class, the names `OPENPROGRAM_EXECUTOR` accepts,
and the process's one instance.

Like Django's cache and email backends, a new place to run sessions (Celery, a subprocess) is a new
subclass in its own module, named in the setting (by a short name from EXECUTORS, or its dotted path). It
receives its settings as constructor parameters; `from_settings` is the one place that reads them from
`dag.conf`. The executors themselves are imported by their dotted path, so this module imports none of them.
"""
from __future__ import annotations

import threading

from django.utils.module_loading import import_string

from ..conf import conf

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

    # Whether `resend` can send a queued session again: the reaper does it for executors that hand runs
    # to a broker that may lose them (Celery's).
    supports_resend = False

    @classmethod
    def from_settings(cls, settings) -> "Executor":
        """The executor configured by `settings` (`dag.conf.conf`); a subclass with parameters reads its own."""
        return cls()

    def submit(self, session_id) -> None:
        """Run session `session_id` (already saved, status queued) once the current transaction commits."""
        raise NotImplementedError

    def shutdown(self, wait: bool = True) -> None:
        """Stop accepting work; with `wait`, return when submitted runs have ended."""

    def resend(self, session_ids) -> None:
        """Send again sessions still queued long after they were sent (`supports_resend` executors)."""
        raise NotImplementedError


def executor_class(name: str) -> type[Executor]:
    """The Executor subclass OPENPROGRAM_EXECUTOR's value `name` stands for; ImportError or TypeError
    naming the value if there is none."""
    try:
        cls = import_string(executor_path(name))
    except ImportError as exc:
        raise ImportError(f"OPENPROGRAM_EXECUTOR={name!r} cannot be imported: {exc} (use "
                          f"{' or '.join(EXECUTORS)}, or a dotted path to an Executor subclass)") from exc
    if not (isinstance(cls, type) and issubclass(cls, Executor)):
        raise TypeError(f"OPENPROGRAM_EXECUTOR={name!r} is not a dag.runs.executors.Executor subclass")
    return cls


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
            cls = executor_class(conf.EXECUTOR)
            replaced, _executor, _built_from = _executor, cls.from_settings(conf), conf.generation
            if replaced is not None:
                replaced.shutdown(wait=False)
        return _executor
