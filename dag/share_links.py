"""Read-only share links of a session: `/shared/<session id>/<token>/`, for anyone who has one.

A token is Django's signature (an HMAC under SECRET_KEY) of the session's share generation and of the
time it was made, salted with the session's id: it cannot be guessed without the key, it opens this
session only, and it works for OPENPROGRAM_SHARE_DAYS after it was made. Revoking
(`write_path.revoke_shares`) bumps the session's generation, so every link made before stops working at
once; nothing is stored per link.
"""
from __future__ import annotations

from datetime import datetime, timedelta
from typing import Optional

from django.core import signing
from django.urls import reverse
from django.utils import timezone

from .conf import conf
from .models import Session

SALT = "dag.share_links"


def _signer(session_id) -> signing.TimestampSigner:
    return signing.TimestampSigner(salt=f"{SALT}:{session_id}")


def lifetime() -> timedelta:
    return timedelta(days=conf.SHARE_DAYS)


def new_link(session: Session) -> tuple[str, datetime]:
    """A new link's path for `session` (as it is stored now) and when it expires."""
    token = _signer(session.pk).sign(str(session.share_generation))
    return reverse("shared-session", args=[session.pk, token]), timezone.now() + lifetime()


def generation_of(session_id, token: str) -> Optional[int]:
    """The share generation `token` was signed with for `session_id`; None if it is not one of its links
    (forged, another session's, malformed) or it has expired."""
    try:
        return int(_signer(session_id).unsign(token, max_age=lifetime()))
    except (signing.BadSignature, ValueError):  # SignatureExpired is a BadSignature
        return None


def shared_session(session_id, token: str) -> Optional[Session]:
    """The session `token` shares, None if the link is invalid, expired or revoked."""
    generation = generation_of(session_id, token)
    if generation is None:
        return None
    return Session.objects.filter(pk=session_id, share_generation=generation).first()


def shared_rev(session_id, generation: int) -> Optional[int]:
    """The session's revision while links of `generation` still open it, else None (revoked or gone)."""
    return (Session.objects.filter(pk=session_id, share_generation=generation)
            .values_list("rev", flat=True).first())
