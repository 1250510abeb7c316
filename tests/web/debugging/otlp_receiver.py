"""A real OTLP/HTTP receiver for the export tests: an HTTP server on 127.0.0.1 that decodes each
POST /v1/traces body as OpenTelemetry's protobuf ExportTraceServiceRequest and keeps its spans."""
from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (ExportTraceServiceRequest,
                                                                      ExportTraceServiceResponse)
from google.protobuf.json_format import MessageToDict


class OtlpReceiver:
    """Start with `with OtlpReceiver() as receiver:`; `receiver.url` to export to, `receiver.spans` the
    spans received (each a dict: name, traceId and spanId as hex, parentSpanId, attributes by key, status,
    events), with the resource's attributes under "resource". While `refusing`, it answers every batch
    400 Bad Request and keeps none (an exporter does not try such a batch again)."""

    def __init__(self):
        self.spans: list[dict] = []
        self.refusing = False
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if receiver.refusing:
                    self.send_response(400)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                request = ExportTraceServiceRequest.FromString(body)
                receiver.keep(request)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200 if self.path == "/v1/traces" else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def keep(self, request: ExportTraceServiceRequest) -> None:
        for resource_spans in request.resource_spans:
            resource = {item.key: _value(item.value) for item in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    with self.lock:
                        self.spans.append({
                            "name": span.name, "traceId": span.trace_id.hex(), "spanId": span.span_id.hex(),
                            "parentSpanId": span.parent_span_id.hex(), "kind": span.kind,
                            "attributes": {item.key: _value(item.value) for item in span.attributes},
                            "status": MessageToDict(span.status), "resource": resource,
                            "events": [{"name": event.name,
                                        "attributes": {item.key: _value(item.value) for item in event.attributes}}
                                       for event in span.events],
                            "start": span.start_time_unix_nano, "end": span.end_time_unix_nano})

    def __enter__(self) -> "OtlpReceiver":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(10)


def _value(value):
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None
