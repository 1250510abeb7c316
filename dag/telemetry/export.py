"""Sending the spans of ended nodes to an OTLP/HTTP receiver (OPENPROGRAM_OTLP_ENDPOINT).

The forwarder listens to what the write path publishes after each commit (`dag.live.broadcast`), so a
run never calls it: in the writer's thread it only keeps the published list. Its own thread, asleep
while nothing is published, gathers SEND_EVERY_S of it at a time, picks the records of the nodes that
ended and hands them to the span process (`span_process`) as one JSON message; that process builds
their spans and sends them, batched, with the official SDK: the serving process builds no span at all.
What a writer process encoded is handed over as it is, with where the ends of nodes are in it
(`take_runs`): the span process decodes those, and the serving process nothing.

When the receiver is away, the span process drops the batch and tells the forwarder, which for AWAY_S
then drops the nodes that end right where they are published, counted, unkept and unsent (no thread
woken, nothing encoded or built); then it hands them over again and the next batch tries again. A
warning here says how many spans were lost so far (at most once a minute). A span process that falls
behind or dies loses what it is handed past MAX_WAITING changes, counted the same way; a run never waits.
"""
from __future__ import annotations

import atexit
import logging
import subprocess
import threading
import time
from collections import deque
from typing import Optional

import orjson

from .. import piped_child
from ..conf import conf
from ..live import broadcast

log = logging.getLogger(__name__)

TRACES_PATH = "/v1/traces"
WARN_EVERY_S = 60.0
SEND_EVERY_S = 0.05
# Bytes the pipe to the span process holds: a run's worth of changes. Written into a 64 KiB pipe, they went
# in dozens of chunks, and the sending thread took the interpreter lock back from the run after each one
# (a 2,000-call run 40-70 % slower; with 1 MiB, no slower than without export).
PIPE_BYTES = 1 << 20
# Published changes (each a list of messages) waiting for the sending thread; past it they are dropped.
MAX_WAITING = 10_000
# After a batch the receiver did not take, how long the nodes that end are dropped here, unsent.
AWAY_S = 5.0
# The clock AWAY_S is measured on (a test's handle).
_clock = time.monotonic
CHILD_MAIN = "import sys; from dag.telemetry.span_process import main; main(sys.argv)"


def traces_url(endpoint: str) -> str:
    """The receiver's traces URL: the endpoint as given when it names a path, else with /v1/traces
    (as OTEL_EXPORTER_OTLP_ENDPOINT is read)."""
    endpoint = endpoint.rstrip("/")
    return endpoint if endpoint.endswith(TRACES_PATH) else endpoint + TRACES_PATH


class SpanForwarder:
    """A broadcast listener handing each ended node to a span process of its own (see the module)."""

    def __init__(self, endpoint: str, timeout_s: float):
        self.url = traces_url(endpoint)
        self.exported = 0
        self.dropped = 0  # by the span process and here (the receiver away; the span process behind or dead)
        self.forwarded = 0  # ended nodes handed to the span process
        self._dropped_here = 0
        self._failures = 0  # batches the receiver did not take, as the span process last said
        self._away_until = 0.0  # on `_clock`: till then, the receiver is taken for away
        self._warned_at: Optional[float] = None
        self._waiting: deque = deque()
        self._flushes: deque = deque()  # the events of flushes sent and not yet answered
        self._lock = threading.Lock()  # the counts
        self._send_lock = threading.Lock()  # one sender at a time: a flush's marker follows what it covers
        self._closing = threading.Event()
        self._published = threading.Event()  # something waits for the sending thread
        self.timeout_s = timeout_s
        self.process: Optional[subprocess.Popen] = None
        self._start_lock = threading.Lock()

    def _started(self) -> bool:
        """Start the span process and the threads that talk to it, at the first change published: a
        process that publishes none (`migrate`, a writer process) starts nothing. False if it is closed."""
        with self._start_lock:
            if self.process is None and not self._closing.is_set():
                self._start_process(self.timeout_s)
                self._sender = threading.Thread(target=self._send_loop, name="otlp-send", daemon=True)
                self._reader = threading.Thread(target=self._read_loop, name="otlp-read", daemon=True)
                self._sender.start()
                self._reader.start()
            return self.process is not None

    def _start_process(self, timeout_s: float) -> None:
        self.process, self.sending, self.receiving = piped_child.start(
            CHILD_MAIN, self.url, str(timeout_s), sending_bytes=PIPE_BYTES)

    def __call__(self, session_id: str, messages: list) -> None:
        """In the writer's thread, after a commit: keep the changes for the sending thread, nothing more."""
        if self._may_keep(lambda: len(broadcast.ended_nodes(messages)), past_room=len(messages)):
            self._keep((str(session_id), messages))

    def take_runs(self, session_id: str, runs: list, ends: list[int]) -> None:
        """`__call__` for changes a writer process encoded (`broadcast.publish_runs`): kept as they are,
        and the span process decodes the ends of nodes among them (`ends`, their positions), so the
        serving process decodes nothing."""
        if self._may_keep(lambda: len(ends), past_room=len(ends)) and ends:
            self._keep((str(session_id), runs, ends))

    def _may_keep(self, ended, *, past_room: int) -> bool:
        """Whether what was just published may be kept for the sending thread. Not while the receiver is
        away: the `ended()` nodes in it are counted dropped instead (no thread is woken); nor past
        MAX_WAITING (`past_room` counted dropped); nor once the forwarder is closed."""
        if self.process is None and not self._started():
            return False
        if _clock() < self._away_until:
            self._lost(ended())
            return False
        if len(self._waiting) >= MAX_WAITING:
            self._lost(past_room)
            return False
        return True

    def _keep(self, waiting: tuple) -> None:
        self._waiting.append(waiting)
        if not self._published.is_set():
            self._published.set()

    def _send_loop(self) -> None:
        """Asleep while nothing is published; SEND_EVERY_S after a change, all published by then in one message."""
        while True:
            self._published.wait()
            if self._closing.wait(SEND_EVERY_S):
                break  # `close` sends what is waiting
            self._published.clear()  # before the changes are taken: one published after it wakes the next turn
            with self._send_lock:
                self._send_waiting()

    def _send_waiting(self) -> None:
        ended, encoded, spans = [], [], 0
        while self._waiting:
            waiting = self._waiting.popleft()
            if len(waiting) == 3:  # a writer process's encoded runs (`take_runs`)
                session_id, runs, ends = waiting
                encoded.append((session_id, [joined for _, _, joined in runs], ends))
                spans += len(ends)
                continue
            session_id, messages = waiting
            nodes = broadcast.ended_nodes(messages)
            if nodes:
                ended.append((session_id, nodes))
                spans += len(nodes)
        if not spans:
            return
        with self._lock:
            away, failures = _clock() < self._away_until, self._failures
        if away:
            self._lost(spans)
        elif self._send(["ended", failures, ended, encoded], spans):
            self.forwarded += spans

    def _send(self, message: list, spans: int = 0) -> bool:
        try:
            self.sending.send_bytes(orjson.dumps(message))
            return True
        except OSError:  # the span process ended: what it is handed is lost
            self._lost(spans)
            return False

    def _read_loop(self) -> None:
        while True:
            try:
                totals = orjson.loads(self.receiving.recv_bytes())
            except (EOFError, OSError):
                break
            self._account(totals)
            if totals.get("flushed") and self._flushes:
                self._flushes.popleft().set()
        for flush in list(self._flushes):  # the process ended: nobody will answer them
            flush.set()

    def _account(self, totals: dict) -> None:
        with self._lock:
            more_dropped = totals["dropped"] + self._dropped_here > self.dropped
            self.exported = totals["exported"]
            self.dropped = totals["dropped"] + self._dropped_here
            if totals["failures"] > self._failures:  # the receiver did not take a batch: it is away
                self._failures = totals["failures"]
                self._away_until = _clock() + AWAY_S
        if more_dropped:
            self._warn()

    def _lost(self, spans: int) -> None:
        """`spans` were not handed over (about, for the changes past MAX_WAITING: some were no ends)."""
        if not spans:
            return
        with self._lock:
            self._dropped_here += spans
            self.dropped += spans
        self._warn()

    def _warn(self) -> None:
        now = time.monotonic()
        with self._lock:
            if self._warned_at is not None and now - self._warned_at < WARN_EVERY_S:
                return
            self._warned_at, dropped = now, self.dropped
        log.warning("OpenTelemetry: %d span(s) dropped so far: the receiver at %s did not take them (setting "
                    "OPENPROGRAM_OTLP_ENDPOINT); runs go on unaffected", dropped, self.url)

    def flush(self, timeout_s: float = 60.0) -> bool:
        """Send every span of the changes published so far; False if that took longer than `timeout_s`."""
        if self.process is None:
            return True  # nothing was published
        done = threading.Event()
        with self._send_lock:
            self._send_waiting()
            self._flushes.append(done)
            if not self._send(["flush"]):
                return False
        return done.wait(timeout_s)

    def close(self, timeout_s: float = 30.0) -> None:
        """Send what is waiting, then end the span process (it sends what it holds first)."""
        with self._start_lock:
            self._closing.set()
            self._published.set()
        if self.process is None:
            return
        self._sender.join(timeout_s)
        with self._send_lock:
            self._send_waiting()
        self.sending.close()
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._reader.join(timeout_s)
        self.receiving.close()


_installed: Optional[SpanForwarder] = None
_install_lock = threading.Lock()


def start(endpoint: str, timeout_s: float) -> SpanForwarder:
    """Export every node of this process's runs as a span to `endpoint`, replacing any forwarder before."""
    global _installed
    forwarder = SpanForwarder(endpoint, timeout_s)
    with _install_lock:
        previous, _installed = _installed, forwarder
        broadcast.subscribe(forwarder)
    if previous is not None:
        _retire(previous)
    return forwarder


def stop() -> None:
    """Stop exporting: what is queued is sent (within the exporter's timeout), then nothing more."""
    global _installed
    with _install_lock:
        previous, _installed = _installed, None
    if previous is not None:
        _retire(previous)


def _retire(forwarder: SpanForwarder) -> None:
    broadcast.unsubscribe(forwarder)
    forwarder.close()


def start_from_settings() -> SpanForwarder:
    """At the app's start, OPENPROGRAM_OTLP_ENDPOINT set: export to it (what is queued is sent at exit)."""
    forwarder = start(conf.OTLP_ENDPOINT, conf.OTLP_TIMEOUT_S)
    atexit.register(stop)
    return forwarder
