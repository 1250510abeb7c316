"""Static files are served by the ASGI application itself: a path that climbs out of the static
directories is not found (404), whatever its spelling, never a 500 from SuspiciousFileOperation."""
import pytest
from urllib.parse import unquote

from asgiref.testing import ApplicationCommunicator

from openprogram_web.asgi import application

pytestmark = pytest.mark.django_db


async def get(path):
    """{"status", "body"} of GET `path`, its %-escapes decoded as Daphne decodes them."""
    scope = {"type": "http", "http_version": "1.1", "method": "GET", "scheme": "http", "path": unquote(path),
             "raw_path": path.encode(), "query_string": b"", "headers": [(b"host", b"127.0.0.1:8000")]}
    communicator = ApplicationCommunicator(application, scope)
    await communicator.send_input({"type": "http.request", "body": b""})
    start = await communicator.receive_output(timeout=5)
    response = {"status": start["status"], "body": b""}
    while True:
        message = await communicator.receive_output(timeout=5)
        response["body"] += message.get("body", b"")
        if not message.get("more_body"):
            break
    await communicator.wait(timeout=5)
    return response


@pytest.mark.parametrize("path", [
    "/static/%2e%2e/manage.py",
    "/static/%2E%2E/manage.py",
    "/static/..%2fmanage.py",
    "/static/%2e%2e%2fmanage.py",
    "/static/%2e%2e/%2e%2e/etc/passwd",
    "/static/css/%2e%2e/%2e%2e/manage.py",
    "/static/%2e%2e/openprogram_web/settings.py",
    "/static/..%5cmanage.py",
    "/static/%252e%252e/manage.py",
    "/static//etc/passwd",
    "/static/%00",
    "/static/no-such-file.css",
])
async def test_a_path_outside_the_static_files_is_not_found(path):
    response = await get(path)
    assert response["status"] == 404, (path, response["status"])
    assert b"DJANGO_SETTINGS_MODULE" not in response["body"] and b"import" not in response["body"]


async def test_a_static_file_is_still_served():
    assert (await get("/static/favicon.svg"))["status"] == 200
