"""`/api/token/`: exchange a username and password for a token, rotate it, revoke it.

`POST /api/token/` counts against the password-attempt throttle that the login page shares, and any
site can make a visitor's browser post to it. So it reads JSON only, which a browser sends to another
site only after a CORS preflight this server never grants, and it refuses any other body, and anything
a browser marks as sent from another site, before the throttle counts it. Otherwise ten posts from a
plain `<form>` on any page would lock the visitor out of logging in.
"""
from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import extend_schema, inline_serializer
from knox.models import AuthToken
from rest_framework import serializers, status
from rest_framework.authtoken.serializers import AuthTokenSerializer
from rest_framework.exceptions import AuthenticationFailed, PermissionDenied, UnsupportedMediaType
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from ..accounts import tokens
from ..accounts.throttles import AccountLoginThrottle, LoginRateThrottle, ThrottleUnavailable, logged_once
from ..accounts.tokens import TokenChangeRefused
from .authentication import TokenAuthentication
from .parsers import JSONParser

TokenSerializer = inline_serializer("Token", {
    "token": serializers.CharField(help_text="send it as `Authorization: Token <token>`; shown only now"),
    "expiry": serializers.DateTimeField(allow_null=True, help_text="when it stops working (null: never)")})
DetailSerializer = inline_serializer("TokenDetail", {"detail": serializers.CharField()})


def token_answer(issued: tuple[AuthToken, str], code=status.HTTP_200_OK) -> Response:
    row, key = issued
    return Response({"token": key, "expiry": row.expiry}, status=code)


def current_token(request) -> AuthToken | None:
    """The token this request authenticated with; None for a browser session."""
    return request.auth if isinstance(request.auth, AuthToken) else None


def sent_from_another_site(request) -> bool:
    """Whether the browser that sent `request` says another site's page made it (Sec-Fetch-Site, else an
    Origin that is neither this server nor in CSRF_TRUSTED_ORIGINS). Scripts and curl send neither."""
    fetch_site = request.META.get("HTTP_SEC_FETCH_SITE")
    if fetch_site is not None:
        return fetch_site == "cross-site"
    origin = request.META.get("HTTP_ORIGIN")
    if origin is None:
        return False
    return origin != f"{request.scheme}://{request.get_host()}" and origin not in settings.CSRF_TRUSTED_ORIGINS


class TokenView(APIView):
    """POST: a new API token for a username and password (throttled with the login page). DELETE: revoke
    the token the request is sent with (from a browser session: every token of the user)."""

    renderer_classes = [JSONRenderer]
    parser_classes = [JSONParser]

    def get_permissions(self):
        return [AllowAny()] if self.request.method == "POST" else [IsAuthenticated()]

    def get_authenticators(self):
        # A POST authenticates by its username and password: a stale `Authorization: Token` header (a token
        # a logout revoked) must not refuse the credentials that would replace it. The browser session
        # stays, so a logged-in browser's post still needs the CSRF token. The schema's generator asks
        # with no request.
        authenticators = super().get_authenticators()
        if getattr(self.request, "method", None) != "POST":
            return authenticators
        return [each for each in authenticators if not isinstance(each, TokenAuthentication)]

    def get_throttles(self):
        return [LoginRateThrottle()] if self.request.method == "POST" else []

    def check_throttles(self, request):
        # Before the count (DRF checks throttles before it reads the body): only a request that can reach
        # the password check is counted, so another site's posts cannot use up the visitor's attempts.
        if request.method == "POST":
            if self.get_content_negotiator().select_parser(request, self.get_parsers()) is None:
                raise UnsupportedMediaType(request.content_type or "(none)",
                                           detail=f"send the username and password as JSON (Content-Type: "
                                                  f"application/json), not {request.content_type or 'no body type'!r}")
            if sent_from_another_site(request):
                raise PermissionDenied("a token cannot be asked for from another site's page")
        super().check_throttles(request)
        if request.method == "POST":  # the address is within its rate: now the account named
            self.account = AccountLoginThrottle(request.data.get("username") if isinstance(request.data, dict)
                                                else None)
            if not self.account.allow_request(request, self):
                self.throttled(request, self.account.wait())

    def handle_exception(self, exc):
        response = super().handle_exception(exc)
        return logged_once(response) if isinstance(exc, ThrottleUnavailable) else response

    @extend_schema(request=AuthTokenSerializer, auth=[], responses={
        200: TokenSerializer,
        400: inline_serializer("TokenError", {"non_field_errors": serializers.ListField(
            child=serializers.CharField(), required=False, help_text="e.g. wrong username or password")}),
        403: DetailSerializer,
        415: DetailSerializer,
        429: DetailSerializer,
        503: DetailSerializer,
    })
    def post(self, request):
        credentials = AuthTokenSerializer(data=request.data, context={"request": request})
        credentials.is_valid(raise_exception=True)
        self.account.give_back()  # the password was right: only failures count against the account
        try:
            return token_answer(tokens.issue(credentials.validated_data["user"],
                                             checked_password=credentials.validated_data["password"]))
        except TokenChangeRefused:
            # As a wrong password is answered: the one given stopped being the user's during the request.
            raise serializers.ValidationError({"non_field_errors": ["Unable to log in with provided credentials."]})

    @extend_schema(request=None, responses={204: None, 401: DetailSerializer, 403: DetailSerializer})
    def delete(self, request):
        current = current_token(request)
        if current is None:
            tokens.revoke_all(request.user)
        else:
            tokens.revoke(current)
        return Response(status=status.HTTP_204_NO_CONTENT)


class TokenRotateView(APIView):
    """A new token in place of the one the request is sent with (from a browser session: in place of
    every token of the user); the old one stops working at once."""

    renderer_classes = [JSONRenderer]

    @extend_schema(request=None, responses={200: TokenSerializer, 401: DetailSerializer, 403: DetailSerializer})
    def post(self, request):
        try:
            return token_answer(tokens.rotate(request.user, current_token(request)))
        except TokenChangeRefused:
            raise AuthenticationFailed("Invalid token.") from None  # as if it had been revoked a moment sooner
