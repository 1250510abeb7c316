"""A person's approval of one tool call: the request, the wait for an answer, and what the record shows.

In an attended run (`Runtime(unattended=False, approver=...)`), a call of a tool whose
`requires_approval` says so waits here before it runs. The call gets a node of its own, written
`awaiting_approval` (its arguments shown) through the recorder's `approval_requested`; the approver is
asked and the call waits for its answer. Approved, the tool runs and its entry continues that same node
(`continuing`); denied, or unanswered within OPENPROGRAM_APPROVAL_TIMEOUT_S (default 600 s), the node
ends `refused` with refusal `denied` and the model reads the denial, with its reason, as the tool's
result. A stop during the wait ends the node `cancelled` and propagates.

An approver is a plain callable `approver(tool_name, arguments) -> bool | Answer`, or an `Approver`,
whose `answer(request, timeout_s)` gets the whole request (its node, depth and call path) and may wait
for a person, returning None when no answer came in time. The web app implements one on its database;
the CLI one asks on the terminal.
"""
from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

from .context import Frame, _current_recorder, pending_frame
from .errors import OpenProgramError, status_of
from .settings_table import default_of, read_number

APPROVAL_TIMEOUT_ENV = "OPENPROGRAM_APPROVAL_TIMEOUT_S"
DEFAULT_APPROVAL_TIMEOUT_S = default_of(APPROVAL_TIMEOUT_ENV)
DENIED = "denied"  # the node's refusal when a person (or the timeout) said no


def approval_timeout_s() -> float:
    """Seconds a call waits for a person's answer before it is denied (OPENPROGRAM_APPROVAL_TIMEOUT_S)."""
    value = read_number(APPROVAL_TIMEOUT_ENV)
    if value <= 0:
        raise ValueError(f"environment variable {APPROVAL_TIMEOUT_ENV}={value!r} must be a positive number of seconds")
    return value


@dataclass(frozen=True)
class ApprovalRequest:
    """What a person is asked: run `tool` with `arguments`? `node`: the recorder's id of the waiting call's
    node (None unrecorded); `depth`: its nesting level (1: the entry call); `path`: the names of the
    calls from the entry call down to it."""

    tool: str
    arguments: dict
    depth: int
    path: list = field(default_factory=list)
    node: Any = None


@dataclass(frozen=True)
class Answer:
    """A person's answer: approved, or denied with an optional reason."""

    approved: bool
    reason: str = ""


class Approver:
    """Answers approval requests. Subclasses override `answer`; the base denies everything."""

    def answer(self, request: ApprovalRequest, timeout_s: float) -> Optional[Answer]:
        """The answer to `request`, waiting at most `timeout_s`; None if none came in time. May raise
        `CancelledError` (the run was stopped while waiting)."""
        return Answer(False, "no approver answers here")


class ApprovalDenied(OpenProgramError):
    """A call a person (or the timeout) did not approve; its message is what the model reads."""

    refusal = DENIED


def denial_text(tool_name: str, answer: Optional[Answer], timeout_s: float) -> str:
    if answer is None:
        return (f"approval to run tool {tool_name!r} was denied: no one answered within {timeout_s:g} s "
                f"({APPROVAL_TIMEOUT_ENV})")
    reason = answer.reason.strip()
    return f"approval to run tool {tool_name!r} was denied" + (f": {reason}" if reason else "")


def ask(approver, request: ApprovalRequest, timeout_s: float) -> Optional[Answer]:
    """`approver`'s answer to `request`: an `Approver`'s, or a plain callable's bool made an Answer."""
    if isinstance(approver, Approver):
        return approver.answer(request, timeout_s)
    given = approver(request.tool, request.arguments)
    return given if isinstance(given, Answer) else Answer(bool(given))


def seek_approval(approver, tool, arguments: dict, parent: Optional[Frame], timeout_s: float) -> Frame:
    """Wait up to `timeout_s` for `approver`'s answer to a call of `tool`; the approved call's waiting frame
    (its node to be `continuing`d by the call's entry). Raises ApprovalDenied on a denial or the timeout,
    and whatever the wait raised (a stop) after ending the node."""
    frame = pending_frame(tool, parent, arguments)
    recorder = None if frame.hidden else _current_recorder.get()
    if recorder is not None:
        recorder.approval_requested(frame)
    request = ApprovalRequest(tool.tool_name, dict(arguments), frame.depth, frame.path(), frame.node)
    try:
        answer = ask(approver, request, timeout_s)
    except BaseException as exc:
        if recorder is not None:
            recorder.approval_ended(frame, status_of(exc), exc)
        raise
    if answer is not None and answer.approved:
        return frame
    error = ApprovalDenied(denial_text(tool.tool_name, answer, timeout_s))
    frame.status = "refused"
    if recorder is not None:
        recorder.approval_ended(frame, "refused", error)
    raise error


# The approved frame whose node the next entry of its tool under the same parent continues.
_approved: ContextVar[Optional[list]] = ContextVar("openprogram_approved_frame", default=None)


@contextmanager
def continuing(frame: Frame) -> Iterator[None]:
    """Inside the block, the first entry of `frame`'s tool under `frame`'s parent takes over its node
    (see `take_approved`), so an approved call keeps the node that waited for the approval. If no entry
    took it (a `check_fn` said no, a cached result answered), the node ends as the block did."""
    holder = [frame]
    token = _approved.set(holder)
    try:
        yield
    except BaseException as exc:
        _end_untaken(holder, status_of(exc), exc)
        raise
    else:
        _end_untaken(holder, "completed", None)
    finally:
        _approved.reset(token)


def _end_untaken(holder: list, status: str, error: Optional[BaseException]) -> None:
    recorder = _current_recorder.get()
    if holder and recorder is not None and not holder[0].hidden:
        recorder.approval_ended(holder[0], status, error)


def take_approved(entered: Frame) -> Optional[Frame]:
    """The approved frame `entered` continues, once (a recorder's `function_entered` asks); None for any
    other entry, or a second one."""
    holder = _approved.get()
    if not holder:
        return None
    waiting = holder[0]
    if waiting.name != entered.name or waiting.parent is not entered.parent:
        return None
    holder.clear()
    return waiting
