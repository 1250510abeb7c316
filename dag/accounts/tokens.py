"""API tokens: stored hashed (django-rest-knox), issued, rotated and revoked, and revoked on a password change
and on logging out of the browser.

A user may hold several tokens (a laptop, a script); each is shown once, when issued. Expired ones are
dropped whenever the user gets a new one. `Authorization: Token <key>` is the header, as before.

Every change to a user's tokens holds the user's row (`_one_change_at_a_time`) until it commits. Without
that, a revocation (a password change, a logout, "Revoke all") landing while a rotate or a login was in
flight was undone: the rotate had already read its token as valid and issued a new one after the revoke
had deleted everything it could see.
"""
from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import check_password
from django.contrib.auth.signals import user_logged_out
from django.db import transaction
from django.dispatch import receiver
from django.utils import timezone
from knox.models import AuthToken


class TokenChangeRefused(Exception):
    """What the change was asked with (a token, a password) was revoked or changed while it was in flight."""


def _one_change_at_a_time(user) -> None:
    """Hold `user`'s row until the transaction ends, so their token changes happen one after another.

    On PostgreSQL this is the row lock; on SQLite every transaction here begins IMMEDIATE (settings), so
    the write lock it takes at BEGIN already serialises them and SELECT ... FOR UPDATE is a plain read."""
    list(get_user_model().objects.select_for_update().filter(pk=user.pk).values_list("pk"))


def issue(user, *, checked_password: str | None = None) -> tuple[AuthToken, str]:
    """A new token for `user`: (its row, the key, which is never stored).

    `checked_password`: the password `user` was just authenticated with; refused (TokenChangeRefused) if
    it is no longer theirs, since the change that replaced it revoked every token and this one would
    outlive it. A stored hash that merely changed form (a login upgrading it) still checks."""
    with transaction.atomic():
        _one_change_at_a_time(user)
        if checked_password is not None:
            stored = _stored_password(user)
            if stored != user.password and not (stored and check_password(checked_password, stored)):
                raise TokenChangeRefused(f"the password of {user.get_username()} changed during the login")
        AuthToken.objects.filter(user=user, expiry__lt=timezone.now()).delete()
        return AuthToken.objects.create(user=user)


def rotate(user, current: AuthToken | None) -> tuple[AuthToken, str]:
    """A new token in place of `current` (None: in place of every token `user` holds).

    Refused (TokenChangeRefused) if `current` was revoked after the request authenticated with it."""
    with transaction.atomic():
        _one_change_at_a_time(user)
        if current is not None:
            if not AuthToken.objects.filter(pk=current.pk).delete()[0]:
                raise TokenChangeRefused("the token was revoked while it was being rotated")
        else:
            revoke_all(user)
        return issue(user)


def revoke(token: AuthToken) -> None:
    """Revoke one token (the one a request was sent with)."""
    with transaction.atomic():
        _one_change_at_a_time(token.user)
        AuthToken.objects.filter(pk=token.pk).delete()


def revoke_all(user) -> int:
    """Revoke every token of `user`; how many there were."""
    with transaction.atomic():
        _one_change_at_a_time(user)
        return AuthToken.objects.filter(user=user).delete()[0]


def active(user):
    return AuthToken.objects.filter(user=user).exclude(expiry__lt=timezone.now()).order_by("-created")


def _stored_password(user) -> str | None:
    return get_user_model().objects.filter(pk=user.pk).values_list("password", flat=True).first()


class RevokeTokensOnPasswordChange:
    """Listed in AUTH_PASSWORD_VALIDATORS for its `password_changed` hook, which Django calls whenever a
    user's new password is saved (not when a login merely upgrades the hash): a stolen token dies with
    the old password. It validates nothing."""

    def validate(self, password, user=None):
        return None

    def password_changed(self, password, user=None):
        if user is not None and user.pk is not None:
            revoke_all(user)

    def get_help_text(self):
        return ""


@receiver(user_logged_out, dispatch_uid="dag.accounts.tokens.revoke_on_logout")
def revoke_on_logout(sender, request, user, **kwargs):
    """Logging out of the browser ends every way in the user opened, API tokens too: a token left behind
    on a shared machine must not outlive the session it was made in."""
    if user is not None:
        revoke_all(user)
