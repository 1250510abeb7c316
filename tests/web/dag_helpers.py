"""Helpers shared by the DAG tests: a session to record into, a model call recorded as the exec loop does."""
from __future__ import annotations

import contextlib
import os
import threading
import uuid

from django.contrib.auth import get_user_model
from django.db import connection

from dag.models import Session
from dag.recording import write_path
from dag.recording.recorder import DjangoRecorder
from runtime import agentic_function, use_recorder
from runtime.context import current_frame, current_recorder

from .launch_helpers import wait_for


def new_session(function: str = "entry", username: str | None = None, **fields) -> Session:
    """A queued session; its owner is new unless `username` names one (created if missing).

    A fresh owner per session keeps counts per owner exact even when another test process shares
    the PostgreSQL test database.
    """
    username = username or f"dag-test-{uuid.uuid4().hex[:12]}"
    owner, _ = get_user_model().objects.get_or_create(username=username)
    return Session.objects.create(owner=owner, function=function, **fields)


@contextlib.contextmanager
def recording(session: Session, *, empty: bool = False):
    """Record every call made in the block into `session`; yields the recorder. Its writes are committed
    when the block ends, as a run's are before its session ends. `empty`: as a run says of a session it
    claimed with no nodes (`DjangoRecorder`)."""
    recorder = DjangoRecorder(session, empty=empty)
    try:
        with use_recorder(recorder):
            yield recorder
    finally:
        recorder.close()


def model_call(prompt: str, reply: str = "", tool_calls=(), *, status: str = "completed", error=None,
               model: str = "sim-1"):
    """Record one model exchange in the current frame, the way the exec loop reports it."""
    recorder = current_recorder()
    handle = recorder.llm_started(current_frame(), {
        "system": "You are terse.", "messages": [{"role": "user", "content": prompt}],
        "tools": [], "model": model})
    recorder.llm_finished(handle, status, {"text": reply, "tool_calls": list(tool_calls)},
                          {"input_tokens": len(prompt.split()), "output_tokens": len(reply.split())}, error)
    return handle


def visible_context() -> str | None:
    """What the current frame's next model call would be shown of the DAG."""
    return current_recorder().render_context(current_frame())


@agentic_function(register_globally=False)
def child(i: int) -> int:
    return i


@agentic_function(register_globally=False)
def parent(calls: int) -> int:
    """`calls` child calls: a run of leaf calls under one open frame."""
    return sum(child(i) for i in range(calls))


def claimed_by(worker: str) -> Session:
    """A new session, claimed by `worker` (its lease)."""
    session = write_path.claim_session(new_session().pk, worker=worker)
    assert session is not None
    return session


def written_off_beside_another() -> tuple:
    """Two claimed runs: one written off (its session ended `interrupted`, as the reaper would) that then
    queues a write ("late"), and another that queues one ("survivor"). Returns (the written-off session,
    its run's writes, the other session, its run's writes, its node)."""
    fenced, other = claimed_by("host-a:1"), claimed_by("host-b:2")
    fenced_writes = write_path.RunWrites(fenced.pk, lease="host-a:1")
    other_writes = write_path.RunWrites(other.pk, lease="host-b:2")
    write_path.finish_session(fenced.pk, "interrupted", error="written off")
    fenced_writes.create(kind="code", name="late")
    return fenced, fenced_writes, other, other_writes, other_writes.create(kind="code", name="survivor")


def write_waiting_for_room(writer, writes, name: str) -> threading.Thread:
    """A thread that creates node `name` through `writes` (a `RunWrites`), returned once that write
    waits for room in `writer`'s full queue; the thread ends when the write has gone in."""
    def one_more():
        try:
            writes.create(kind="code", name=name)
        finally:
            connection.close()

    late = threading.Thread(target=one_more)
    late.start()
    wait_for(lambda: writer.waiting_for_room == 1, 60, f"the write of {name} to wait for room")
    return late


def answer_from_a_fork(question) -> bytes:
    """What `question()` (bytes) gives in a forked child of this process; b"failed" if it raises. The child
    answers through a pipe and never returns into pytest."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            answer = question()
        except BaseException:
            answer = b"failed"
        os.write(write, answer)
        os._exit(0)
    os.close(write)
    try:
        return os.read(read, 64)
    finally:
        os.close(read)
        os.waitpid(pid, 0)
