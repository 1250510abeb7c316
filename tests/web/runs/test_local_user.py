"""`manage.py ensure_local_user`: its password is saved before the user counts as created."""
import io

import pytest
from django.core.management import CommandError, call_command

from dag.runs.local_user import LOCAL_USERNAME, credentials_file

pytestmark = pytest.mark.django_db


def test_a_password_that_cannot_be_saved_leaves_no_user(settings, tmp_path, django_user_model, fast_hashing):
    settings.VAR_DIR = tmp_path / "missing"
    with pytest.raises(CommandError, match=f"cannot save the local user's password to {credentials_file()} "
                                           r"\(No such file or directory\), so no user was created"):
        call_command("ensure_local_user", stdout=io.StringIO())
    assert not django_user_model.objects.exists()

    settings.VAR_DIR = tmp_path  # once the directory is writable, the next start creates the user
    out = io.StringIO()
    call_command("ensure_local_user", stdout=out)
    assert "Created the local user." in out.getvalue() and django_user_model.objects.get().username == LOCAL_USERNAME


def test_a_later_start_says_when_the_password_file_is_gone(settings, tmp_path, fast_hashing):
    settings.VAR_DIR = tmp_path
    call_command("ensure_local_user", stdout=io.StringIO())
    credentials_file().unlink()
    out = io.StringIO()
    call_command("ensure_local_user", stdout=out)
    assert f"its password is not saved: {credentials_file()} is missing" in out.getvalue()
    assert "changepassword local" in out.getvalue()


def test_a_changed_password_removes_the_saved_copy_that_no_longer_works(settings, tmp_path, django_user_model,
                                                                        fast_hashing):
    settings.VAR_DIR = tmp_path
    call_command("ensure_local_user", stdout=io.StringIO())
    saved = credentials_file().read_text()
    password = saved.split("password: ", 1)[1].strip()
    user = django_user_model.objects.get(username=LOCAL_USERNAME)
    assert user.check_password(password)  # what the file says works, to begin with
    user.set_password("a new one, typed by its owner")
    user.save()
    assert not credentials_file().exists()
    out = io.StringIO()
    call_command("ensure_local_user", stdout=out)
    assert "removed when the password was changed" in out.getvalue()


def test_another_users_password_change_leaves_the_local_users_file(settings, tmp_path, django_user_model,
                                                                   fast_hashing):
    settings.VAR_DIR = tmp_path
    call_command("ensure_local_user", stdout=io.StringIO())
    other = django_user_model.objects.create_user("bob", password="first")
    other.set_password("second")
    other.save()
    assert credentials_file().exists()


def test_a_first_start_prints_the_address_user_and_password_together(settings, tmp_path, fast_hashing):
    settings.VAR_DIR = tmp_path
    out = io.StringIO()
    call_command("ensure_local_user", address="http://127.0.0.1:8000/", stdout=out)
    lines = out.getvalue().splitlines()
    where = lines.index("  open:     http://127.0.0.1:8000/")
    assert lines[where + 1] == f"  username: {LOCAL_USERNAME}" and lines[where + 2].startswith("  password: ")

    again = io.StringIO()
    call_command("ensure_local_user", address="http://127.0.0.1:8000/", stdout=again)
    assert again.getvalue().strip() == (f"Open http://127.0.0.1:8000/ and log in as {LOCAL_USERNAME} "
                                        f"(its password is in {credentials_file()})")
