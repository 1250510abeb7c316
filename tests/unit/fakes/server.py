"""A scripted HTTP server on 127.0.0.1 (ephemeral port): each request gets the next scripted response.

A response is a `(status, json_body)` pair (the body a `Raw` for bytes sent as they are: an HTML page, a
truncated JSON document) or a callable taking the server and returning one. `hang`
and `slow` hold a request open until the test releases the server (or closes it), so tests can make a
request time out or stop a run mid-request without any sleeping.
"""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Union

Response = Union[tuple, Callable[["FakeServer"], Any]]


@dataclass(frozen=True)
class Raw:
    """A response body sent byte for byte, with its content type (and any other headers)."""
    body: bytes
    content_type: str = "application/json"
    headers: tuple = ()


class FakeServer:
    def __init__(self, script: list[Response]):
        self.script = list(script)
        self.requests: list[dict] = []
        self.arrived = threading.Event()  # a held request has arrived
        self.release = threading.Event()  # let held requests finish
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.01},
                                        daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> "FakeServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.release.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def _next(self, body: dict) -> Any:
        with self._lock:
            self.requests.append(body)
            if not self.script:
                return 500, {"error": {"message": f"fake server: no scripted response for request {len(self.requests)}"}}
            response = self.script.pop(0)
        return response(self) if callable(response) else response

    def _handler_class(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # keep test output clean
                pass

            def do_POST(self):
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                body["_path"] = self.path
                response = server._next(body)
                if response is None:  # a hang that was released: drop the connection unanswered
                    self.close_connection = True
                    return
                status, payload = response
                raw = payload if isinstance(payload, Raw) else Raw(json.dumps(payload).encode())
                data = raw.body
                try:
                    self.send_response(status)
                    self.send_header("content-type", raw.content_type)
                    self.send_header("content-length", str(len(data)))
                    for name, value in raw.headers:
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client abandoned the request (a stop): nothing left to answer

        return Handler


def hang(server: FakeServer):
    """Never answer (until released): the client's timeout has to end it."""
    server.arrived.set()
    server.release.wait(30)
    return None


def slow(response: tuple) -> Callable[[FakeServer], tuple]:
    """Answer only once released: a stop pressed meanwhile must not wait for it."""
    def respond(server: FakeServer):
        server.arrived.set()
        server.release.wait(30)
        return response
    return respond
