"""Repeated tool calls: the loops that are not recursion.

A model that sends the same call again and again (a function it runs in, with arguments that never
validate, say) opens no frame, so the depth ceiling never sees it. Within one frame, a call identical to
earlier ones (same name, same arguments as canonical JSON) is refused once it would be the
OPENPROGRAM_MAX_FAILED_REPEATS-th (3) whose earlier results were errors or refusals, or the
OPENPROGRAM_MAX_REPEATS-th (10) whatever the results; 0 turns either off.

The refusal follows the depth ceiling's rule: the first goes back to the model as its tool result, naming
the call and how often it was made; the same call in a later reply raises `LoopDetected`, which ends the
run. Calls of one reply run at once, so several refusals in one reply are all still guidance.
"""
from __future__ import annotations

import hashlib
import json
import threading
from typing import Optional

from .context import Frame, _current_recorder, pending_frame
from .errors import LoopDetected
from .messages import ToolCall
from .settings_table import default_of, read_number

MAX_FAILED_REPEATS_ENV = "OPENPROGRAM_MAX_FAILED_REPEATS"
MAX_FAILED_REPEATS = default_of(MAX_FAILED_REPEATS_ENV)
MAX_REPEATS_ENV = "OPENPROGRAM_MAX_REPEATS"
MAX_REPEATS = default_of(MAX_REPEATS_ENV)


def repeat_limit(name: str) -> int:
    """A repeat limit from the environment variable `name`: 0 (off) or a whole number >= 2 (a limit of 1
    would refuse every first call)."""
    value = read_number(name)
    if value == 1:
        raise ValueError(f"environment variable {name}=1 would refuse every call; use 0 (off) or a whole "
                         f"number >= 2")
    return value


def call_key(call: ToolCall) -> bytes:
    """What makes two calls identical: the name and the arguments as canonical JSON (the raw text when
    they did not parse), digested so a frame's history stays small however large the arguments."""
    arguments = call.raw_arguments if call.arguments_error is not None else call.arguments
    text = json.dumps([call.name, arguments], sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=repr)
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


class _Seen:
    __slots__ = ("made", "failed", "refused")

    def __init__(self) -> None:
        self.made = 0  # calls made, refused ones included
        self.failed = 0  # calls whose result was an error or a refusal
        self.refused = False


class CallHistory:
    """The tool calls one frame's model made, by `call_key`; shared by every exec loop of the frame."""

    def __init__(self, max_failed: int, max_any: int):
        self.max_failed = max_failed
        self.max_any = max_any
        self._seen: dict[bytes, _Seen] = {}
        self._lock = threading.Lock()

    def refused_keys(self) -> frozenset:
        """The calls refused so far: made again in a later reply, each ends the run."""
        with self._lock:
            return frozenset(key for key, seen in self._seen.items() if seen.refused)

    def admit(self, key: bytes) -> Optional[int]:
        """Count one call; None when it may run, else how many times it has now been made (refuse it)."""
        with self._lock:
            seen = self._seen.get(key)
            if seen is None:
                seen = self._seen[key] = _Seen()
            seen.made += 1
            if (seen.refused or (self.max_failed and seen.failed >= self.max_failed - 1)
                    or (self.max_any and seen.made >= self.max_any)):
                seen.refused = True  # counted as failed with the other error results (`failed`)
                return seen.made
            return None

    def failed(self, key: bytes) -> None:
        """The call's result was an error or a refusal."""
        with self._lock:
            self._seen[key].failed += 1


_history_lock = threading.Lock()


def history_of(owner, max_failed: int, max_any: int) -> Optional[CallHistory]:
    """The call history of `owner` (a Frame, or a frameless exec's dispatcher), made on first use; None
    when both limits are off."""
    if not (max_failed or max_any):
        return None
    history = owner.call_history
    if history is None:
        with _history_lock:  # two exec loops of one frame may start at once
            history = owner.call_history
            if history is None:
                history = owner.call_history = CallHistory(max_failed, max_any)
    return history


def loop_error(call: ToolCall, count: int, max_failed: int, max_any: int) -> LoopDetected:
    """The refusal of a repeated call, worded for the model that reads it as its tool result."""
    arguments = call.raw_arguments if call.arguments_error is not None else call.arguments
    shown = json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=repr)
    limits = " or ".join(text for limit, text in (
        (max_failed, f"{max_failed} with earlier errors or refusals ({MAX_FAILED_REPEATS_ENV})"),
        (max_any, f"{max_any} in all ({MAX_REPEATS_ENV})")) if limit)
    return LoopDetected(
        f"repeated call refused: {call.name}({shown:.300}) was made {count} times from this function with "
        f"the same arguments (the limit is {limits}); it will not give a different result. Do not make "
        f"this call again: another identical call ends the whole run. Change the arguments or answer "
        f"with what you have", name=call.name, arguments=arguments, count=count)


def record_refusal(tool, parent: Optional[Frame], arguments, error: LoopDetected) -> None:
    """Give the refused call a node of its own (status refused, refusal "loop"), as the depth ceiling's
    refusals have, under the frame whose model made it; a call of a tool that does not exist has none."""
    recorder = _current_recorder.get()
    if recorder is None or tool is None:
        return
    frame = pending_frame(tool, parent, arguments)
    frame.status = "refused"
    if not frame.hidden:
        recorder.function_refused(frame, error)
