"""Cross-site websocket hijacking: only this site's own pages (scheme, host and port) or
CSRF_TRUSTED_ORIGINS may open a stream; a page on another port of the same host is refused."""
import pytest
from channels.testing import WebsocketCommunicator

from openprogram_web.asgi import application
from openprogram_web.websocket_origin import origin_allowed
from tests.reliability.bounds import REPLY_S

pytestmark = pytest.mark.django_db(transaction=True)

STREAM = "/ws/sessions/00000000-0000-0000-0000-000000000000/"


def scope(origin=None, host=None, scheme="ws"):
    headers = []
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    if host is not None:
        headers.append((b"host", host.encode()))
    return {"type": "websocket", "scheme": scheme, "headers": headers}


@pytest.mark.parametrize("origin, host, scheme", [
    ("http://127.0.0.1:8000", "127.0.0.1:8000", "ws"),
    ("http://localhost", "localhost", "ws"),
    ("https://localhost", "localhost", "wss"),
    ("http://[::1]:8000", "[::1]:8000", "ws"),
    ("HTTP://LOCALHOST:8000", "localhost:8000", "ws"),
])
def test_a_page_of_the_site_itself_may_connect(origin, host, scheme):
    assert origin_allowed(scope(origin, host, scheme))


@pytest.mark.parametrize("origin, host, scheme", [
    ("http://127.0.0.1:3000", "127.0.0.1:8000", "ws"),   # another port of the same host
    ("http://127.0.0.1", "127.0.0.1:8000", "ws"),        # the default port is another port
    ("http://127.0.0.1:8000", "127.0.0.1", "ws"),
    ("https://127.0.0.1:8000", "127.0.0.1:8000", "ws"),  # scheme: ws pairs with http only
    ("http://127.0.0.1:8000", "127.0.0.1:8000", "wss"),
    ("http://localhost:8000", "127.0.0.1:8000", "ws"),   # another host name, though allowed
    ("http://evil.example:8000", "evil.example:8000", "ws"),  # a Host not in ALLOWED_HOSTS
    ("null", "127.0.0.1:8000", "ws"),                    # sandboxed frames and file:// pages
    (None, "127.0.0.1:8000", "ws"),
    ("http://127.0.0.1:8000", None, "ws"),
])
def test_any_other_origin_is_refused(origin, host, scheme):
    assert not origin_allowed(scope(origin, host, scheme))


def test_a_repeated_origin_header_is_refused():
    request = scope("http://127.0.0.1:8000", "127.0.0.1:8000")
    request["headers"].append((b"origin", b"http://127.0.0.1:3000"))
    assert not origin_allowed(request)


def test_csrf_trusted_origins_are_allowed_with_their_port(settings):
    settings.CSRF_TRUSTED_ORIGINS = ["https://app.example.com", "https://*.example.org:8443"]
    assert origin_allowed(scope("https://app.example.com", "127.0.0.1:8000"))
    assert origin_allowed(scope("https://a.example.org:8443", "127.0.0.1:8000"))
    assert not origin_allowed(scope("https://app.example.com:8443", "127.0.0.1:8000"))
    assert not origin_allowed(scope("http://app.example.com", "127.0.0.1:8000"))
    assert not origin_allowed(scope("https://a.example.org", "127.0.0.1:8000"))


async def handshake(origin, host):
    """(accepted, close code) of a stream handshake through the real ASGI application."""
    headers = [(b"origin", origin.encode()), (b"host", host.encode())]
    communicator = WebsocketCommunicator(application, STREAM, headers=headers)
    accepted, code = await communicator.connect(timeout=REPLY_S)
    if accepted:  # accepted only to be closed: an anonymous client gets 4404
        code = (await communicator.receive_output(timeout=REPLY_S)).get("code")
    await communicator.disconnect()
    return accepted, code


async def test_the_server_refuses_a_page_on_another_port_of_the_same_host():
    assert await handshake("http://127.0.0.1:3000", "127.0.0.1:8000") == (False, 1000)


async def test_the_server_lets_its_own_pages_reach_the_stream():
    assert await handshake("http://127.0.0.1:8000", "127.0.0.1:8000") == (True, 4404)


def test_behind_a_tls_proxy_the_sites_https_pages_may_connect_and_its_http_ones_may_not(settings):
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.ALLOWED_HOSTS = ["app.example.com"]
    proxied = scope("https://app.example.com", "app.example.com", "ws")
    proxied["headers"].append((b"x-forwarded-proto", b"https"))
    assert origin_allowed(proxied)
    plain = scope("https://app.example.com", "app.example.com", "ws")  # the header missing: not via TLS
    assert not origin_allowed(plain)
    downgraded = scope("http://app.example.com", "app.example.com", "ws")
    downgraded["headers"].append((b"x-forwarded-proto", b"https"))
    assert not origin_allowed(downgraded)
