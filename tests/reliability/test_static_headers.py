"""Item 5: static files carry the security headers pages get, and the CSP lets a page open a websocket to
its own origin only."""
import pytest

from tests.reliability.asgi_http import get

pytestmark = pytest.mark.django_db

SECURITY_HEADERS = ("content-security-policy", "x-content-type-options", "x-frame-options", "referrer-policy",
                    "cross-origin-opener-policy")


async def headers_of(path, **request):
    response = await get(path, **request)
    return response.status, response.headers


def security(headers):
    return {name: headers.get(name) for name in SECURITY_HEADERS}


@pytest.mark.parametrize("path", ["/static/css/app.css", "/static/no-such-file.js", "/static/%2e%2e/manage.py"])
async def test_static_responses_carry_the_page_headers(path):
    _, page = await headers_of("/accounts/login/")
    status, static = await headers_of(path)
    assert status in (200, 404)
    assert security(static) == security(page)
    assert static["x-content-type-options"] == "nosniff" and "script-src 'self'" in static["content-security-policy"]


def connect_src(policy):
    return next(part.split()[1:] for part in policy.split(";") if part.split()[0] == "connect-src")


@pytest.mark.parametrize("path", ["/accounts/login/", "/static/css/app.css"])
async def test_connect_src_is_this_origin_only(path):
    _, headers = await headers_of(path)
    assert connect_src(headers["content-security-policy"]) == ["'self'", "ws://127.0.0.1:8000"]
    _, headers = await headers_of(path, host=b"localhost:9000")
    assert connect_src(headers["content-security-policy"]) == ["'self'", "ws://localhost:9000"]


async def test_connect_src_over_https_is_wss(settings):
    _, headers = await headers_of("/accounts/login/", scheme="https")
    assert connect_src(headers["content-security-policy"]) == ["'self'", "wss://127.0.0.1:8000"]


async def test_a_static_file_over_plain_http_is_redirected_when_https_is_on(settings):
    from openprogram_web.asgi import StaticFilesHandler, django_asgi_app

    settings.SECURE_SSL_REDIRECT = True  # read when the middleware is made: a new handler
    status, headers = await headers_of("/static/css/app.css", app=StaticFilesHandler(django_asgi_app))
    assert status == 301 and headers["location"] == "https://127.0.0.1:8000/static/css/app.css"
