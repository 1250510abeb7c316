"""What the runtime knows about "where we are": the frame stack, the runtime and the recorder in use.

All three live in ContextVars so that threads and asyncio tasks each see their own chain, and a
copied context (asyncio tasks, `contextvars.copy_context().run`) carries it along.
"""
from __future__ import annotations

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

    Built on every call, standalone or not, so the constructor sets only what differs per call; the
    rest are class-level defaults overwritten when they matter.
    """

    node: Any = None
    runtime: Optional["Runtime"] = None  # the runtime this call set up (injected or owned), if any
    name_depth = 0
    status = "running"
    hidden = False
    # Names whose calls from this frame's model the depth ceiling refused (runtime.situation).
    refused_names: tuple = ()
    # The tool calls this frame's model made, to refuse repeats (runtime.repeats); made on first use.
    call_history = None
    _arguments: Optional[dict] = None

    def __init__(self, tool, parent: Optional["Frame"], args: tuple, kwargs: dict):
        self.tool = tool
        self.name = tool.tool_name
        self.parent = parent
        self.depth = parent.depth + 1 if parent is not None else 1
        self._args = args
        self._kwargs = kwargs

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

        Computed lazily (see `runtime.binding`): only a recorder needs them.
        """
        if self._arguments is None:
            try:
                params = self.tool.bind_arguments(self._args, self._kwargs)
            except TypeError:
                params = {"args": list(self._args), **self._kwargs}
            skip = self.tool.hidden_from_record
            self._arguments = {k: v for k, v in params.items() if k not in skip} if skip else params
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


class FrameMap(dict):
    """The recursion guard's per-name depth map {function name: open frames of that name}, carrying
    the innermost frame of the chain as `.frame`.

    One ContextVar holds both because a ContextVar set/reset is the dearest step of a call (thousands
    of instructions each): the guard needs the map pushed on every agentic call anyway, so the frame
    stack rides along for free. Leaf tools push a copy with unchanged counts.
    """

    __slots__ = ("frame",)


# Per-name nesting depth (seed 000); `runtime.function._recursion_depth` is this same variable.
_recursion_depth: ContextVar[Optional[dict]] = ContextVar("_recursion_depth", default=None)


def open_agentic_levels() -> int:
    """How many agentic frames are open in this context's chain: the guard's per-name counts, summed."""
    counts = _recursion_depth.get()
    return sum(counts.values()) if counts else 0


class _CurrentFrame:
    """Read-only view of the innermost frame, kept in `_recursion_depth` (see FrameMap)."""

    __slots__ = ()

    @staticmethod
    def get() -> Optional[Frame]:
        return getattr(_recursion_depth.get(), "frame", None)


_current_frame = _CurrentFrame()
_current_runtime: ContextVar[Optional["Runtime"]] = ContextVar("openprogram_runtime", default=None)
_current_recorder: ContextVar[Optional["Recorder"]] = ContextVar("openprogram_recorder", default=None)
# The innermost active delegation budget scope (runtime.budget), None when no budget applies.
_current_budget: ContextVar[Optional[object]] = ContextVar("openprogram_budget", default=None)
# Tool policy for model calls made in this context ("deny", "allow", "source", "toolset"), set with
# `runtime.tool_policy(...)`. The seed's name; `runtime.function._current_tool_policy` is this variable.
# The wrapper never adds the running function's own name to "deny": the situational prompt tells the
# model not to call itself, and the visible tool is what gives that prompt a subject.
_current_tool_policy: ContextVar[Optional[dict]] = ContextVar("_current_tool_policy", default=None)
# {runtime: system prompt} set by running `system=` functions. Not a write to the runtime itself:
# parallel tool calls share one runtime, and each must see (and leave behind) its own prompt.
_system_override: ContextVar[Optional[dict]] = ContextVar("openprogram_system", default=None)


def pending_frame(tool, parent: Optional[Frame], arguments: dict) -> Frame:
    """The frame of a call not yet entered (refused or waiting before it runs), placed under `parent`
    as its entry will be."""
    frame = Frame(tool, parent, (), dict(arguments) if isinstance(arguments, dict) else {})
    frame.hidden = tool.expose == "hidden" or (parent is not None and parent.hidden)
    if tool.agentic:
        counts = _recursion_depth.get()
        frame.name_depth = (counts.get(tool.tool_name, 0) if counts else 0) + 1
    return frame


def current_frame() -> Optional[Frame]:
    return _current_frame.get()


def current_runtime() -> Optional["Runtime"]:
    return _current_runtime.get()


def current_recorder() -> Optional["Recorder"]:
    return _current_recorder.get()
