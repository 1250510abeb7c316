"""The process's group-commit writer: one for all its runs, started by the first write, flushed at exit.

`GroupWriter` (`group_commit`) is the writer itself, writing its batches in a thread of this process, or
`ProcessWriter` (`writer_process`), handing them to a writer process (`OPENPROGRAM_WRITER`: "auto" asks
for one in a long-lived serving process, which says it is one with `serving_process()`). This module
keeps the one a process uses (`process_writer`), lets a test put its own in place (`use_writer`), and
gives the session writes their way to wait for a session's queued nodes (`flush_session`) and to let the
writer forget a session that has ended (`session_ended`).
"""
from __future__ import annotations

import atexit
import os
import threading
from contextlib import contextmanager
from typing import Iterator, Optional

from django.core.exceptions import ValidationError
from django.db import DEFAULT_DB_ALIAS, connections

from ...conf import conf
from .group_commit import GroupWriter, session_key
from .writer_process import ProcessWriter

_writer: Optional[GroupWriter] = None
_writer_lock = threading.Lock()
_serving = False  # this is a long-lived serving process (`serving_process`)


def _forget_parent_writer() -> None:
    """In a forked child: the parent's writer thread and queue did not come along, so the child makes
    its own, as any process that is not serving. (Checking the pid on every write instead costs a
    system call per write.)"""
    global _writer, _writer_lock, _serving
    if isinstance(_writer, ProcessWriter):
        _writer.abandon()  # its writer process must see its pipes close when the serving process ends
    _writer, _writer_lock, _serving = None, threading.Lock(), False


os.register_at_fork(after_in_child=_forget_parent_writer)


def process_writer() -> GroupWriter:
    """This process's writer (one for all its runs), started by the first write."""
    global _writer
    writer = _writer
    if writer is not None:
        return writer
    with _writer_lock:
        if _writer is None:
            _writer = ProcessWriter() if writes_in_a_process() else GroupWriter()
        return _writer


def writes_in_a_process() -> bool:
    """Whether this process's batches go to a writer process (`OPENPROGRAM_WRITER`): never for a SQLite
    database in this process's memory, which no other process can open."""
    connection = connections[DEFAULT_DB_ALIAS]
    if connection.vendor == "sqlite" and connection.creation.is_in_memory_db(connection.settings_dict["NAME"]):
        return False
    return conf.WRITER == "process" or (conf.WRITER == "auto" and _serving)


def serving_process() -> None:
    """Say this is a long-lived serving process (a server, a Celery worker): with OPENPROGRAM_WRITER=auto
    its batches go to a writer process, which is started now, so that the first run does not wait for it."""
    global _serving
    _serving = True
    writer = process_writer()
    if isinstance(writer, ProcessWriter):
        writer.start()


def running_writer() -> Optional[GroupWriter]:
    """The writer this process has started, if any (with none, nothing is pending)."""
    return _writer


def flush_session(session_id) -> Optional[BaseException]:
    """Make the session's queued node writes durable before the caller reads or changes the session.

    Inside a transaction nothing is waited for: the writer could not see that transaction's rows, and
    on SQLite it would wait for the write lock the caller may hold. Writes made inside a transaction
    are written in it, at once (see `run_writes`), so none of the caller's own is pending.
    """
    writer = running_writer()
    if writer is None or connections[DEFAULT_DB_ALIAS].in_atomic_block:
        return None
    try:
        key = session_key(session_id)
    except ValidationError:
        return None  # no such session can have writes queued
    return writer.flush(key)


def session_ended(session_id) -> None:
    """The session has its terminal status: the writer forgets it."""
    writer = running_writer()
    if writer is not None:
        writer.forget(session_id)



@contextmanager
def use_writer(writer: GroupWriter) -> Iterator[GroupWriter]:
    """Make `writer` the process's writer in the block (tests: a tiny queue, a gate), then stop it."""
    global _writer
    with _writer_lock:
        previous, _writer = _writer, writer
    try:
        yield writer
    finally:
        with _writer_lock:
            _writer = previous
        writer.stop()


def _flush_at_exit() -> None:
    writer = running_writer()
    if writer is not None:
        writer.flush()


atexit.register(_flush_at_exit)
