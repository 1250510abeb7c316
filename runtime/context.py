"""What the runtime knows about "where we are": the frame stack, the runtime and the recorder in use.

All three live in ContextVars so that threads and asyncio tasks each see their own chain, and a
copied context (asyncio tasks, `contextvars.copy_context().run`) carries it along.
"""
from __future__ import annotations

import inspect
import time
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:  # pragma: no cover
    from .recorder import Recorder
    from .runtime import Runtime


class Frame:
    """One call of a decorated function: a code node in the DAG.

    `depth` is the nesting level of code frames (1 for the entry call); `name_depth` is the recursion
    guard's per-name counter for this call (how many frames of this name are open, this one included).
    `node` is whatever the recorder returned for this frame (a DB id, a dict...), opaque to the runtime.
    """

    __slots__ = (
        "tool", "name", "parent", "depth", "name_depth", "runtime",
        "node", "started", "_args", "_kwargs", "_arguments", "status", "hidden", "__weakref__",
    )

    def __init__(self, tool, name: str, parent: Optional["Frame"], args: tuple, kwargs: dict):
        self.tool = tool
        self.name = name
        self.parent = parent
        self.depth = parent.depth + 1 if parent is not None else 1
        self.name_depth = 0
        self.runtime: Optional["Runtime"] = None
        self.node: Any = None
        self.started = time.time()
        self.status = "running"
        self.hidden = False
        self._args = args
        self._kwargs = kwargs
        self._arguments: Optional[dict] = None

    @property
    def doc(self) -> str:
        return self.tool.doc

    @property
    def expose(self) -> str:
        return self.tool.expose

    @property
    def render_range(self) -> Optional[dict]:
        return self.tool.render_range

    @property
    def kind(self) -> str:
        return "agentic" if self.tool.agentic else "function"

    def arguments(self) -> dict:
        """The call's arguments by parameter name, defaults applied, runtime parameters left out.

        Computed lazily: binding a signature costs microseconds and only a recorder needs it.
        """
        if self._arguments is None:
            try:
                bound = self.tool.signature.bind_partial(*self._args, **self._kwargs)
                bound.apply_defaults()
                params = bound.arguments
            except TypeError:
                params = {"args": list(self._args), **self._kwargs}
            skip = self.tool.hidden_from_record
            self._arguments = {k: v for k, v in params.items() if k not in skip}
        return self._arguments

    def path(self) -> list[str]:
        """Names of the code frames from the entry call down to this one."""
        names = []
        frame: Optional[Frame] = self
        while frame is not None:
            names.append(frame.name)
            frame = frame.parent
        names.reverse()
        return names

    def innermost_agentic(self) -> Optional["Frame"]:
        frame: Optional[Frame] = self
        while frame is not None and not frame.tool.agentic:
            frame = frame.parent
        return frame

    def __repr__(self) -> str:
        return f"<Frame {' → '.join(self.path())} depth={self.depth} status={self.status}>"


_current_frame: ContextVar[Optional[Frame]] = ContextVar("openprogram_frame", default=None)
_current_runtime: ContextVar[Optional["Runtime"]] = ContextVar("openprogram_runtime", default=None)
_current_recorder: ContextVar[Optional["Recorder"]] = ContextVar("openprogram_recorder", default=None)
# The innermost active delegation budget scope (runtime.budget), None when no budget applies.
_current_budget: ContextVar[Optional[object]] = ContextVar("openprogram_budget", default=None)


def current_frame() -> Optional[Frame]:
    return _current_frame.get()


def current_runtime() -> Optional["Runtime"]:
    return _current_runtime.get()


def current_recorder() -> Optional["Recorder"]:
    return _current_recorder.get()


def is_async_callable(fn) -> bool:
    return inspect.iscoroutinefunction(fn)
