"""The span process: where ended nodes become spans and are sent, beside the process that runs them.

Building a span and encoding it for OTLP cost about as much Python as recording the call did; in the
serving process they would take turns with the runs under one interpreter lock, and make every run
slower. So the serving process only hands over the ended nodes' records (`export.SpanForwarder`) and
this process, which never imports Django, does the rest with the official SDK: a BatchSpanProcessor
whose thread sends the spans with the OTLP/HTTP (protobuf) exporter.

Over a pair of pipes (`multiprocessing.connection` framing, JSON):
- from the serving process: `["ended", F, [[session id, [record, ...]], ...], [[session id, [joined,
  ...], [position, ...]], ...]]`, the nodes that ended, sent knowing of F failed batches (see `serve`):
  their records, and changes a writer process encoded (`frames.encoded_runs`, each run's changes joined
  by a newline) with the positions of the ends of nodes among them; and `["flush"]`;
- to it: `{"exported": N, "dropped": M, "failures": F}` (totals: spans sent, spans dropped, batches the
  receiver did not take) after every batch the exporter sent or dropped, and `{"flushed": true, ...}`
  once a flush has sent what was queued before it.
It ends when the pipe from the serving process closes, after sending what it holds (within the timeout).
"""
from __future__ import annotations

import logging
import os
import sys
import threading
from multiprocessing.connection import Connection
from typing import Callable, Sequence

import orjson
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from ..live.frames import RUN_SEPARATOR
from .spans import node_span

SERVICE = "openprogram-web"
FLUSH_TIMEOUT_MS = 60_000
# The processor's queue (the SDK's default). Spans handed to it and not yet sent or dropped by the exporter
# are at most that many: past it, the processor could drop one itself (uncounted, and built for nothing), so
# they are dropped here, unbuilt and counted.
MAX_QUEUED = 2048
NICENESS = 10


class CountedExporter(SpanExporter):
    """The OTLP exporter, counting the spans it delivered, those it could not, and the batches it could
    not deliver (`failures`), reported (`report(totals)`) after each batch; and deciding how many ended
    spans the processor that feeds it is handed (`take`)."""

    def __init__(self, exporter: SpanExporter, report: Callable[[dict], None]):
        self.exporter = exporter
        self.report = report
        self.totals = {"exported": 0, "dropped": 0, "failures": 0}
        self._handed = 0  # spans given to the processor
        self._settled = 0  # of them, those this exporter sent or dropped
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self.exporter.export(spans)
        except Exception:  # an exporter must not take the processor's thread down with it
            result = SpanExportResult.FAILURE
        with self._lock:
            self._settled += len(spans)
            if result is SpanExportResult.SUCCESS:
                self.totals["exported"] += len(spans)
            else:
                self.totals["dropped"] += len(spans)
                self.totals["failures"] += 1
            totals = dict(self.totals)
        self.report(totals)
        return result

    def take(self, spans: int, failures_known: int) -> int:
        """How many of `spans` ended spans, sent knowing of `failures_known` failed batches, to build and
        hand the processor: none if they were sent before the serving process knew of the last failure,
        else as many as the processor's queue has room for. The rest are counted dropped, and reported
        with the next batch's outcome or flush, not now (a report wakes a thread of the serving process)."""
        with self._lock:
            known = failures_known >= self.totals["failures"]
            taken = max(0, min(spans, MAX_QUEUED - (self._handed - self._settled))) if known else 0
            self._handed += taken
            self.totals["dropped"] += spans - taken
        return taken

    def shutdown(self) -> None:
        self.exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.exporter.force_flush(timeout_millis)


def serve(receiving: Connection, sending: Connection, url: str, timeout_s: float) -> None:
    """Build and send the spans of the ended nodes received, until the pipe closes.

    After a batch the receiver did not take, the serving process (told by the totals' `failures`) holds
    the nodes that end for a while (`export.AWAY_S`) and drops them unsent: no work on the machine the
    runs use for spans no one takes. What it sent before it knew (tagged with fewer failures than there
    were) is dropped here unbuilt; what it sends after its wait is built, and its batch tries again.
    """
    send_lock = threading.Lock()

    def send(message: dict) -> None:
        with send_lock:
            try:
                sending.send_bytes(orjson.dumps(message))
            except OSError:  # the serving process is gone: nobody left to tell
                pass

    exporter = CountedExporter(OTLPSpanExporter(endpoint=url, timeout=timeout_s), send)
    processor = BatchSpanProcessor(exporter, max_queue_size=MAX_QUEUED)
    # OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES are read as usual; the service is named only if they do not.
    resource = Resource.create({} if os.environ.get("OTEL_SERVICE_NAME") else {SERVICE_NAME: SERVICE})
    try:
        while True:
            try:
                message = orjson.loads(receiving.recv_bytes())
            except (EOFError, OSError):
                break
            if message[0] == "ended":
                _, failures_known, sessions, encoded = message
                ended = [(session_id, node) for session_id, nodes in sessions for node in nodes]
                ended += encoded_ends(encoded)
                for session_id, node in ended[:exporter.take(len(ended), failures_known)]:
                    processor.on_end(node_span(session_id, node, resource))
            elif message[0] == "flush":
                processor.force_flush(FLUSH_TIMEOUT_MS)
                send({"flushed": True, **exporter.totals})
    finally:
        processor.shutdown()
        send(dict(exporter.totals))  # the last word: what was sent and dropped in all


def encoded_ends(encoded: list) -> list[tuple[str, dict]]:
    """(session id, node record) of each end of a node among changes a writer process encoded."""
    ended = []
    for session_id, runs, ends in encoded:
        changes = RUN_SEPARATOR.join(runs).split(RUN_SEPARATOR)
        ended += [(session_id, orjson.loads(changes[position])["node"]) for position in ends]
    return ended


def main(argv: list[str]) -> None:
    """`python -m dag.telemetry.span_process FD_IN FD_OUT URL TIMEOUT_S`: serve the inherited pipes."""
    # The exporter logs an error per batch it could not send; the serving process counts them and warns
    # once a minute instead (the SDK's other warnings stay; its queue never overflows: `take`).
    logging.getLogger("opentelemetry.exporter").setLevel(logging.CRITICAL)
    # Background work: on a busy machine the runs' processes go first, this one gets what is left.
    os.nice(NICENESS)
    receiving = Connection(int(argv[1]), writable=False)
    sending = Connection(int(argv[2]), readable=False)
    serve(receiving, sending, argv[3], float(argv[4]))


if __name__ == "__main__":
    main(sys.argv)
