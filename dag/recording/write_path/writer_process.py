"""A writer process: the group-commit batches of a serving process, written by a process of their own.

In one process, the runs, the writer thread and the event loop take turns under one interpreter lock:
however many cores the machine has, a recorded call costs the sum of their work. With a writer process
(`OPENPROGRAM_WRITER`, dag.conf), the serving process keeps its queue and batches (`ProcessWriter`, a
`group_commit.GroupWriter`) and hands each batch to its writer process, which writes it as a writer
thread would (`batch_writer.BatchWriter`: one transaction, part by part if that fails, refusals
explained, the next batch staged on PostgreSQL) and answers with each session's outcome: why its writes
were refused, or its changes encoded for the live stream (`frames.encoded_runs`), which the serving
process publishes. The database work and the encoding of what viewers are sent then run on another core,
beside the runs.

Between the two, over a pair of pipes (`multiprocessing.connection` framing, pickled: `writer_wire`; the
writer process's own loop is `writer_process_main`):
- to the writer: `("hello", database settings)` first, then `("batch", number, writes)`, each write a
  tuple (`writer_wire.to_wire`), and `("forget", session)`;
- from it: `("ready",)` once it has started (one that does not within `START_TIMEOUT_S` is given up),
  then `("done", number, [(session, failure or None, runs, ends), ...])`, in the order the batches went
  (`broadcast.publish_runs`).

At most `IN_FLIGHT` batches are sent and not yet answered (one being written, one waiting beside it,
which counts against the queue's room), so a crash of either process loses what a writer thread's would:
about one batch window, never more than two batches. If the writer process ends (killed, out of memory),
every session with a batch in flight is failed (`WriterProcessLost`: its run stops at its next write,
since whether those writes committed is not known), its writes still queued are not made, and the next
batch starts a new writer process (not before `RESTART_AFTER_S` after the last one started). If the
serving process ends, its writer process sees the pipe close and ends after the batch it is writing
(a forked child of the serving process lets go of the pipes: `abandon`); a Ctrl-C or a stop sent to the
whole process group leaves it writing until then.
"""
from __future__ import annotations

import logging
import os
import pickle
import threading
import time
from collections import deque
from typing import Any, Optional

from django.db import DEFAULT_DB_ALIAS, connections

from ... import piped_child
from ...live import broadcast
from ...thread_names import name_native_thread
from .group_commit import GroupWriter, _Barrier, session_key
from .writer_wire import encode, to_wire

log = logging.getLogger(__name__)

# Batches sent to the writer process and not yet answered.
IN_FLIGHT = 2
# A writer process that ends this soon after it started is not replaced before this much time has passed
# since its start (one that cannot start at all, its settings broken, would be started again for
# every batch otherwise); the batches meanwhile wait.
RESTART_AFTER_S = 1.0
# The longest a new writer process may take to start (Django set up) before it is given up.
START_TIMEOUT_S = 60.0
# How the sending thread waits out `RESTART_AFTER_S` (a test's handle).
_sleep = time.sleep
# The writer process's program: Django is set up before anything of the app is imported (this package
# imports the models), then `main` serves the pipes whose descriptors follow on its command line.
CHILD_MAIN = ("import sys, django; django.setup(); "
              "from dag.recording.write_path.writer_process_main import main; main(sys.argv)")


class WriterProcessLost(RuntimeError):
    """The writer process ended with this session's writes in flight: whether they were committed is not
    known, so the run stops."""


# --- the serving process's side -----------------------------------------------------------------------

class _Child:
    """A running writer process and the two ends of its pipes. Sends are serialized: the sending thread
    sends batches, any thread may send a "forget". Only the thread that reads its answers closes the
    pipe it reads (`receiving`): closed from another thread, its descriptor could be given to the next
    writer process's pipe while still being read."""

    def __init__(self, database: dict):
        # The parent's settings module; the project's own where the parent was set up some other way.
        self.process, self.sending, self.receiving = piped_child.start(
            CHILD_MAIN, sending_bytes=PIPE_BYTES, receiving_bytes=PIPE_BYTES,
            env={"DJANGO_SETTINGS_MODULE": os.environ.get("DJANGO_SETTINGS_MODULE", "openprogram_web.settings")})
        self.started = time.monotonic()
        self.retired = False  # set (under the writer's lock) once it is given up, whatever ended it
        self._send_lock = threading.Lock()
        try:
            self.send(encode(("hello", database)))
        except BaseException:  # it ended already: nothing of it is kept
            self.kill()
            self.close_sending()
            self.receiving.close()
            raise

    def send(self, message: bytes) -> None:
        """Send an `encode`d message; OSError once the process has ended or the pipe was closed."""
        with self._send_lock:
            self.sending.send_bytes(message)

    def receive(self):
        return pickle.loads(self.receiving.recv_bytes())

    def kill(self) -> int:
        """End the process if it still runs (a send it blocks then fails) and wait for it; its exit code."""
        if self.process.poll() is None:
            self.process.kill()
        return self.process.wait()

    def close_sending(self) -> None:
        """Close the pipe to it: a live writer process writes what it was sent, then ends."""
        with self._send_lock:
            self.sending.close()

    def abandon(self) -> None:
        """In a forked child of the serving process: let go of the inherited pipes, touching nothing else
        (a lock copied mid-use would never be released), so the writer process sees them close when the
        serving process does."""
        self.sending.close()
        self.receiving.close()


# Bytes a pipe holds before its writer waits: an answer carries its batch's changes encoded for the
# stream (about 600 bytes a call), more than the 64 KiB a Linux pipe holds by default, and the writer
# process should go on to its next batch, not wait for the serving process to read the answer.
PIPE_BYTES = 1 << 20


class ProcessWriter(GroupWriter):
    """A `GroupWriter` whose batches a writer process writes (see the module). `start()` starts the
    writer process now (a serving process does, so its first run does not wait for one to start)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._child: Optional[_Child] = None
        self._receiver: Optional[threading.Thread] = None
        self._starting = threading.Lock()  # one writer process started at a time, outside `_lock`
        # Batches sent and not yet answered, oldest first: [number, batch, its writes still held back, the
        # writer process it went to].
        self._in_flight: deque[list] = deque()
        self._sent = 0
        self._flight_room = threading.Condition(self._lock)
        self._restart_at = 0.0  # no writer process is started before then (`RESTART_AFTER_S`)

    def start(self) -> None:
        self._running_child()

    def flush(self, session_id: Any = None) -> Optional[BaseException]:
        if threading.current_thread() is self._receiver:
            return None  # a listener called with an answer: everything before it is committed
        return super().flush(session_id)

    def forget(self, session_id: Any) -> None:
        super().forget(session_id)
        with self._lock:
            child = self._child
        if child is not None:
            try:
                child.send(encode(("forget", session_key(session_id))))
            except OSError:
                pass  # ended: a new writer process knows nothing of the session anyway

    def stop(self) -> None:
        """Commit what is queued, then end the sending thread and the writer process."""
        super().stop()
        with self._lock:
            child, receiver = self._child, self._receiver
            self._child = None
            if child is not None:
                child.retired = True  # on purpose: its pipe closing is no loss
        if child is not None:
            child.close_sending()  # it writes what it was sent, answers, and ends
            code = child.process.wait()
            if receiver is not None:
                receiver.join()  # every answer read, up to the pipe's close
            self._fail_in_flight(child, RuntimeError(f"the writer process ended (exit code {code}) while stopping"))

    def abandon(self) -> None:
        """In a forked child of the serving process: let go of the writer process's pipes (see `_Child`)."""
        if self._child is not None:
            self._child.abandon()

    # -- the sending thread (GroupWriter's writer thread) ------------------------------------------------

    def _run(self) -> None:
        name_native_thread()
        try:
            while True:
                with self._lock:
                    while len(self._in_flight) >= IN_FLIGHT:
                        self._flight_room.wait()
                    wait = self._restart_at - time.monotonic() if self._child is None else 0
                if wait > 0:  # before taking a batch: what waits meanwhile keeps its room in the queue
                    _sleep(wait)
                batch = self._take()
                if batch is None:
                    return
                if batch:
                    self._send(batch)
        finally:
            with self._lock:
                if self._thread is threading.current_thread():
                    self._thread = None  # ended by surprise: the next write starts another

    def _send(self, batch: list) -> None:
        sessions = {entry.session_id for entry in batch if not isinstance(entry, _Barrier)}
        with self._lock:
            self._sent += 1
            number = self._sent
        while True:
            with self._lock:
                failed = sessions & self._failures.keys()
            # A session whose writes failed (a writer process lost with some of them) has none written after.
            writes = [to_wire(entry) for entry in batch
                      if not isinstance(entry, _Barrier) and entry.session_id not in failed]
            try:
                message = encode(("batch", number, writes))
            except Exception as exc:  # not sent: its sessions learn why at their next write
                log.exception("a batch of node writes could not be handed to the writer process")
                self._fail(batch, exc)
                self._settle(batch)
                return
            try:
                child = self._running_child()
            except Exception as exc:
                log.exception("the writer process could not be started")
                self._fail(batch, WriterProcessLost(f"the writer process could not be started ({type(exc).__name__}: "
                                                    f"{exc}); these writes were not made, and the run stops"))
                self._settle(batch)
                return
            with self._lock:
                if sessions & self._failures.keys() != failed:
                    continue  # a session failed meanwhile: handed over again, without its writes
                if child.retired:
                    continue  # lost meanwhile: to the next writer process
                # A batch sent while another is being written waits beside it: its writes keep their room.
                held = len(writes) if self._in_flight else 0
                self._held += held
                self._in_flight.append([number, batch, held, child])
                break
        try:
            child.send(message)
        except OSError as exc:  # it ended: what was in flight is lost with it, this batch too
            self._child_lost(child, exc)

    def _running_child(self) -> _Child:
        """The writer process, started if there is none (outside `_lock`: starting one takes a while)."""
        with self._lock:
            if self._child is not None:
                return self._child
        with self._starting:
            with self._lock:
                if self._child is not None:
                    return self._child
            try:
                child = _Child(dict(connections[DEFAULT_DB_ALIAS].settings_dict))
            except BaseException:
                with self._lock:
                    self._restart_at = time.monotonic() + RESTART_AFTER_S
                raise
            receiver = threading.Thread(target=self._receive, args=(child,), name="dag-writer-answers", daemon=True)
            with self._lock:
                self._child, self._receiver = child, receiver
            receiver.start()
            return child

    def _fail(self, batch: list, why: BaseException) -> None:
        with self._lock:
            for entry in batch:
                if not isinstance(entry, _Barrier):
                    self._failures[entry.session_id] = why

    # -- the receiving thread ---------------------------------------------------------------------------

    def _receive(self, child: _Child) -> None:
        name_native_thread()
        try:
            # Its first word says it has started (Django set up): one that never does is given up.
            if not child.receiving.poll(START_TIMEOUT_S):
                raise TimeoutError(f"the writer process did not start within {START_TIMEOUT_S:g} s")
            child.receive()
            while True:
                _, number, results = child.receive()
                self._answered(child, number, results)
        except Exception as exc:  # it ended, or its answers make no sense: it is replaced
            self._child_lost(child, exc)
        finally:
            child.receiving.close()

    def _answered(self, child: _Child, number: int, results: list) -> None:
        with self._lock:
            sent, batch, _, to = self._in_flight[0] if self._in_flight else (None, None, None, None)
            if to is not child or sent != number:
                raise RuntimeError(f"the writer process answered batch {number}, batch {sent} was awaited")
            self._in_flight.popleft()
            self._release_next()
        try:
            for session_id, failure, runs, ends in results:
                if failure is not None:
                    with self._lock:
                        self._failures[session_id] = failure
                else:
                    broadcast.publish_runs(session_id, runs, ends)
        except Exception:  # publishing must not keep the batch from being settled
            log.exception("publishing the writer process's batch %d failed", number)
        finally:
            self._settle(batch)

    def _release_next(self) -> None:  # called with the lock held
        """The oldest batch still in flight is being written now: its writes leave the queue's count."""
        if self._in_flight and self._in_flight[0][2]:
            self._held -= self._in_flight[0][2]
            self._in_flight[0][2] = 0
            self._not_full.notify_all()
        self._flight_room.notify_all()

    def _child_lost(self, child: _Child, why: BaseException) -> None:
        """`child` ended, or answers nonsense: it is killed if it still runs, the sessions of its batches in
        flight fail, and the next batch starts another. Once per writer process, whichever thread finds
        out first (a writer process stopped on purpose is no loss)."""
        with self._lock:
            if child.retired:
                return
            child.retired = True
            if self._child is child:
                self._child = None
            self._restart_at = child.started + RESTART_AFTER_S
        code = child.kill()  # first: a send it blocks then fails, and the sending lock is let go
        child.close_sending()
        lost = self._fail_in_flight(child, why)
        log.error("the writer process (pid %d) ended with exit code %s (%s: %s) and %d batch(es) in flight; "
                  "their sessions' runs stop", child.process.pid, code, type(why).__name__, why, lost)

    def _fail_in_flight(self, child: _Child, why: BaseException) -> int:
        """Fail and settle the batches still in flight to `child` (whether they committed is not known);
        how many there were."""
        with self._lock:
            lost = [entry for entry in self._in_flight if entry[3] is child]
            for entry in lost:
                self._in_flight.remove(entry)
                self._held -= entry[2]
                for session_id in {write.session_id for write in entry[1] if not isinstance(write, _Barrier)}:
                    self._failures[session_id] = WriterProcessLost(
                        f"the writer process ended ({type(why).__name__}: {why}) with writes of session "
                        f"{session_id} in flight; whether they were committed is not known, and the run stops")
            self._not_full.notify_all()
            self._flight_room.notify_all()
        for _, batch, _, _ in lost:
            self._settle(batch)
        return len(lost)
