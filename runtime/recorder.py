"""The recorder seam: how a run's DAG gets written without the runtime knowing where to.

The runtime calls these methods; the web app (`dag.recorder`) implements them on the ORM. With no
recorder installed (a standalone run) the runtime skips every call, so recording costs nothing.

Install one for a block of code with `use_recorder(recorder)`; it is held in a ContextVar, so two runs
in two threads of one process record into their own sessions.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator, Optional

from .context import Frame, _current_recorder


class Recorder:
    """Base class. Every method is a no-op; subclasses override what they store.

    Statuses passed to `function_exited`: "completed", "error", "cancelled".
    `function_refused` is for a call the guard or a budget turned away before its body ran:
    it gets a node of its own with status "refused" and the error text.
    """

    def function_entered(self, frame: Frame) -> None:
        """A code frame started. Set `frame.node` to whatever identifies its node."""

    def function_exited(self, frame: Frame, status: str, output: Any = None,
                        error: Optional[BaseException] = None) -> None:
        """The frame's call ended; backfill its node."""

    def function_refused(self, frame: Frame, error: BaseException) -> None:
        """The frame's call was refused before its body ran."""

    def llm_started(self, frame: Optional[Frame], request: dict) -> Any:
        """A model call is about to be sent. `request` holds "system", "messages", "tools", "model".

        Returns a handle passed back to `llm_finished`.
        """
        return None

    def llm_finished(self, handle: Any, status: str, reply: Optional[dict] = None,
                     usage: Optional[dict] = None, error: Optional[BaseException] = None) -> None:
        """The model call ended. `reply` holds "text" and "tool_calls"; `usage` token counts."""

    def render_context(self, frame: Frame) -> Optional[str]:
        """Text of the DAG this frame may see (its render_range), or None for nothing."""
        return None

    def budget_updated(self, limits: dict, spend: dict) -> None:
        """A root delegation budget (runtime.Budget) started, was breached, or ended.

        `limits`: {"max_depth", "max_llm_calls", "max_tokens", "timeout_s"} (None: no limit);
        `spend`: {"depth": deepest level reached, "llm_calls", "tokens", "elapsed_s"}. Store them with
        the run; each call carries the whole current state, so the last one wins.
        """


@contextmanager
def use_recorder(recorder: Optional[Recorder]) -> Iterator[Optional[Recorder]]:
    """Record every call made inside the block with `recorder` (None: record nothing)."""
    token = _current_recorder.set(recorder)
    try:
        yield recorder
    finally:
        _current_recorder.reset(token)
