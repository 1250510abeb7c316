"""Request bodies are read only in the UTF encodings, ASCII and Latin-1: a body declared in a slow codec
(punycode decodes in time that grows with the square of its length) is refused with 415 before the
CSRF check, a login or a throttle reads it."""
import pytest
from django.test import Client

from openprogram_web.request_charset import refused_charset

pytestmark = pytest.mark.django_db

BODY = b"-" + b"a" * 50_000


@pytest.mark.parametrize("path", ["/api/token/", "/api/sessions/", "/accounts/login/"])
@pytest.mark.parametrize("charset", ["punycode", "idna", "utf-7", "Punycode"])
def test_a_body_in_a_charset_the_site_does_not_read_is_refused_unread(path, charset):
    response = Client(enforce_csrf_checks=True).generic(
        "POST", path, BODY, content_type=f"application/x-www-form-urlencoded; charset={charset}")
    assert response.status_code == 415
    assert f"charset '{charset}' is not read here; send the body as UTF-8" in response.content.decode()
    if path.startswith("/api/"):
        assert response.json() == {"detail": f"charset '{charset}' is not read here; send the body as UTF-8"}


@pytest.mark.parametrize("content_type", [
    "application/json", "application/json; charset=utf-8", "application/json; charset=UTF8",
    "application/x-www-form-urlencoded; charset=ISO-8859-1", "text/plain; charset=us-ascii",
    "application/json; charset=no-such-codec",  # unknown: Django reads it as UTF-8, and so it goes on
])
def test_the_charsets_the_site_reads_pass(content_type):
    assert refused_charset(content_type) is None


def test_a_utf8_login_still_works(user):
    client = Client()
    response = client.post("/accounts/login/", "username=alice&password=alice-password-1",
                           content_type="application/x-www-form-urlencoded; charset=utf-8")
    assert response.status_code == 302
