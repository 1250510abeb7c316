"""API tokens: stored hashed (django-rest-knox), issued, rotated and revoked, and revoked on a password change
and on logging out of the browser.

A user may hold several tokens (a laptop, a script); each is shown once, when issued. Expired ones are
dropped whenever the user gets a new one. `Authorization: Token <key>` is the header, as before.
"""
from __future__ import annotations

from django.contrib.auth.signals import user_logged_out
from django.db import transaction
from django.dispatch import receiver
from django.utils import timezone
from knox.models import AuthToken


def issue(user) -> tuple[AuthToken, str]:
    """A new token for `user`: (its row, the key, which is never stored)."""
    AuthToken.objects.filter(user=user, expiry__lt=timezone.now()).delete()
    return AuthToken.objects.create(user=user)


def rotate(user, current: AuthToken | None) -> tuple[AuthToken, str]:
    """A new token in place of `current` (None: in place of every token `user` holds)."""
    with transaction.atomic():
        if current is not None:
            AuthToken.objects.filter(pk=current.pk).delete()
        else:
            revoke_all(user)
        return issue(user)


def revoke_all(user) -> int:
    """Revoke every token of `user`; how many there were."""
    return AuthToken.objects.filter(user=user).delete()[0]


def active(user):
    return AuthToken.objects.filter(user=user).exclude(expiry__lt=timezone.now()).order_by("-created")


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
