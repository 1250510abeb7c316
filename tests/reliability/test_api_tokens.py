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
    assert with_token(key).delete("/api/token/").status_code == 401


def test_rotate_and_delete_need_authentication():
    """A 401 naming the scheme, as the schema documents (DRF answers with the first authenticator's)."""
    for response in (APIClient().post("/api/token/rotate/"), APIClient().delete("/api/token/")):
        assert response.status_code == 401 and response["WWW-Authenticate"] == "Token"


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
    assert rotated.status_code == 302 and rotated["Location"] == "/accounts/token/"  # POST-redirect-GET
    assert not works(key)
    shown = client.get("/accounts/token/")
    assert "no-store" in shown["Cache-Control"]
    new = shown.context["new_key"]
    assert new in shown.content.decode() and works(new) and new not in rotated["Location"]

    revoked = client.post("/accounts/token/", {"action": "revoke", "csrfmiddlewaretoken": csrf})
    assert revoked.status_code == 302 and not works(new)
    assert not AuthToken.objects.filter(user=user).exists()


def test_the_token_pages_new_key_is_kept_nowhere_on_the_server_and_not_shown_once_revoked(user):
    # Keys are stored only as digests: the one on its way to the page must not sit in the session store.
    from django.contrib.sessions.models import Session as StoredSession
    client = Client()
    client.force_login(user)
    client.post("/accounts/token/", {"action": "rotate"})
    [token] = AuthToken.objects.filter(user=user)
    new_key = client.cookies["new_api_token"].value  # signed, for this page only, and short-lived
    assert client.cookies["new_api_token"]["path"] == "/accounts/token/" and client.cookies["new_api_token"]["httponly"]
    stored = " ".join(str(row.get_decoded()) for row in StoredSession.objects.all())
    assert token.token_key not in stored
    AuthToken.objects.filter(pk=token.pk).delete()  # revoked meanwhile (another tab, a password change)
    shown = client.get("/accounts/token/")
    assert shown.context["new_key"] is None and "Your new token" not in shown.content.decode()
    assert new_key  # it was on its way


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
    assert response.status_code == 401 and "Invalid token" in response.json()["detail"]


# --- a revocation racing a rotate or a login ----------------------------------------------------------

def test_a_token_revoked_while_its_rotate_is_in_flight_is_not_exchanged(user, monkeypatch):
    """The revoke (a password change, a logout, "Revoke all" on another request) lands after the rotate
    authenticated its token and before it deletes it: the rotate is refused like a revoked token, and
    the user holds no token, not a new one the revocation missed."""
    from dag.api import authentication
    from dag.accounts import tokens

    key = obtain()
    authenticate = authentication.TokenAuthentication.authenticate_credentials

    def then_revoked(self, token):
        authenticated = authenticate(self, token)
        tokens.revoke_all(user)
        return authenticated

    monkeypatch.setattr(authentication.TokenAuthentication, "authenticate_credentials", then_revoked)
    response = with_token(key).post("/api/token/rotate/")
    monkeypatch.undo()
    assert response.status_code == 401 and response.json() == {"detail": "Invalid token."}
    assert not AuthToken.objects.filter(user=user).exists()


def test_a_password_changed_during_a_login_gets_no_token(user, monkeypatch):
    """The password changes (revoking every token) after POST /api/token/ checked the old one: that
    login gets no token either, or it would outlive the change meant to end it."""
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.serializers import AuthTokenSerializer

    check = AuthTokenSerializer.validate

    def then_changed(self, attrs):
        checked = check(self, attrs)
        elsewhere = get_user_model().objects.get(pk=user.pk)  # e.g. the password change page, now
        elsewhere.set_password("changed-meanwhile-4")
        elsewhere.save()
        return checked

    monkeypatch.setattr(AuthTokenSerializer, "validate", then_changed)
    response = APIClient().post("/api/token/", CREDENTIALS, format="json")
    monkeypatch.undo()
    assert response.status_code == 400 and "Unable to log in" in response.json()["non_field_errors"][0]
    assert not AuthToken.objects.filter(user=user).exists()


def test_a_login_gets_its_token_when_another_login_re_hashed_the_password_meanwhile(user, monkeypatch):
    """Two logins at once after a hasher change both upgrade the hash: the stored hash then differs from
    the one this login read, yet the password is still the user's, so it gets its token."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.hashers import make_password
    from rest_framework.authtoken.serializers import AuthTokenSerializer

    check = AuthTokenSerializer.validate

    def then_re_hashed(self, attrs):
        checked = check(self, attrs)
        get_user_model().objects.filter(pk=user.pk).update(password=make_password(CREDENTIALS["password"]))
        return checked

    monkeypatch.setattr(AuthTokenSerializer, "validate", then_re_hashed)
    response = APIClient().post("/api/token/", CREDENTIALS, format="json")
    monkeypatch.undo()
    assert response.status_code == 200 and works(response.json()["token"])


def test_a_login_whose_hash_is_upgraded_still_gets_its_token(user, settings):
    """A login may re-hash the password (here md5, the tests' hasher, to a preferred one): that is a new
    hash but not a password change, and the login gets its token."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher",
                                 "django.contrib.auth.hashers.MD5PasswordHasher"]
    before = user.password
    assert works(obtain())
    user.refresh_from_db()
    assert user.password != before and user.password.startswith("pbkdf2_sha256$")


# --- the token page -------------------------------------------------------------------------------------

def test_reloading_the_token_page_after_a_new_token_neither_rotates_again_nor_shows_the_key_again(user):
    client = Client()
    client.force_login(user)
    shown = client.post("/accounts/token/", {"action": "rotate"}, follow=True)
    new = shown.context["new_key"]
    assert [code for _, code in shown.redirect_chain] == [302] and new in shown.content.decode()
    reloaded = client.get("/accounts/token/")  # what a reload of the page shown does
    assert reloaded.context["new_key"] is None and new not in reloaded.content.decode()
    assert works(new) and AuthToken.objects.filter(user=user).count() == 1


def test_the_token_page_answers_head_and_options_and_a_bad_action_in_plain_text(user):
    client = Client()
    client.force_login(user)
    client.post("/accounts/token/", {"action": "rotate"})
    head = client.head("/accounts/token/")
    assert head.status_code == 200 and head.content == b"" and head["Content-Type"].startswith("text/html")
    assert client.get("/accounts/token/").context["new_key"]  # a HEAD did not use up its one showing
    options = client.options("/accounts/token/")
    assert options.status_code == 200 and set(options["Allow"].split(", ")) == {"GET", "HEAD", "POST", "OPTIONS"}
    bad = client.post("/accounts/token/", {"action": "bogus"})
    assert bad.status_code == 400 and bad["Content-Type"] == "text/plain; charset=utf-8"
    assert b"action must be 'rotate' or 'revoke'" in bad.content


# --- OPENPROGRAM_API_TOKEN_DAYS ---------------------------------------------------------------------------

def token_ttl_with(days: str):
    """What the settings make of OPENPROGRAM_API_TOKEN_DAYS=`days`, imported in a child process."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = "from openprogram_web import settings as s; print(s.REST_KNOX['TOKEN_TTL'])"
    return subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).parents[2], capture_output=True,
                          text=True, env={**os.environ, "OPENPROGRAM_API_TOKEN_DAYS": days})


@pytest.mark.parametrize("days", ["-1", "nan", "inf", "-inf", "1e9", "36501", "3000000"])
def test_a_token_lifetime_out_of_range_is_refused_naming_the_setting(days):
    out = token_ttl_with(days)
    assert out.returncode != 0
    last_line = out.stderr.strip().splitlines()[-1]
    assert last_line.startswith("django.core.exceptions.ImproperlyConfigured: OPENPROGRAM_API_TOKEN_DAYS must be")
    assert "from 0 (tokens never expire) to 36500" in last_line and repr(days) in last_line


@pytest.mark.parametrize("days, ttl", [("0", "None"), ("0.5", "12:00:00"), ("36500", "36500 days, 0:00:00")])
def test_a_token_lifetime_in_range_is_kept_and_0_means_never(days, ttl):
    out = token_ttl_with(days)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ttl


def test_a_token_issued_with_the_longest_lifetime_has_its_expiry(user, monkeypatch):
    from datetime import timedelta

    from knox.settings import knox_settings

    monkeypatch.setattr(knox_settings, "TOKEN_TTL", timedelta(days=36_500))
    response = APIClient().post("/api/token/", CREDENTIALS, format="json")
    assert response.status_code == 200 and response.json()["expiry"][:4].isdigit()


def other_backend_waits_for_a_lock() -> bool:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")  # else a transaction reads the same view each time
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                       "AND pid <> pg_backend_pid() AND wait_event_type = 'Lock'")
        return cursor.fetchone()[0] > 0


def on_postgresql() -> bool:
    from django.db import connection
    return connection.vendor == "postgresql"


@pytest.mark.skipif("not on_postgresql()", reason="SQLite's IMMEDIATE transactions already make every writer "
                                                   "wait for the rotate; PostgreSQL needs the user's row lock")
@pytest.mark.django_db(transaction=True)
def test_a_revoke_made_while_a_rotate_commits_waits_and_revokes_the_new_token(user, monkeypatch):
    """The revoke starts after the rotate deleted the old token and made the new one, before it commits.
    Without the user's row lock its DELETE read the tokens as they were before the rotate (the new one
    uncommitted, unseen) and the new token survived the revocation."""
    import threading
    import time

    from django.db import connection

    from dag.accounts import tokens

    key = obtain()
    create = AuthToken.objects.create
    revoker = threading.Thread(target=lambda: (tokens.revoke_all(user), connection.close()))

    def create_then_revoke_meanwhile(*args, **kwargs):
        made = create(*args, **kwargs)
        revoker.start()
        give_up_at = time.monotonic() + 60  # a bound on a broken test, never a measure
        # Until the revoke has run or waits for a lock this transaction holds: either is a state it stays
        # in until this commits, so the test goes on the same way however slow the machine is.
        while revoker.is_alive() and not other_backend_waits_for_a_lock() and time.monotonic() < give_up_at:
            time.sleep(0.01)
        return made

    monkeypatch.setattr(AuthToken.objects, "create", create_then_revoke_meanwhile)
    rotated = with_token(key).post("/api/token/rotate/")
    monkeypatch.undo()
    revoker.join()
    assert rotated.status_code == 200
    assert not AuthToken.objects.filter(user=user).exists() and not works(rotated.json()["token"])


def test_a_stale_token_sent_with_the_password_does_not_stop_a_new_token(user, other_user):
    """A script whose token a logout revoked sends it again with the password: it gets a new token."""
    for someone, password in ((user, "alice-password-1"), (other_user, "bob-password-1")):
        stale = obtain() if someone is user else None
        if stale:
            with_token(stale).delete("/api/token/")
        client = with_token(stale or "0123abcd" * 8)
        response = client.post("/api/token/", {"username": someone.username, "password": password}, format="json")
        assert response.status_code == 200 and works(response.json()["token"])
        assert client.post("/api/token/", {"username": someone.username, "password": "wrong"},
                           format="json").status_code == 400
