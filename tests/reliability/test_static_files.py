"""Static files are served by the ASGI application itself: a path that climbs out of the static
directories is not found (404), whatever its spelling, never a 500 from SuspiciousFileOperation."""
import pytest

from tests.reliability.asgi_http import get

pytestmark = pytest.mark.django_db


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
    assert response.status == 404, (path, response.status)
    assert b"DJANGO_SETTINGS_MODULE" not in response.body and b"import" not in response.body


async def test_a_static_file_is_still_served():
    assert (await get("/static/favicon.svg")).status == 200
