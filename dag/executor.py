"""The executors' old dotted path, kept so `OPENPROGRAM_EXECUTOR=dag.executor.InProcessExecutor` (the value
the README documented) still imports. They live in `dag.runs.executors`."""
from .runs.executors import Executor, InProcessExecutor, get_executor  # noqa: F401
