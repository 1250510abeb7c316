"""The openai and anthropic providers against servers that misbehave below the protocol: one that answers
TLS with plain HTTP, and one that sends its reply a byte at a time for ever."""
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from runtime.messages import ModelRequest
from runtime.retry import ProviderError, RetryPolicy

from .test_providers_http import PROVIDERS, ask, make, wire  # noqa: F401 (wire is a fixture)


class PlainHTTPOnly:
    """Accepts connections and answers whatever arrives (a TLS ClientHello) with a plain-HTTP 400."""

    def __init__(self):
        self.connections = 0
        self._socket = socket.create_server(("127.0.0.1", 0))
        self.url = f"https://127.0.0.1:{self._socket.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                connection, _ = self._socket.accept()
            except OSError:  # closed: the test is over
                return
            self.connections += 1
            with connection:
                connection.recv(4096)
                connection.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

    def close(self):
        self._socket.close()


def test_a_tls_failure_is_not_retried_and_the_error_names_its_cause(wire):
    cls, w = PROVIDERS[wire]
    server = PlainHTTPOnly()
    try:
        provider = cls("fake-model", api_key="test-key", base_url=w.base_url(server.url),
                       retry=RetryPolicy(max_retries=3, base_delay_s=0.001), timeout_s=10)
        with pytest.raises(ProviderError) as info:
            ask(provider)
    finally:
        server.close()
    assert not info.value.retryable and info.value.attempts == 1 and server.connections == 1
    message = str(info.value)
    assert "TLS failed: SSLError" in message and "WRONG_VERSION_NUMBER" in message and "scheme" in message


class Trickle:
    """Answers every request with a status line, headers, then one byte of body at a time, for ever
    (until closed): no single read ever waits long, but the reply never ends."""

    def __init__(self):
        self.stop = threading.Event()
        self.requests = 0
        trickle = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                trickle.requests += 1
                self.rfile.read(int(self.headers.get("content-length") or 0))
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(10 ** 9))
                self.end_headers()
                while not trickle.stop.wait(0.01):  # the pace only keeps reads short; any pace would do
                    try:
                        self.wfile.write(b" ")
                        self.wfile.flush()
                    except OSError:
                        return

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def __enter__(self):
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()


def test_a_reply_that_never_ends_is_cut_off_at_the_attempt_timeout(wire):
    with Trickle() as server:
        provider, _ = make(wire, server, timeout_s=0.3, retry=RetryPolicy(max_retries=0))
        with pytest.raises(ProviderError, match=r"request timed out after 0.3s") as info:
            ask(provider)
    assert info.value.retryable and server.requests <= 1  # abandoned at its timeout, reached or not


def test_a_reply_that_never_ends_is_cut_off_at_the_callers_deadline(wire):
    with Trickle() as server:
        provider, _ = make(wire, server, timeout_s=30, retry=RetryPolicy(max_retries=0))
        request = ModelRequest(system="", timeout_s=0.3,
                               messages=[{"role": "user", "content": [{"type": "text", "text": "hi"}]}])
        with pytest.raises(ProviderError, match=r"request timed out after 0.3s"):
            provider.complete(request)
    assert server.requests <= 1  # abandoned at the deadline, whether or not it had reached the server
