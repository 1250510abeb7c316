"""The writer process's side of `writer_process`: its program reads batches from its serving process,
writes them (`batch_writer.BatchWriter`) and answers each, until the pipe closes.
"""
from __future__ import annotations

import logging
import pickle
import select
import signal
import threading
from multiprocessing.connection import Connection
from typing import Optional

from django.db import DEFAULT_DB_ALIAS, connections

from ...thread_names import name_native_thread
from .group_commit import IDLE_LINGER_S
from .writer_wire import encode, from_wire, portable

log = logging.getLogger(__name__)


# The longest the writer waits beside a batch on the server for the next batch (`_Feed.await_batch_or_results`);
# the results end the wait long before, unless the batch itself waits (on a lock): then reading them does.
AWAIT_LIMIT_S = 10.0


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

    def await_batch_or_results(self) -> None:
        """While a batch is on PostgreSQL (its statements sent, their results not read): wait until the
        next batch arrives or the server has answered, whichever comes first. The serving process sends
        the next batch once it has the answer to the one before, so it often arrives during this round
        trip, and is then staged during it too, not while the database waits. Never raises: a broken
        connection is reported when the results are read."""
        try:
            if self.ended or self.receiving.poll(0):
                return
            pgconn = connections[DEFAULT_DB_ALIAS].connection.pgconn
            pgconn.send_flush_request()  # results are sent as soon as they are made, not at the Sync
            while pgconn.flush():  # 1: not all of it sent yet, the socket full
                select.select([], [pgconn.socket], [], AWAIT_LIMIT_S)
            select.select([self.receiving.fileno(), pgconn.socket], [], [], AWAIT_LIMIT_S)
        except Exception:
            log.debug("waiting for the next batch beside the database's answer failed", exc_info=True)


def serve(receiving: Connection, sending: Connection) -> None:
    """Take the serving process's database settings from `receiving`, then write the batches it brings
    until it closes, answering each on `sending` (`write_batches`)."""
    _, database = pickle.loads(receiving.recv_bytes())  # ("hello", the serving process's database)
    # One connection, given back whenever the process idles (`_Feed.next_batch`): a pool would keep it
    # open instead, and nothing else here would take it.
    database = {**database, "OPTIONS": {name: value for name, value in database.get("OPTIONS", {}).items()
                                        if name != "pool"}}
    connections[DEFAULT_DB_ALIAS].settings_dict.update(database)
    sending.send_bytes(encode(("ready",)))
    try:
        write_batches(receiving, sending)
    finally:
        connections.close_all()


def write_batches(receiving: Connection, sending: Connection) -> None:
    """Write the batches `receiving` brings (in this thread's database connection) until it closes,
    answering each on `sending`, in their order."""
    from .batch_writer import BatchWriter

    failures: dict[str, BaseException] = {}
    writer = BatchWriter(failures)
    feed = _Feed(receiving, writer, failures)
    answers = _Answers(sending)

    def on_the_server() -> None:
        # While a batch is on the database server: the answer to the one before, then (the writer takes
        # the next batch after this) the next batch awaited, so that its staging is done meanwhile too.
        answers.send_due()
        feed.await_batch_or_results()

    try:
        while True:
            upcoming = writer.take_upcoming()
            if upcoming is not None:
                number, writes, staged = upcoming.token, upcoming.writes, upcoming.staged
            else:
                answers.send_due()  # no batch to send it beside: now, before waiting for one
                taken = feed.next_batch()
                if taken is None:
                    return
                (number, writes), staged = taken, None
            outcomes = writer.write(writes, lambda: feed.next_batch(wait=False), staged, meanwhile=on_the_server)
            answers.send_due()  # sent meanwhile, unless this batch had no round trip to send it in
            for (session_id, _), outcome in outcomes.items():
                if outcome.failure is not None:
                    failures[session_id] = outcome.failure
            answers.owe(number, outcomes)
    finally:
        answers.send_due()  # a batch committed before whatever ends the loop is still answered


class _Answers:
    """The answer to each batch, in the order of the batches. On PostgreSQL it goes while the server works
    on the next batch (`BatchWriter.write`'s `meanwhile`): the database then waits for neither the
    encoding of the batch's changes for the stream nor their sending, only for the next batch's
    statements. Without a next batch ready it goes at once."""

    def __init__(self, sending: Connection):
        self.sending = sending
        self._due: Optional[tuple[int, dict]] = None
        self._failed: Optional[BaseException] = None

    def owe(self, number: int, outcomes: dict) -> None:
        self._raise_failed()
        self._due = (number, outcomes)

    def send_due(self) -> None:
        """Send the answer owed, if any. Called inside a batch's round trip it must not raise: a failure
        to send (the serving process ended) is raised at the next `owe`."""
        if self._due is None:
            return
        number, outcomes = self._due
        self._due = None
        results = [(session_id, portable(outcome.failure), (), ()) if outcome.failure is not None
                   else (session_id, None, *_encoded(session_id, outcome.messages))
                   for (session_id, _), outcome in outcomes.items()]
        try:
            self.sending.send_bytes(encode(("done", number, results)))
        except Exception as exc:  # OSError once the serving process has ended
            self._failed = exc

    def _raise_failed(self) -> None:
        if self._failed is not None:
            raise self._failed


def _encoded(session_id: str, messages: list) -> tuple[list, list]:
    """The changes of a committed part, encoded for the stream, and where the ends of nodes are among
    them (`broadcast.end_positions`); none if they cannot be (its viewers find the gap and read them
    from the database), rather than the writer process ending with the batch's commits unanswered."""
    from ...live.broadcast import end_positions
    from ...live.frames import encoded_runs
    try:
        return encoded_runs(messages), end_positions(messages)
    except Exception:
        log.exception("the changes of session %s could not be encoded for the live stream", session_id)
        return [], []


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

