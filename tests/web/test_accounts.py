"""Accounts: every page, API and websocket needs a login; the local user; CSRF on forms."""
from __future__ import annotations

import io
import os
import stat

import pytest
from channels.testing import WebsocketCommunicator
from django.core.management import call_command
from django.test import Client

from dag.models import Session
from dag.runs.local_user import LOCAL_USERNAME, credentials_file


pytestmark = pytest.mark.django_db


@pytest.fixture
def var_dir(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    return tmp_path


@pytest.mark.parametrize("path", ["/", "/functions/slow_count/", "/sessions/"])
def test_pages_redirect_anonymous_visitors_to_login(client, path):
    response = client.get(path)
    assert response.status_code == 302 and response["Location"].startswith(f"/accounts/login/?next={path}")


def test_launch_by_post_needs_a_login(client, test_functions):
    response = client.post("/functions/echo/", {"text": "hi"})
    assert response.status_code == 302 and not Session.objects.exists()


async def test_websocket_refuses_anonymous_connections():
    from openprogram_web.asgi import application

    communicator = WebsocketCommunicator(application, "/ws/sessions/00000000-0000-0000-0000-000000000000/")
    connected, _ = await communicator.connect()
    if connected:  # accepted only to be closed with a reason code
        assert (await communicator.receive_output())["type"] == "websocket.close"
    await communicator.disconnect()


def test_login_page_logs_in_and_shows_a_clear_error(client, user):
    assert client.get("/accounts/login/").status_code == 200
    bad = client.post("/accounts/login/", {"username": "alice", "password": "wrong"})
    assert b"do not match" in bad.content
    good = client.post("/accounts/login/", {"username": "alice", "password": "alice-password-1", "next": "/"})
    assert good.status_code == 302 and good["Location"] == "/"
    assert client.get("/").status_code == 200


@pytest.mark.parametrize("username, password, shown", [
    ("", "anything", "This field is required."), ("a\x00b", "anything", "Null characters are not allowed."),
    ("alice", "", "This field is required."),
])
def test_login_page_shows_a_fields_own_error_not_a_mismatch(client, user, username, password, shown):
    page = client.post("/accounts/login/", {"username": username, "password": password}).content.decode()
    assert shown in page and "do not match" not in page


def test_logout_is_a_post(client, user):
    client.force_login(user)
    assert client.post("/accounts/logout/").status_code == 302
    assert client.get("/").status_code == 302


def test_forms_carry_and_need_a_csrf_token(user, test_functions):
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(user)
    page = strict.get("/functions/echo/")
    assert b"csrfmiddlewaretoken" in page.content
    assert strict.post("/functions/echo/", {"text": "hi"}).status_code == 403
    assert not Session.objects.exists()


def test_ensure_local_user_creates_one_user_and_prints_its_password_once(var_dir, django_user_model,
                                                                           fast_hashing):
    first = io.StringIO()
    call_command("ensure_local_user", stdout=first)
    user = django_user_model.objects.get()
    assert user.username == LOCAL_USERNAME and user.is_superuser
    password = first.getvalue().split("password: ")[1].split()[0]
    assert user.check_password(password)
    saved = credentials_file()
    assert password in saved.read_text()
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600

    again = io.StringIO()
    call_command("ensure_local_user", stdout=again)
    assert password not in again.getvalue() and LOCAL_USERNAME in again.getvalue()
    assert django_user_model.objects.count() == 1


def test_ensure_local_user_leaves_existing_accounts_alone(var_dir, user, django_user_model):
    out = io.StringIO()
    call_command("ensure_local_user", stdout=out)
    assert django_user_model.objects.count() == 1 and not credentials_file().exists()
    assert "no local user was created" in out.getvalue()


def test_generated_secret_key_file_is_private_from_its_creation(tmp_path, monkeypatch):
    import pathlib

    from openprogram_web import settings as project_settings

    monkeypatch.delenv("SECRET_KEY", raising=False)
    monkeypatch.setattr(project_settings, "VAR_DIR", tmp_path)
    # A chmod after writing would leave the key readable by others in between: the mode must come
    # from the file's creation, whatever the umask.
    monkeypatch.setattr(pathlib.Path, "chmod", lambda self, mode: None)
    previous = os.umask(0)
    try:
        key = project_settings._secret_key()
    finally:
        os.umask(previous)
    path = tmp_path / "secret_key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(key) > 40 and project_settings._secret_key() == key  # generated once, then reused
