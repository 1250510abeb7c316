"""The span process: where ended nodes become spans and are sent, beside the process that runs them.

Building a span and encoding it for OTLP cost about as much Python as recording the call did; in the
serving process they would take turns with the runs under one interpreter lock, and make every run
slower. So the serving process only hands over the ended nodes' records (`export.SpanForwarder`) and
this process, which never imports Django, does the rest with the official SDK: a BatchSpanProcessor
whose thread sends the spans with the OTLP/HTTP (protobuf) exporter.

Over a pair of pipes (`multiprocessing.connection` framing, JSON):
- from the serving process: `["changes", [[session id, [message, ...]], ...]]`, what the write path
  published (`{"type": "node", "node": record}` among them), and `["flush"]`;
- to it: `{"exported": N, "dropped": M}` (totals) after every batch the exporter sent or dropped, and
  `{"flushed": true, ...}` once a flush has sent what was queued before it.
It ends when the pipe from the serving process closes, after sending what it holds (within the timeout).
"""
from __future__ import annotations

import logging
import os
import sys
import threading
import time
from multiprocessing.connection import Connection
from typing import Callable, Sequence

import orjson
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from .spans import node_span

SERVICE = "openprogram-web"
TERMINAL = frozenset({"completed", "error", "cancelled", "refused", "interrupted"})  # a node's span ends with it
FLUSH_TIMEOUT_MS = 60_000
AWAY_S = 5.0  # after a failed export, how long ended spans are dropped unbuilt before the next try
NICENESS = 10


class CountedExporter(SpanExporter):
    """The OTLP exporter, counting what it delivered and what it could not (`report(totals)` after each).

    After a batch it could not deliver, the receiver is taken for away for AWAY_S: the spans ended
    meanwhile are dropped (`drop`) without being built or encoded, which would be work on the machine
    the runs use for spans no one takes; then the next batch tries again.
    """

    def __init__(self, exporter: SpanExporter, report: Callable[[dict], None]):
        self.exporter = exporter
        self.report = report
        self.totals = {"exported": 0, "dropped": 0}
        self.away_until = 0.0
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self.exporter.export(spans)
        except Exception:  # an exporter must not take the processor's thread down with it
            result = SpanExportResult.FAILURE
        if result is not SpanExportResult.SUCCESS:
            self.away_until = time.monotonic() + AWAY_S
        self._count("exported" if result is SpanExportResult.SUCCESS else "dropped", len(spans))
        return result

    def away(self) -> bool:
        return time.monotonic() < self.away_until

    def drop(self, spans: int) -> None:
        """Count `spans` dropped unbuilt; reported with the next batch's outcome or flush, not now (a
        report wakes a thread of the serving process)."""
        with self._lock:
            self.totals["dropped"] += spans

    def _count(self, outcome: str, spans: int) -> None:
        with self._lock:
            self.totals[outcome] += spans
            totals = dict(self.totals)
        self.report(totals)

    def shutdown(self) -> None:
        self.exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.exporter.force_flush(timeout_millis)


def serve(receiving: Connection, sending: Connection, url: str, timeout_s: float) -> None:
    send_lock = threading.Lock()

    def send(message: dict) -> None:
        with send_lock:
            try:
                sending.send_bytes(orjson.dumps(message))
            except OSError:  # the serving process is gone: nobody left to tell
                pass

    exporter = CountedExporter(OTLPSpanExporter(endpoint=url, timeout=timeout_s), send)
    processor = BatchSpanProcessor(exporter)
    # OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES are read as usual; the service is named only if they do not.
    resource = Resource.create({} if os.environ.get("OTEL_SERVICE_NAME") else {SERVICE_NAME: SERVICE})
    try:
        while True:
            try:
                message = orjson.loads(receiving.recv_bytes())
            except (EOFError, OSError):
                break
            if message[0] == "changes":
                ended = [(session_id, change["node"]) for session_id, changes in message[1] for change in changes
                         if change.get("type") == "node" and change["node"]["status"] in TERMINAL]
                if exporter.away():
                    exporter.drop(len(ended))
                    continue
                for session_id, node in ended:
                    processor.on_end(node_span(session_id, node, resource))
            elif message[0] == "flush":
                processor.force_flush(FLUSH_TIMEOUT_MS)
                send({"flushed": True, **exporter.totals})
    finally:
        processor.shutdown()
        send(dict(exporter.totals))  # the last word: what was sent and dropped in all


def main(argv: list[str]) -> None:
    """`python -m dag.telemetry.span_process FD_IN FD_OUT URL TIMEOUT_S`: serve the inherited pipes."""
    # The exporter logs an error per batch it could not send; the serving process counts them and warns
    # once a minute instead (the SDK's other warnings, a full queue among them, stay).
    logging.getLogger("opentelemetry.exporter").setLevel(logging.CRITICAL)
    # Background work: on a busy machine the runs' processes go first, this one gets what is left.
    os.nice(NICENESS)
    receiving = Connection(int(argv[1]), writable=False)
    sending = Connection(int(argv[2]), readable=False)
    serve(receiving, sending, argv[3], float(argv[4]))


if __name__ == "__main__":
    main(sys.argv)
