"""The websocket origin check: only pages of this site (or of CSRF_TRUSTED_ORIGINS) may open a stream.

Channels' `AllowedHostsOriginValidator` compares host names only, so a page served from another port of
the same host (any local dev server) could open `ws://127.0.0.1:8000/ws/...` in a logged-in browser and
read the stream. This check is Django's CSRF origin check applied to the handshake: the Origin must be
exactly the origin the request was made to (scheme, host and port: `ws` pairs with `http`, `wss` with
`https`, or `https` when SECURE_PROXY_SSL_HEADER says a TLS proxy received it; the Host header's
host:port, whose host is in ALLOWED_HOSTS), or be in CSRF_TRUSTED_ORIGINS
(`https://*.example.com` matching subdomains, as for CSRF).
"""
from __future__ import annotations

from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import is_same_domain, split_domain_port, validate_host

PAGE_SCHEME = {"ws": "http", "wss": "https"}


def _single_header(scope, name: bytes) -> str | None:
    """The value of a header sent exactly once, else None (absent, repeated or not Latin-1 text)."""
    values = [value for key, value in scope.get("headers", ()) if key.lower() == name]
    if len(values) != 1:
        return None
    return values[0].decode("latin1").strip().lower()


def _allowed_hosts() -> list[str]:
    # What Django's HttpRequest.get_host() allows when ALLOWED_HOSTS is empty.
    if settings.DEBUG and not settings.ALLOWED_HOSTS:
        return [".localhost", "127.0.0.1", "[::1]"]
    return settings.ALLOWED_HOSTS


def _behind_tls_proxy(scope) -> bool:
    """The handshake reached a TLS proxy over HTTPS: SECURE_PROXY_SSL_HEADER says so, as for
    `request.is_secure()` (the socket itself arrives as plain `ws`)."""
    configured = settings.SECURE_PROXY_SSL_HEADER
    if not configured:
        return False
    header, expected = configured
    name = header.removeprefix("HTTP_").lower().replace("_", "-").encode()
    value = _single_header(scope, name)
    return value is not None and value.split(",")[0].strip() == expected.lower()


def _own_origin(scope) -> str | None:
    """The origin of a page of this site that would open this socket, or None if the Host is not ours."""
    host = _single_header(scope, b"host")
    scheme = "https" if _behind_tls_proxy(scope) else PAGE_SCHEME.get(scope.get("scheme", "ws"))
    if not host or scheme is None:
        return None
    domain, _port = split_domain_port(host)
    if not domain or not validate_host(domain, _allowed_hosts()):
        return None
    return f"{scheme}://{host}"


def _trusted(origin: str) -> bool:
    trusted = [item.lower() for item in settings.CSRF_TRUSTED_ORIGINS]
    if origin in trusted:
        return True
    try:
        parsed = urlsplit(origin)
    except ValueError:
        return False
    return any(is_same_domain(parsed.netloc, urlsplit(item).netloc.lstrip("*"))
               for item in trusted if "*" in item and urlsplit(item).scheme == parsed.scheme)


def origin_allowed(scope) -> bool:
    """Whether the websocket handshake in `scope` comes from a page this site trusts."""
    origin = _single_header(scope, b"origin")
    if not origin or origin == "null":
        return False
    return origin == _own_origin(scope) or _trusted(origin)


class SameOriginValidator:
    """ASGI middleware: refuse (HTTP 403 at the handshake) a websocket whose Origin is not allowed."""

    def __init__(self, application):
        self.application = application

    async def __call__(self, scope, receive, send):
        if scope["type"] == "websocket" and origin_allowed(scope):
            return await self.application(scope, receive, send)
        return await WebsocketDenier()(scope, receive, send)
