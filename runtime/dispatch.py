"""Running the tool calls a model asked for, honouring each tool's registration options.

Per call, in order: offered? (else a refusal naming why) -> argument validation against the spec ->
approval (refused when unattended, else waited for: `runtime.approval`) -> `check_fn` -> cache -> run
(with `timeout`) -> result text cut to `max_result_chars` keeping head and tail (`head_ratio`), the full
text saved when `persist_full`. Every failure becomes a tool result the model can read, except a stop
(CancelledError), a budget breach (BudgetExceeded), a loop below that could not finish
(ExecLimitExceeded) and a repeated call made again after its refusal (LoopDetected, see
`runtime.repeats`): those end the run, once the other calls of the same reply have finished. A call the
depth ceiling refuses goes back as its RecursionError text (guidance) while the refused function was not
refused in an earlier reply of the calling frame; once the model was told and calls it again, the
RecursionError propagates instead, through every enclosing loop, and ends the run. A repeated call is
refused the same way, before any of the steps above.

Several calls in one reply run concurrently (at most MAX_PARALLEL_CALLS at once), each in its own
thread with a copy of the caller's context (frame, runtime, recorder, budget, recursion depths), so
nested calls see the right chain. At most MAX_TOOL_CALLS_PER_REPLY calls of one reply run (default 64,
or OPENPROGRAM_MAX_TOOL_CALLS_PER_REPLY; 0 turns the cap off); each call past it is answered with an
error result saying so, not run.
"""
from __future__ import annotations

import asyncio
import contextvars
import inspect
import json
import os
import tempfile
import threading
import time
import uuid
from concurrent.futures import wait as wait_all
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Callable, NamedTuple, Optional

from . import interrupt
from .approval import ApprovalDenied, approval_timeout_s, continuing, seek_approval
from .context import Frame, _current_frame, _current_recorder
from .errors import (BudgetExceeded, CancelledError, DepthCeilingExceeded, ExecLimitExceeded, LoopDetected,
                     OpenProgramError, ToolArgumentError)
from .messages import ToolCall, to_text, tool_result_message
from .options import ToolOptions
from .policy import LOAD_TOOLS, OfferedTools
from .recorder import Recorder
from .repeats import (MAX_FAILED_REPEATS_ENV, MAX_REPEATS_ENV, call_key, history_of, loop_error, record_refusal,
                      repeat_limit)
from .settings_table import default_of, read_number, read_text
from .situation import note_refusal

# Set inside a tool call that has a `timeout`: (monotonic deadline, tool name). A model call made
# after the deadline (the tool was abandoned but its thread runs on) raises ToolTimeoutError, so an
# abandoned call stops spending at its next model call.
_tool_deadline: contextvars.ContextVar[Optional[tuple]] = contextvars.ContextVar("openprogram_tool_deadline", default=None)

# What ends the run instead of becoming a tool result: a stop, a budget breach, a loop that could not
# finish (a runaway below this call). A refusal (DepthCeilingExceeded, LoopDetected) ends it once
# `ends_run` is set.
PROPAGATE = (CancelledError, BudgetExceeded, ExecLimitExceeded)
# A reply may ask for any number of tool calls; each runs in a thread of its own, so at most this many
# run at once (the rest follow in further waves).
MAX_PARALLEL_CALLS = 16
# Without a cap one reply could ask for 20,000 calls of a tool with side effects and have them all run.
MAX_TOOL_CALLS_ENV = "OPENPROGRAM_MAX_TOOL_CALLS_PER_REPLY"
MAX_TOOL_CALLS_PER_REPLY = default_of(MAX_TOOL_CALLS_ENV)


def max_tool_calls_per_reply() -> int:
    """The cap on the tool calls of one reply that run, from OPENPROGRAM_MAX_TOOL_CALLS_PER_REPLY
    (unset: MAX_TOOL_CALLS_PER_REPLY; 0: no cap); a value that is not a whole number >= 0 is named."""
    return read_number(MAX_TOOL_CALLS_ENV)


class ToolTimeoutError(OpenProgramError, TimeoutError):
    """A tool call ran past its `timeout`."""


def check_tool_deadline() -> None:
    deadline = _tool_deadline.get()
    if deadline is not None and time.monotonic() > deadline[0]:
        raise ToolTimeoutError(f"tool {deadline[1]!r} ran past its timeout and was abandoned")


class ResultCache:
    """Results of `cache=True` tools by (name, arguments), each kept for its tool's `cache_ttl`."""

    def __init__(self) -> None:
        self._items: dict = {}
        self._lock = threading.Lock()

    @staticmethod
    def key(name: str, arguments: dict) -> tuple:
        return name, json.dumps(arguments, sort_keys=True, default=str)

    def get(self, key: tuple) -> Optional[str]:
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return None
            if item[0] < time.monotonic():
                del self._items[key]
                return None
            return item[1]

    def put(self, key: tuple, text: str, ttl: float) -> None:
        with self._lock:
            self._items[key] = (time.monotonic() + ttl, text)


def results_dir(runtime) -> Path:
    configured = getattr(runtime, "results_dir", None) or read_text("OPENPROGRAM_RESULTS_DIR")
    if configured:
        return Path(configured)
    # The shared temp directory: anyone can create a directory there first and then swap the files
    # a model is told to read, so use one per user and only if that user owns it.
    directory = Path(tempfile.gettempdir()) / f"openprogram-results-{os.getuid()}"
    directory.mkdir(exist_ok=True, mode=0o700)
    if directory.lstat().st_uid != os.getuid() or directory.is_symlink():
        raise PermissionError(f"{directory} belongs to another user; set OPENPROGRAM_RESULTS_DIR to a directory of yours")
    return directory


def persist_result(directory: Path, tool_name: str, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = directory / f"{tool_name}-{uuid.uuid4().hex}.txt"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    return path


def shape_result(text: str, limit: int, head_ratio: float, where: str = "") -> str:
    """`text` cut to `limit` characters, keeping the head and the tail, with a marker for the cut
    (`where` adds to the marker where the full text went)."""
    if len(text) <= limit:
        return text
    head = int(limit * head_ratio)
    tail = limit - head
    marker = f"\n\n[… {len(text) - limit} of {len(text)} characters cut from the middle{where} …]\n\n"
    return text[:head] + marker + (text[-tail:] if tail else "")


def _takes_arguments(fn: Callable) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL) for p in params)


def _call_gate(fn: Callable, arguments: dict):
    """A `check_fn` or `requires_approval` callable: given the arguments if it takes any."""
    return fn(arguments) if _takes_arguments(fn) else fn()


class Refusal(Exception):
    """A call turned away before it ran; the message is the tool result."""


class TimeoutAwareRecorder(Recorder):
    """Wraps the run's recorder for one tool call with a timeout.

    It notes the call's own frame as it is entered, so that when the call is abandoned its node can be
    closed as `error` at once; the late exit of the abandoned thread is then not recorded again.
    """

    def __init__(self, inner: Recorder, parent):
        self.inner = inner
        self.parent = parent
        self.frame = None
        self.closed = False
        self._lock = threading.Lock()

    def function_entered(self, frame) -> None:
        with self._lock:
            if self.frame is None and frame.parent is self.parent:
                self.frame = frame
        self.inner.function_entered(frame)

    def function_exited(self, frame, status, output=None, error=None) -> None:
        with self._lock:
            if frame is self.frame:
                if self.closed:
                    return
                self.closed = True
        self.inner.function_exited(frame, status, output, error)

    def abandon(self, error: BaseException) -> None:
        with self._lock:
            if self.frame is None or self.closed:
                return
            self.closed = True
            frame = self.frame
        frame.status = "error"
        self.inner.function_exited(frame, "error", None, error)

    def function_refused(self, frame, error) -> None:
        self.inner.function_refused(frame, error)

    def approval_requested(self, frame) -> None:
        self.inner.approval_requested(frame)

    def approval_ended(self, frame, status, error) -> None:
        self.inner.approval_ended(frame, status, error)

    def llm_started(self, frame, request):
        return self.inner.llm_started(frame, request)

    def llm_finished(self, handle, status, reply=None, usage=None, error=None) -> None:
        self.inner.llm_finished(handle, status, reply, usage, error)

    def render_context(self, frame):
        return self.inner.render_context(frame)

    def budget_updated(self, limits: dict, spend: dict) -> None:
        self.inner.budget_updated(limits, spend)


class Told(NamedTuple):
    """What a frame's model had been told was refused before the reply being run: the names the depth
    ceiling refused (`Frame.refused_names`) and the calls refused as repeats (`CallHistory.refused_keys`)."""

    names: tuple
    repeats: frozenset


class Dispatcher:
    """Runs one exec's tool calls against the tools it offered."""

    refused_names: tuple = ()  # refusals of an exec made outside any agentic function
    call_history = None  # its repeated calls (runtime.repeats)

    def __init__(self, runtime, offered: OfferedTools, frame=None):
        self.runtime = runtime
        self.frame = frame
        innermost = frame.innermost_agentic() if frame is not None else None
        # Where refusals and repeats are counted: the agentic frame whose model makes these calls.
        self.owner = innermost if innermost is not None else self
        self.offered = offered
        self.unattended = getattr(runtime, "unattended", True)
        self.approver = getattr(runtime, "approver", None)
        # Read here, so a bad value fails before any model call of an attended run.
        self.approval_timeout_s = None if self.unattended else approval_timeout_s()
        self.cache: ResultCache = runtime.tool_cache
        self.max_calls = max_tool_calls_per_reply()  # read here, so a bad value fails before any model call
        self.max_failed_repeats = repeat_limit(MAX_FAILED_REPEATS_ENV)
        self.max_repeats = repeat_limit(MAX_REPEATS_ENV)
        self.history = history_of(self.owner, self.max_failed_repeats, self.max_repeats)

    def run(self, calls: list[ToolCall]) -> list[dict]:
        """Tool-result messages for `calls`, in call order."""
        interrupt.check_abandoned()  # a reply that arrived after its caller gave up runs no tool
        if self.max_calls and len(calls) > self.max_calls:
            skipped = [tool_result_message(call, self._over_cap(len(calls), index), True)
                       for index, call in enumerate(calls[self.max_calls:], self.max_calls)]
            return self._run(calls[:self.max_calls]) + skipped
        return self._run(calls)

    def _over_cap(self, count: int, index: int) -> str:
        if index > self.max_calls:  # the first one says why; thousands of copies would only fill the context
            return f"Refused: not run (call {index + 1}): past the cap of {self.max_calls} tool calls per reply"
        return (f"Refused: not run: this reply asked for {count} tool calls and at most {self.max_calls} of "
                f"one reply run ({MAX_TOOL_CALLS_ENV}); this call and every later one in the reply were "
                f"not run. Ask for the rest in a later reply, at most {self.max_calls} at a time")

    def _run(self, calls: list[ToolCall]) -> list[dict]:
        # What the model had been told was refused before this reply: calls of one reply run at once, so
        # two refusals in it are both still guidance.
        told = Told(self.owner.refused_names,
                    self.history.refused_keys() if self.history is not None else frozenset())
        if len(calls) == 1:
            return [self._message(calls[0], told)]
        futures = []
        for start in range(0, len(calls), MAX_PARALLEL_CALLS):
            wave = [interrupt.spawn(self._message, call, told)
                    for call in calls[start:start + MAX_PARALLEL_CALLS]]
            # All are waited for even when one ends the run (a stop, a budget breach): a call left
            # running would go on calling models after its run has ended, out of a stop's reach.
            wait_all(wave)
            for future in wave:
                if future.exception() is not None:
                    raise future.exception()
            futures += wave
        return [future.result() for future in futures]

    def _message(self, call: ToolCall, told: Told) -> dict:
        """The tool-result message of `call`; `told`: what was refused before this reply."""
        key = call_key(call) if self.history is not None else None
        try:
            self._check_repeat(call, key, told.repeats)
            text, is_error = self._result_text(call), False
        except PROPAGATE:
            raise
        except LoopDetected as exc:
            if exc.ends_run:  # this call, or one below it, was refused as a repeat and made again
                raise
            text, is_error = f"Refused: {exc}", True
        except DepthCeilingExceeded as exc:
            if exc.ends_run or exc.function in told.names:
                exc.ends_run = True  # the model was told and called it again: a runaway; end the run
                raise
            note_refusal(self.owner, exc.function)
            text, is_error = f"Error: RecursionError: {exc}", True
        except Refusal as exc:
            text, is_error = f"Refused: {exc}", True
        except ToolArgumentError as exc:
            text, is_error = f"Error: invalid arguments: {exc}", True
        except Exception as exc:
            text, is_error = f"Error: {type(exc).__name__}: {exc}", True
        if is_error and key is not None:
            self.history.failed(key)
        if is_error:  # an exception's message (a response body, a process's output) can be any length
            tool = self._tool(call)
            options = tool.options if tool is not None else ToolOptions()
            text = shape_result(text, options.max_result_chars, options.head_ratio)
        return tool_result_message(call, text, is_error)

    def _check_repeat(self, call: ToolCall, key: Optional[bytes], told: frozenset) -> None:
        """Count `call` in its frame's history; a repeat past the limits is refused: LoopDetected, its
        `ends_run` set when the same call was refused in an earlier reply."""
        count = self.history.admit(key) if key is not None else None
        if count is None:
            return
        error = loop_error(call, count, self.max_failed_repeats, self.max_repeats)
        error.ends_run = key in told
        record_refusal(self._tool(call), self.frame, call.arguments, error)
        raise error

    def _result_text(self, call: ToolCall) -> str:
        if not isinstance(call.name, str):
            raise Refusal(f"a tool name must be a string, got {type(call.name).__name__} {call.name!r:.60}; "
                          f"the tools you may call are: {', '.join(self.offered.tools) or 'none'}")
        if call.name == LOAD_TOOLS and LOAD_TOOLS not in self.offered.tools:
            return self._load_tools(call)
        tool = self._tool(call)
        if tool is None:
            raise Refusal(self.offered.refusal(call.name))
        if call.arguments_error is not None:
            raise ToolArgumentError(f"tool {call.name!r}: {call.arguments_error}; send a JSON object "
                                    f"matching the tool's parameters", tool=call.name)
        arguments = tool.validate(call.arguments)  # first: the gates below may rely on well-formed arguments
        approved = self._approved(tool, arguments)
        with continuing(approved) if approved is not None else nullcontext():
            return self._approved_result_text(call, tool, arguments)

    def _approved_result_text(self, call: ToolCall, tool, arguments: dict) -> str:
        """The rest of `_result_text`, once the call is approved (or needs no approval)."""
        options = tool.options
        if options.check_fn is not None and not _call_gate(options.check_fn, arguments):
            raise Refusal(f"tool {call.name!r} is blocked right now: its check_fn said no to this call")
        key = ResultCache.key(call.name, call.arguments) if options.cache else None
        if key is not None:
            cached = self.cache.get(key)
            if cached is not None:
                return cached
        value = self._invoke_with_timeout(tool, arguments) if options.timeout else _invoke(tool, arguments)
        text = to_text(value)
        where = ""
        if options.persist_full and len(text) > options.max_result_chars:
            try:
                saved = persist_result(results_dir(self.runtime), call.name, text)
                where = f"; the full result is saved at {saved} (read it from there for the rest)"
            except OSError as exc:  # the tool did run: report its cut result, not a failure it might retry
                where = f"; saving the full result failed ({type(exc).__name__}: {exc.strerror or exc})"
        text = shape_result(text, options.max_result_chars, options.head_ratio, where)
        if key is not None:
            self.cache.put(key, text, options.cache_ttl)
        return text

    def _tool(self, call: ToolCall):
        """The offered tool `call` names; None for an unknown name or one that is not a string (a
        provider of one's own may pass a list through, and a list cannot be looked up)."""
        return self.offered.tools.get(call.name) if isinstance(call.name, str) else None

    def _approved(self, tool, arguments: dict) -> Optional[Frame]:
        """None when the call needs no approval; else the approved call's waiting frame (a refusal
        otherwise), whose node the call's entry continues."""
        rule = tool.options.requires_approval
        if not rule:
            return None
        needed = _call_gate(rule, arguments) if callable(rule) else True
        if not needed:
            return None
        if self.unattended:
            raise Refusal(f"tool {tool.tool_name!r} requires approval, and this run is unattended "
                          f"(no one can approve it); do the work another way")
        if self.approver is None:
            raise Refusal(f"tool {tool.tool_name!r} requires approval, and no approver is configured "
                          f"(Runtime(approver=...)); do the work another way")
        try:
            return seek_approval(self.approver, tool, arguments, self.frame, self.approval_timeout_s)
        except ApprovalDenied as exc:
            raise Refusal(str(exc)) from None

    def _invoke_with_timeout(self, tool, arguments: dict):
        timeout = tool.options.timeout
        recorder = _current_recorder.get()
        watcher = None
        if recorder is not None:
            watcher = TimeoutAwareRecorder(recorder, _current_frame.get())

        def run_with_deadline():
            # A tool called inside another tool with a timeout keeps the earlier deadline: once the
            # outer call is abandoned, its whole subtree must stop at its next model call.
            outer = _tool_deadline.get()
            deadline = time.monotonic() + timeout
            if outer is None or deadline < outer[0]:
                _tool_deadline.set((deadline, tool.tool_name))
            if watcher is not None:
                _current_recorder.set(watcher)
            return _invoke(tool, arguments)

        try:
            return interrupt.wait(interrupt.spawn(run_with_deadline), timeout=timeout)
        except interrupt.WaitTimedOut:
            error = ToolTimeoutError(f"tool {tool.tool_name!r} timed out after {timeout:g}s and was abandoned")
            if watcher is not None:
                watcher.abandon(error)
            raise error from None

    def _load_tools(self, call: ToolCall) -> str:
        names = call.arguments.get("names") if isinstance(call.arguments, dict) else None
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ToolArgumentError(f"argument 'names' of tool {LOAD_TOOLS!r}: expected a list of tool names",
                                    tool=LOAD_TOOLS, param="names")
        deferred = set(self.offered.deferred())
        loaded = [n for n in names if n in deferred or n in self.offered.loaded]
        self.offered.loaded.update(loaded)
        unknown = [n for n in names if n not in loaded]
        text = f"Loaded: {', '.join(loaded) or 'nothing'}. They are in your tool list from the next turn."
        if unknown:
            text += f" Not deferred tools here: {', '.join(unknown)}."
        return text


def _invoke(tool, arguments: dict) -> Any:
    """Call the tool; an async tool runs on its own event loop (in a thread if this one has a loop)."""
    if not tool.is_async:
        return tool(**arguments)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(tool(**arguments))
    return interrupt.wait(interrupt.spawn(lambda: asyncio.run(tool(**arguments))))
