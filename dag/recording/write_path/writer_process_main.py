"""The writer process's side of `writer_process`: its program reads batches from its serving process,
writes them (`batch_writer.BatchWriter`) and answers each, until the pipe closes.
"""
from __future__ import annotations

import logging
import pickle
import signal
import threading
from multiprocessing.connection import Connection
from typing import Optional

from django.db import DEFAULT_DB_ALIAS, connections

from ...thread_names import name_native_thread
from .group_commit import IDLE_LINGER_S
from .writer_wire import encode, from_wire, portable

log = logging.getLogger(__name__)


class _Feed:
    """What the serving process sends, read batch by batch; a "forget" is done as it is met."""

    def __init__(self, receiving: Connection, writer, failures: dict):
        self.receiving = receiving
        self.writer = writer
        self.failures = failures
        self.ended = False

    def next_batch(self, *, wait: bool = True) -> Optional[tuple[int, list]]:
        """The next batch (number, writes); None once the pipe has closed, or (not `wait`) if none has
        arrived yet. Waiting past an idle linger, it gives its database connection back first, as a
        writer thread does (`group_commit.IDLE_LINGER_S`)."""
        if wait and not self.ended and not self.receiving.poll(IDLE_LINGER_S):
            connections.close_all()
        while not self.ended and (wait or self.receiving.poll(0)):
            try:
                message = pickle.loads(self.receiving.recv_bytes())
            except (EOFError, OSError):
                self.ended = True
                break
            if message[0] == "forget":
                self.failures.pop(message[1], None)
                self.writer.forget(message[1])
            elif message[0] == "batch":
                return message[1], [from_wire(item) for item in message[2]]
        return None


def serve(receiving: Connection, sending: Connection) -> None:
    """Write the batches `receiving` brings until it closes, answering each on `sending`."""
    from .batch_writer import BatchWriter

    _, database = pickle.loads(receiving.recv_bytes())  # ("hello", the serving process's database)
    # One connection, given back whenever the process idles (`_Feed.next_batch`): a pool would keep it
    # open instead, and nothing else here would take it.
    database = {**database, "OPTIONS": {name: value for name, value in database.get("OPTIONS", {}).items()
                                        if name != "pool"}}
    connections[DEFAULT_DB_ALIAS].settings_dict.update(database)
    sending.send_bytes(encode(("ready",)))
    failures: dict[str, BaseException] = {}
    writer = BatchWriter(failures)
    feed = _Feed(receiving, writer, failures)
    try:
        while True:
            upcoming = writer.take_upcoming()
            if upcoming is not None:
                number, writes, staged = upcoming.token, upcoming.writes, upcoming.staged
            else:
                taken = feed.next_batch()
                if taken is None:
                    return
                (number, writes), staged = taken, None
            results = []
            for (session_id, _), outcome in writer.write(writes, lambda: feed.next_batch(wait=False),
                                                         staged).items():
                if outcome.failure is not None:
                    failures[session_id] = outcome.failure
                    results.append((session_id, portable(outcome.failure), ()))
                else:
                    results.append((session_id, None, _encoded(session_id, outcome.messages)))
            sending.send_bytes(encode(("done", number, results)))
    finally:
        connections.close_all()


def _encoded(session_id: str, messages: list) -> list:
    """The changes of a committed part, encoded for the stream; none if they cannot be (its viewers find
    the gap and read them from the database), rather than the writer process ending with the batch's
    commits unanswered."""
    from ...live.frames import encoded_runs
    try:
        return encoded_runs(messages)
    except Exception:
        log.exception("the changes of session %s could not be encoded for the live stream", session_id)
        return []


def main(argv: list[str]) -> None:
    """The writer process (`CHILD_MAIN`, Django set up): `argv[1]` and `argv[2]`, the descriptors of the
    pipes from and to the serving process."""
    from openprogram_web.gc_tuning import tune_for_serving
    tune_for_serving()
    # Ctrl-C at a terminal (or a stop sent to the whole process group) reaches the writer process too: it
    # goes on writing what it was sent and ends when its serving process does (its pipe closes).
    for name in ("SIGINT", "SIGTERM"):
        signal.signal(getattr(signal, name), signal.SIG_IGN)
    threading.current_thread().name = "dag-writer-process"
    name_native_thread()
    try:
        serve(Connection(int(argv[1]), writable=False), Connection(int(argv[2]), readable=False))
    except (BrokenPipeError, EOFError):
        pass  # the serving process ended: nothing is left to answer

