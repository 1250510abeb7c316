"""`DjangoRecorder`: the runtime's recorder seam implemented on the ORM, one session per recorder.

Install it around a run with `runtime.use_recorder(DjangoRecorder(session))`. Entries and exits queue
their node writes through `dag.recording.write_path.RunWrites` and return at once: the process's
group-commit writer commits them in batches. The recorder keeps what it wrote in memory
(`run_nodes.RunNodes`): a backfill needs no read, and a model call's context, showing every call made
before it, is chosen there, without waiting for a commit or borrowing a connection (past
`run_nodes.MOST_NODES` nodes, the run's writes are flushed and the context is read from the database).

Async agentic functions call the recorder from inside an event loop, where the ORM refuses to run;
`dag.recording.loop_offload` moves those writes to a private thread. `close()` ends that thread (it also ends
when the recorder is garbage-collected).
"""
from __future__ import annotations

from datetime import datetime
from functools import partial
from typing import Any, Optional

from runtime.approval import take_approved
from runtime.context import Frame
from runtime.recorder import Recorder
from runtime.tracebacks import user_traceback

from ..models import Node, Session
from . import clock, write_path
from .context_render import render_context_of, render_frame_context
from .loop_offload import LoopOffload
from .run_nodes import RunNodes, stored_nodes
from .values import clean_text, json_safe


def error_text(error: Optional[BaseException]) -> str:
    """"ValueError: the message", as node and session errors show an exception."""
    if error is None:
        return ""
    message = clean_text(str(error))  # a message quoting binary data must not fail the write
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


HIDDEN_ARGUMENT = "<hidden>"


def recorded_arguments(frame: Frame) -> dict:
    """The call's arguments as the DAG keeps them: parameters marked `input={"p": {"hidden": True}}`
    (kept from forms and models, e.g. a token) are masked, so they never reach a page or a prompt."""
    arguments = frame.arguments()
    meta = frame.tool.input
    if meta and any(options.get("hidden") for options in meta.values()):
        arguments = {name: HIDDEN_ARGUMENT if meta.get(name, {}).get("hidden") else value
                     for name, value in arguments.items()}
    return json_safe(arguments)


def recorded_ancestor(frame: Optional[Frame]) -> Optional[Frame]:
    """`frame` or its nearest ancestor that has a node (hidden frames have none)."""
    while frame is not None and frame.node is None:
        frame = frame.parent
    return frame


class DjangoRecorder(Recorder):
    """Writes the calls of one run into `session`'s DAG (a `Session` or its id).

    `lease`: the worker id the run claimed the session with. Every write is then fenced by it: once the
    session has ended or another worker holds it, the write is refused and raises `WriteRefused` (a
    `CancelledError`) into the run, which stops. `empty`: the session has no nodes yet (its claim read
    so), so the run's own are all of them; otherwise they are read once, at the run's first context.
    """

    def __init__(self, session, lease: Optional[str] = None, *, empty: bool = False):
        self.session_id = session.pk if isinstance(session, Session) else Session._meta.pk.to_python(session)
        self.lease = lease
        # Nodes this recorder opened and has not closed yet, by id: their state for the backfill.
        self._open: dict[int, Node] = {}
        # Nodes of calls waiting for a person's approval, by id, until approved (then open) or ended.
        self._awaiting: dict[int, Node] = {}
        self._writes = write_path.RunWrites(self.session_id, lease)
        self._nodes = RunNodes(complete=empty)
        self._offload = LoopOffload()
        self._off_loop = self._offload.run

    def close(self) -> Optional[BaseException]:
        """Wait for the run's queued writes, then release the thread (and database connection) used for
        writes from event loops, if any. Returns why some of the run's writes did not commit (refused
        or failed), None if all did."""
        try:
            return self._off_loop(self._writes.flush, raise_failure=False)
        finally:
            self._offload.close()

    def flush(self) -> None:
        """Wait until every write of this recorder has committed; raises a refused or failed one."""
        self._off_loop(self._writes.flush)

    # -- code nodes ------------------------------------------------------------------------------

    def function_entered(self, frame: Frame) -> None:
        approved = take_approved(frame)
        if approved is not None and approved.node in self._awaiting:
            node = self._awaiting.pop(approved.node)  # the node that waited for the approval runs now
            self._end_waiting(node, status=Node.Status.RUNNING, started_at=clock.now())
            self._open[node.id] = node
            frame.node = node.id
            return
        node = self._off_loop(self._create, frame, Node.Status.RUNNING, "", clock.now(), None)
        self._open[node.id] = node
        frame.node = node.id

    def function_exited(self, frame: Frame, status: str, output: Any = None,
                        error: Optional[BaseException] = None) -> None:
        node = self._open.pop(frame.node, None)
        if node is None:
            return
        failed = {"traceback": clean_text(user_traceback(error))} if status == Node.Status.ERROR else {}
        self._off_loop(self._finish, node, status=status, output=json_safe(output),
                       error=error_text(error), **failed)

    def function_refused(self, frame: Frame, error: BaseException) -> None:
        now = clock.now()
        # What refused it, as data ("depth", "budget:llm_calls"): the browser reads this, never the text.
        refusal = str(getattr(error, "refusal", "") or "")[:Node._meta.get_field("refusal").max_length]
        node = self._off_loop(self._create, frame, Node.Status.REFUSED, error_text(error), now, now, refusal)
        frame.node = node.id

    def _create(self, frame: Frame, status: str, error: str, started: datetime,
                finished: Optional[datetime], refusal: str = "") -> Node:
        return self._nodes.record(self._writes.create, status=status, error=error, refusal=refusal,
                                  started_at=started, finished_at=finished, **self._code_fields(frame))

    def _finish(self, node: Node, **fields: Any) -> None:
        self._writes.finish(node, **fields)
        self._nodes.amend(node.id, fields)

    @staticmethod
    def _code_fields(frame: Frame) -> dict:
        """The fields of a code node that its call's frame gives."""
        parent = recorded_ancestor(frame.parent)
        return dict(kind=Node.Kind.CODE, name=frame.name, parent_id=parent.node if parent is not None else None,
                    input=recorded_arguments(frame), output=None, doc=frame.doc, depth=frame.depth,
                    name_depth=frame.name_depth, expose=frame.expose, render_range=frame.render_range)

    # -- calls waiting for a person's approval (runtime.approval) --------------------------------

    def approval_requested(self, frame: Frame) -> None:
        node = self._off_loop(self._nodes.record, self._create_awaiting, started_at=clock.now(),
                              **self._code_fields(frame))
        self._awaiting[node.id] = node
        frame.node = node.id

    def approval_ended(self, frame: Frame, status: str, error: Optional[BaseException]) -> None:
        node = self._awaiting.pop(frame.node, None)
        if node is not None:
            refusal = str(getattr(error, "refusal", "") or "")
            self._end_waiting(node, status=status, error=error_text(error), refusal=refusal)

    def _create_awaiting(self, **fields: Any) -> Node:
        # Its parent's row first: the waiting node is written at once, for a person to see. Flushed while
        # `record` numbers it, so no write of another thread of the run comes between.
        self._writes.flush()
        return write_path.borrowed(f"session {self.session_id}'s approval request", partial(
            write_path.create_awaiting_node, self.session_id, lease=self.lease, **fields))

    def _end_waiting(self, node: Node, **fields: Any) -> None:
        if self._off_loop(write_path.borrowed, f"session {self.session_id}'s approval answer", partial(
                write_path.end_awaiting_node, node, lease=self.lease, **fields)):
            self._nodes.amend(node.id, fields)

    # -- llm nodes -------------------------------------------------------------------------------

    def llm_started(self, frame: Optional[Frame], request: dict) -> Any:
        if frame is not None and frame.hidden:
            return None  # a hidden function writes nothing, its model calls included
        owner = recorded_ancestor(frame)
        model = request.get("model") or ""
        node = self._off_loop(
            self._nodes.record, self._writes.create, kind=Node.Kind.LLM, name="llm", status=Node.Status.RUNNING,
            parent_id=owner.node if owner is not None else None,
            input=json_safe({key: request.get(key) for key in ("system", "messages", "tools", "model")}),
            depth=owner.depth if owner is not None else 0,
            name_depth=owner.name_depth if owner is not None else 0,
            expose=owner.expose if owner is not None else "io",
            model=str(model)[:200], started_at=clock.now())
        self._open[node.id] = node
        return node.id

    def llm_finished(self, handle: Any, status: str, reply: Optional[dict] = None,
                     usage: Optional[dict] = None, error: Optional[BaseException] = None) -> None:
        node = self._open.pop(handle, None)
        if node is None:
            return
        output = None
        replayed = {}
        if reply is not None:
            output = json_safe({"text": reply.get("text"), "tool_calls": reply.get("tool_calls") or []})
            replayed = {"replayed": True} if reply.get("replayed") else {}
        self._off_loop(self._finish, node, status=status, output=output,
                       usage=json_safe(usage) if usage is not None else None, error=error_text(error), **replayed)

    # -- the session -----------------------------------------------------------------------------

    def budget_updated(self, limits: dict, spend: dict) -> None:
        """A delegation budget's limits or spend changed: keep them on the session for viewers."""
        self._off_loop(write_path.borrowed, f"session {self.session_id}'s budget", lambda: write_path.update_session(
            self.session_id, lease=self.lease, budget=limits, budget_spend=spend))

    # -- context for model calls -----------------------------------------------------------------

    def render_context(self, frame: Frame) -> Optional[str]:
        viewer = recorded_ancestor(frame)
        if viewer is None:
            return None
        render_range = frame.render_range or viewer.render_range
        held = self._nodes.held()
        if held is None and not self._nodes.given_up:
            self._off_loop(self._nodes.read_stored, self._stored_nodes)
            held = self._nodes.held()
        if held is not None:
            return render_context_of(held, viewer.node, None, render_range)
        self.flush()  # read-your-writes: the context shows every call made before this model call
        node = self._open.get(viewer.node)
        seq = node.seq if node is not None else None
        return self._off_loop(write_path.borrowed, f"session {self.session_id}'s context", partial(
            render_frame_context, self.session_id, viewer.node, seq, render_range))

    def _stored_nodes(self, most: int) -> list[dict]:
        """The session's first `most` nodes as stored, by `seq`, once the run's queued writes are in."""
        self._writes.flush()
        return write_path.borrowed(f"session {self.session_id}'s nodes", partial(stored_nodes, self.session_id, most))
