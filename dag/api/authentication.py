"""API token authentication: django-rest-knox's, refusing a malformed token as a 401, not a 500.

knox decodes the header's token as UTF-8 and hashes it; bytes that are not text made that a 500 for
anyone. A knox token is hexadecimal text, so anything else cannot be one.
"""
from __future__ import annotations

import string

from drf_spectacular.contrib.knox_auth_token import KnoxTokenScheme
from knox.auth import TokenAuthentication as KnoxTokenAuthentication
from rest_framework.exceptions import AuthenticationFailed

_HEX = frozenset(string.hexdigits.encode())


class TokenAuthentication(KnoxTokenAuthentication):
    """`Authorization: Token <key>`, with the key checked to be hexadecimal before knox looks it up."""

    def authenticate_credentials(self, token: bytes):
        if not token or not set(token) <= _HEX:
            raise AuthenticationFailed("Invalid token.")
        return super().authenticate_credentials(token)


class TokenScheme(KnoxTokenScheme):
    """The OpenAPI security scheme of this class: knox's (drf-spectacular matches the exact class)."""

    target_class = "dag.api.authentication.TokenAuthentication"
