"""The recorder seam: how a run's DAG gets written without the runtime knowing where to.

The runtime calls these methods; the web app (`dag.recording.recorder`) implements them on the ORM. With no
recorder installed (a standalone run) the runtime skips every call, so recording costs nothing.

Install one for a block of code with `use_recorder(recorder)`; it is held in a ContextVar, so two runs
in two threads of one process record into their own sessions. A thread that does not copy the
caller's context (a bare `threading.Thread`, `executor.submit`) sees no recorder: its calls are not
recorded and start a tree (and a default budget) of their own. When that happens while a recorded run
is going on, `warn_if_context_lost` logs it once per `use_recorder` block, naming `runtime.submit`.
"""
from __future__ import annotations

import logging
import threading
from contextlib import contextmanager
from typing import Any, Iterator, Optional

from .context import Frame, _current_recorder

logger = logging.getLogger("runtime")

# The `use_recorder` blocks open in this process ({key: recorder}), and those already warned about.
_active: dict = {}
_warned: set = set()
_active_lock = threading.Lock()


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

    def approval_requested(self, frame: Frame) -> None:
        """The frame's call waits for a person's approval before it runs (`runtime.approval`): write its
        node `awaiting_approval` and set `frame.node`. Approved, the call's `function_entered` gets a frame
        that continues this one (`runtime.approval.take_approved`)."""

    def approval_ended(self, frame: Frame, status: str, error: Optional[BaseException]) -> None:
        """The call that waited for approval ended without its entry taking the node: "refused" (denied,
        `error.refusal` is "denied"), "cancelled" (stopped while waiting), or, approved, as the call
        ended before its body ran ("error": its `check_fn` said no; "completed": a cached result)."""

    def llm_started(self, frame: Optional[Frame], request: dict) -> Any:
        """A model call is about to be sent. `request` holds "system", "messages", "tools", "model".

        Returns a handle passed back to `llm_finished`.
        """
        return None

    def llm_finished(self, handle: Any, status: str, reply: Optional[dict] = None,
                     usage: Optional[dict] = None, error: Optional[BaseException] = None) -> None:
        """The model call ended. `reply` holds "text" and "tool_calls"; `usage` token counts, and the call's
        cost in USD as "cost_usd" when it is known (`runtime.prices`; absent for an unpriced model)."""

    def render_context(self, frame: Frame) -> Optional[str]:
        """Text of the DAG this frame may see (its render_range), or None for nothing."""
        return None

    def budget_updated(self, limits: dict, spend: dict) -> None:
        """A root delegation budget (runtime.Budget) started, was breached, or ended, or the tree's
        default budget (OPENPROGRAM_MAX_LLM_CALLS, OPENPROGRAM_MAX_COST_USD) was breached.

        `limits`: {"max_depth", "max_llm_calls", "max_tokens", "timeout_s", "max_cost_usd"} (None: no
        limit); `spend`: {"depth": deepest level reached, "llm_calls", "tokens", "elapsed_s", "cost_usd",
        "unpriced_calls": calls whose cost is unknown}. Store them with the run; each call carries the
        whole current state, so the last one wins.
        """


@contextmanager
def use_recorder(recorder: Optional[Recorder]) -> Iterator[Optional[Recorder]]:
    """Record every call made inside the block with `recorder` (None: record nothing)."""
    key = object()
    if recorder is not None:
        with _active_lock:
            _active[key] = recorder
    token = _current_recorder.set(recorder)
    try:
        yield recorder
    finally:
        _current_recorder.reset(token)
        with _active_lock:
            _active.pop(key, None)
            _warned.discard(key)


def warn_if_context_lost(name: str) -> None:
    """An entry call of `name` began with no recorder while recorded runs are going on in this process:
    most likely a thread that did not carry the caller's context. Log it once per recorded run."""
    with _active_lock:
        fresh = [key for key in _active if key not in _warned]
        _warned.update(fresh)
    if fresh:
        logger.warning(
            "function %s started in a thread that lost the caller's context while a recorded run "
            "is going on: it is not recorded, and it runs under a default budget of its own instead of "
            "the run's. Start threads with runtime.submit(executor, fn, ...) (or contextvars.copy_context()) "
            "to keep it in the run.", name)
