"""Item 3: API tokens are stored hashed, can be rotated and revoked (API and page), and die with the password."""
import pytest
from django.test import Client
from knox.models import AuthToken
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

CREDENTIALS = {"username": "alice", "password": "alice-password-1"}


def obtain() -> str:
    response = APIClient().post("/api/token/", CREDENTIALS, format="json")
    assert response.status_code == 200
    return response.json()["token"]


def with_token(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def works(key: str) -> bool:
    return with_token(key).get("/api/sessions/").status_code == 200


def test_the_database_holds_no_key_in_clear(user):
    key = obtain()
    row = AuthToken.objects.get(user=user)
    stored = " ".join(str(value) for value in AuthToken.objects.values_list().get())
    assert key not in stored and row.digest != key
    assert row.expiry is not None  # tokens expire (OPENPROGRAM_API_TOKEN_DAYS)
    assert works(key)


def test_rotate_gives_a_new_token_and_the_old_one_stops_working(user):
    old = obtain()
    other_device = obtain()
    response = with_token(old).post("/api/token/rotate/")
    assert response.status_code == 200
    new = response.json()["token"]
    assert new != old and works(new) and not works(old)
    assert works(other_device)  # only the token the request was sent with is replaced


def test_delete_revokes_the_token_it_is_sent_with(user):
    key = obtain()
    assert with_token(key).delete("/api/token/").status_code == 204
    assert not works(key)
    assert with_token(key).delete("/api/token/").status_code in (401, 403)


def test_rotate_and_delete_need_authentication():
    assert APIClient().post("/api/token/rotate/").status_code in (401, 403)
    assert APIClient().delete("/api/token/").status_code in (401, 403)


def test_a_password_change_revokes_every_token(user):
    first, second = obtain(), obtain()
    user.set_password("a-new-password-2")
    user.save()
    assert not works(first) and not works(second)


def test_the_password_change_page_revokes_tokens(user):
    key = obtain()
    client = Client()
    client.force_login(user)
    response = client.post("/accounts/password_change/", {
        "old_password": "alice-password-1", "new_password1": "b-new-password-3",
        "new_password2": "b-new-password-3"})
    assert response.status_code == 302
    assert not works(key)


def test_logging_out_of_the_browser_revokes_every_token(user):
    first, second = obtain(), obtain()
    client = Client()
    client.force_login(user)
    assert client.post("/accounts/logout/").status_code == 302
    assert not works(first) and not works(second)
    assert not AuthToken.objects.filter(user=user).exists()


def test_an_anonymous_logout_revokes_nothing(user):
    key = obtain()
    assert Client().post("/accounts/logout/").status_code == 302
    assert works(key)


def test_a_login_does_not_revoke_tokens(user):
    key = obtain()
    assert Client().login(**CREDENTIALS)
    assert works(key)


def test_the_token_page_rotates_and_revokes_with_csrf(user):
    key = obtain()
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    page = client.get("/accounts/token/")
    assert page.status_code == 200 and key not in page.content.decode()
    csrf = page.cookies["csrftoken"].value

    assert client.post("/accounts/token/", {"action": "rotate"}).status_code == 403  # no CSRF token
    assert works(key)

    rotated = client.post("/accounts/token/", {"action": "rotate", "csrfmiddlewaretoken": csrf})
    assert rotated.status_code == 200 and "no-store" in rotated["Cache-Control"]
    new = rotated.context["new_key"]
    assert new in rotated.content.decode() and works(new) and not works(key)

    revoked = client.post("/accounts/token/", {"action": "revoke", "csrfmiddlewaretoken": csrf})
    assert revoked.status_code == 302 and not works(new)
    assert not AuthToken.objects.filter(user=user).exists()


def test_the_token_page_needs_a_login():
    response = Client().get("/accounts/token/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_the_migration_hashes_tokens_kept_in_clear(user):
    """Keys from DRF's old authtoken table keep working, stored hashed; the clear keys are gone."""
    import importlib
    from types import SimpleNamespace

    from django.apps import apps
    from django.db import connection

    migration = importlib.import_module("dag.migrations.0004_api_tokens_hashed")
    clear = "0123456789abcdef0123456789abcdef01234567"
    with connection.cursor() as cursor:
        cursor.execute('CREATE TABLE authtoken_token ("key" varchar(40) PRIMARY KEY, user_id integer)')
        cursor.execute("INSERT INTO authtoken_token (\"key\", user_id) VALUES (%s, %s)", [clear, user.pk])
    # What RunPython uses of its schema editor (a real one cannot open inside the test's transaction on SQLite).
    editor = SimpleNamespace(connection=connection, quote_name=connection.ops.quote_name)
    migration.hash_clear_tokens(apps, editor)
    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM authtoken_token")
        assert cursor.fetchone()[0] == 0
        cursor.execute("DROP TABLE authtoken_token")
    assert works(clear)


@pytest.mark.parametrize("header", [b"Token \xe9\xe9abc", b"Token not-hex-at-all", b"Token \x00\x01"])
def test_a_token_that_is_not_hex_text_is_a_401_not_a_500(header):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header.decode("latin-1"))
    response = client.get("/api/sessions/")
    assert response.status_code in (401, 403) and "Invalid token" in response.json()["detail"]
