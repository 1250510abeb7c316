"""Steering a live run: a person's answers to its approval requests, and pausing and resuming it.

Built as a stop is (`dag.runs.stop`): the request is written to the session first (`write_path.
answer_approval`, `request_pause`), then the run's process is woken (at once in this process, over Redis
pub/sub STEER_CHANNEL elsewhere), and the process's stop watcher reads the session's answers and pause
flag for every attended run it holds (`read_requests`, on each poll: a lost wake-up costs one poll). The
run's thread only ever waits on a condition in memory, holding no database connection and using no CPU.

A run launched attended gets a `RunSteering` for the whole run (`steer`): it is the runtime's approver
(`runtime.approval.Approver`: a call that needs approval waits in `answer` for its node's answer) and,
through a pre-invocation hook, the pause: a run asked to pause stops at its next function entry, model
call or tool call (`pause_here`), shows `paused`, and goes on when resumed. A stop ends either wait at
once (the stop signal wakes it).
"""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from contextvars import ContextVar
from functools import partial
from typing import Iterator, Optional

from runtime import add_pre_invocation_hook, remove_pre_invocation_hook
from runtime.approval import Answer, ApprovalRequest, Approver

from ..models import Node, Session
from ..recording import write_path
from ..recording.loop_offload import LoopOffload
from ..timestamps import iso
from . import stop

# The Redis pub/sub channel steering wake-ups go on; each message is a session id.
STEER_CHANNEL = "openprogram:steer"
# The longest a waiting run's thread sleeps without looking at its stop signal, in case a wake-up was
# missed: a stop wakes the wait itself (StopSignal.on_set), so a wait costs no CPU meanwhile.
WAKE_S = 30.0
NOT_VISIBLE = "the call is hidden from the record, so no one could see it to approve it"


class RunSteering(Approver):
    """The approvals and pause of one attended run in this process."""

    def __init__(self, session_id: str, lease: Optional[str], signal: stop.StopSignal):
        self.session_id = session_id
        self.lease = lease
        self.signal = signal
        self.pause_requested = False
        self._answers: dict[str, dict] = {}  # by the waiting node's id, as the session stores them
        self._changed = threading.Condition()
        self._offload = LoopOffload()  # the pause is written from the run's thread, maybe inside a loop
        signal.on_set(self._wake)

    def _wake(self) -> None:
        with self._changed:
            self._changed.notify_all()

    def update(self, pause_requested: bool, answers: dict) -> None:
        """What the session holds now (the watcher read it): wake the waits it ends, and a model call in
        flight when a pause is asked for (it pauses there, in its check)."""
        with self._changed:
            asked = bool(pause_requested) and not self.pause_requested
            self.pause_requested = bool(pause_requested)
            self._answers = dict(answers or {})
            self._changed.notify_all()
        if asked:
            self.signal.bell.ring()

    def answer(self, request: ApprovalRequest, timeout_s: float) -> Optional[Answer]:
        """Wait for a person's answer to the call waiting at `request.node`; None after `timeout_s`."""
        if request.node is None:
            return Answer(False, NOT_VISIBLE)
        key = str(request.node)
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while key not in self._answers:
                self.signal.raise_if_set()
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._changed.wait(min(remaining, WAKE_S))
            given = self._answers[key]
        return Answer(bool(given.get("approve")), str(given.get("reason") or ""))

    def pause_here(self) -> None:
        """At a boundary: if a pause was asked for, show `paused` and wait until resumed (or stopped)."""
        if not self.pause_requested:
            return
        self.signal.raise_if_set()
        self._show_paused(True)
        try:
            with self._changed:
                while self.pause_requested:
                    self.signal.raise_if_set()
                    self._changed.wait(WAKE_S)
        finally:
            if not self.signal.is_set:  # a stopped run's end clears what it waited for anyway
                self._show_paused(False)

    def _show_paused(self, paused: bool) -> None:
        self._offload.run(write_path.borrowed, f"session {self.session_id}'s pause", partial(
            write_path.set_paused, self.session_id, paused, lease=self.lease))

    def close(self) -> None:
        self._offload.close()


_current: ContextVar[Optional[RunSteering]] = ContextVar("openprogram_steering", default=None)
_active: dict[str, RunSteering] = {}
_active_lock = threading.Lock()


def _pause_hook(event) -> None:
    steering = _current.get()
    if steering is not None:
        steering.pause_here()


@contextmanager
def steer(session_id: str, lease: Optional[str], signal: stop.StopSignal) -> Iterator[RunSteering]:
    """Steer the run of `session_id` inside the block (inside `stop.watch`, whose `signal` ends waits)."""
    steering = RunSteering(session_id, lease, signal)
    with _active_lock:
        _active[session_id] = steering
        if len(_active) == 1:
            add_pre_invocation_hook(_pause_hook, rings_bell=True)
    token = _current.set(steering)
    try:
        # A pause asked for before the run was registered here (the watcher reads only registered runs).
        _apply(write_path.borrowed(f"session {session_id}'s steering requests", partial(_rows, [session_id])))
        yield steering
    finally:
        _current.reset(token)
        with _active_lock:
            if _active.get(session_id) is steering:
                del _active[session_id]
            if not _active:
                remove_pre_invocation_hook(_pause_hook)
        steering.close()


@contextmanager
def attending(session: Session, lease: Optional[str], signal: stop.StopSignal, model_runtime) -> Iterator[None]:
    """Inside the block, `model_runtime` (the run's) asks a person to approve the calls that need it
    and the run can be paused, if the session was launched attended; else nothing changes."""
    if not session.attended:
        yield
        return
    with steer(str(session.pk), lease, signal) as steering:
        model_runtime.unattended, model_runtime.approver = False, steering
        yield


def read_requests(session_ids: list[str]) -> None:
    """The stop watcher's reader: the answers and pause flags of the attended runs among `session_ids`."""
    with _active_lock:
        mine = [session_id for session_id in session_ids if session_id in _active]
    if mine:
        _apply(_rows(mine))  # on the watcher's own connection, kept for its life


def _rows(session_ids: list[str]) -> list[tuple]:
    return list(Session.objects.filter(pk__in=session_ids).values_list("pk", "pause_requested", "approval_answers"))


def _apply(rows: list[tuple]) -> None:
    for session_id, pause_requested, answers in rows:
        with _active_lock:
            steering = _active.get(str(session_id))
        if steering is not None:
            steering.update(pause_requested, answers)


def wake(session_id) -> None:
    """The session's answers or pause changed: have this process's watcher read them now if it runs it,
    and publish the wake-up for the process that does otherwise."""
    with _active_lock:
        here = str(session_id) in _active
    if here:
        stop.poll_now()
    else:
        stop.publish_wakeup(STEER_CHANNEL, session_id)


def _woken(session_id: str) -> None:
    with _active_lock:
        here = session_id in _active
    if here:
        stop.poll_now()


# -- a person's side: what waits, and the answers, pauses and resumes (the API and the pages) --------

def pending_approvals(session: Session) -> list[dict]:
    """The session's calls waiting for approval, oldest first: {"node": seq, "tool", "arguments", "depth",
    "requested_at", "path": the names of the calls from the entry call down to it}."""
    waiting = list(session.nodes.filter(status=Node.Status.AWAITING_APPROVAL).order_by("seq"))
    callers = _callers_of(waiting)
    return [{"node": node.seq, "tool": node.name, "arguments": node.input or {}, "depth": node.depth,
             "requested_at": iso(node.started_at), "path": _call_path(node, callers)} for node in waiting]


def _callers_of(nodes: list[Node]) -> dict:
    """{id: (name, parent id)} of every caller of `nodes`, up to the entry call: one query per level of
    nesting, however many calls wait (one query per caller of each was N+1 in a polled list)."""
    callers: dict = {}
    wanted = {node.parent_id for node in nodes} - {None}
    while wanted:
        rows = list(Node.objects.filter(pk__in=wanted).values_list("pk", "name", "parent_id"))
        callers.update((pk, (name, parent_id)) for pk, name, parent_id in rows)
        wanted = {parent_id for _, _, parent_id in rows} - {None} - callers.keys()
    return callers


def _call_path(node: Node, callers: dict) -> list[str]:
    names, parent_id = [node.name], node.parent_id
    while parent_id in callers:
        name, parent_id = callers[parent_id]
        names.append(name)
    return names[::-1]


def answer_approval(session: Session, seq: int, approve: bool, reason: str = "") -> dict:
    """Store a person's answer to the call waiting at `seq`, then wake its run (see the module); raises
    `write_path.NoSuchRequest` or `write_path.AlreadyAnswered`."""
    answer = write_path.answer_approval(session.pk, seq, approve, reason)
    wake(session.pk)
    return answer


def set_pause(session: Session, paused: bool) -> Session:
    """Ask the run to pause at its next boundary (or to go on), then wake it; the session as stored after.
    Like a stop, a no-op once the session has ended."""
    stored = write_path.request_pause(session.pk, paused)
    if stored is None:
        return Session.objects.get(pk=session.pk)
    wake(session.pk)
    return stored


stop.read_also(read_requests)
stop.listen_also(STEER_CHANNEL, _woken)
