"""Websocket paths that match no route are refused with a close code, not an HTTP 500 and a traceback."""
import pytest
from channels.testing import WebsocketCommunicator

from openprogram_web.asgi import application
from tests.reliability.bounds import REPLY_S

pytestmark = pytest.mark.django_db(transaction=True)

SESSION_ID = "00000000-0000-0000-0000-000000000000"
PAGE = [(b"origin", b"http://127.0.0.1:8000"), (b"host", b"127.0.0.1:8000")]


@pytest.mark.parametrize("path", [
    "/ws/other/",
    f"/ws/sessions/{SESSION_ID}",            # no trailing slash
    f"/ws/sessions/{SESSION_ID}/extra/",     # an extra segment
    f"/ws/sessions/{'a' * 65}/",             # an id over the route's 64 characters
    "/ws/",
    "/",
    "/api/sessions/",
])
async def test_a_path_that_is_no_stream_is_closed_with_4404(path):
    communicator = WebsocketCommunicator(application, path, headers=PAGE)
    accepted, _ = await communicator.connect(timeout=REPLY_S)
    closed = await communicator.receive_output(timeout=REPLY_S)
    await communicator.disconnect()
    assert accepted and closed == {"type": "websocket.close", "code": 4404, "reason": "no such stream"}
