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
