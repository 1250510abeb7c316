"""One HTTP GET through an ASGI application in this process, for the static-file tests."""
from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote

from asgiref.testing import ApplicationCommunicator

from openprogram_web.asgi import application

from .bounds import REPLY_S


@dataclass
class Response:
    status: int
    headers: dict[str, str]  # names in lower case
    body: bytes


async def get(path: str, *, host: bytes = b"127.0.0.1:8000", scheme: str = "http", extra=(),
              app=application) -> Response:
    """GET `path` (its raw form; the scope's path %-decoded, as Daphne decodes it), the whole response."""
    scope = {"type": "http", "http_version": "1.1", "method": "GET", "scheme": scheme, "path": unquote(path),
             "raw_path": path.encode(), "query_string": b"", "headers": [(b"host", host), *extra]}
    communicator = ApplicationCommunicator(app, scope)
    await communicator.send_input({"type": "http.request", "body": b""})
    start = await communicator.receive_output(timeout=REPLY_S)
    body = b""
    while True:
        message = await communicator.receive_output(timeout=REPLY_S)
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    await communicator.wait(timeout=REPLY_S)
    return Response(start["status"], {name.decode().lower(): value.decode() for name, value in start["headers"]},
                    body)
