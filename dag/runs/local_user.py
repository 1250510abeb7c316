"""The local user `make run` creates on first start, so a fresh install can log in without setup.

Its password is shown once and kept only in var/local_user.txt (mode 0600, outside git), so the person
who started the server can find it again; nothing secret is ever written to the repository.
"""
from __future__ import annotations

import os
import secrets
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

LOCAL_USERNAME = "local"


def credentials_file() -> Path:
    return Path(settings.VAR_DIR) / "local_user.txt"


def ensure_local_user() -> tuple[object, str | None]:
    """(the local user, its new password) on first start; (the existing user, None) afterwards.

    Does nothing when any user exists: someone has set up accounts, and a surprise admin is unwelcome.
    OSError if the credentials file cannot be written; then no user is created either, since a user
    whose only copy of the password was lost would block the next start from making one.
    """
    users = get_user_model()
    if users.objects.exists():
        return users.objects.filter(username=LOCAL_USERNAME).first(), None
    password = secrets.token_urlsafe(12)
    with transaction.atomic():  # a failed write rolls the user back
        user = users.objects.create_superuser(LOCAL_USERNAME, email="", password=password)
        _save_credentials(password)
    return user, password


def _save_credentials(password: str) -> None:
    path = credentials_file()
    # Created with 0600 from the start, so the password is never readable by others, even briefly.
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(f"username: {LOCAL_USERNAME}\npassword: {password}\n")
    os.chmod(path, 0o600)  # an existing file keeps its old mode through os.open


class ForgetsItsSavedPassword:
    """Listed in AUTH_PASSWORD_VALIDATORS for its `password_changed` hook (see
    dag.accounts.tokens.RevokeTokensOnPasswordChange): once the local user's password is changed (the
    password page, the admin, `manage.py changepassword`), the copy in var/local_user.txt no longer
    works, and each start would send its reader to a wrong password; so it is deleted. It validates
    nothing."""

    def validate(self, password, user=None):
        return None

    def password_changed(self, password, user=None):
        if user is not None and user.get_username() == LOCAL_USERNAME:
            credentials_file().unlink(missing_ok=True)

    def get_help_text(self):
        return ""


def default_user():
    """The user commands act as when none is named: the local user, else the only user there is."""
    users = get_user_model()
    local = users.objects.filter(username=LOCAL_USERNAME).first()
    if local is not None:
        return local
    only = list(users.objects.all()[:2])
    return only[0] if len(only) == 1 else None
