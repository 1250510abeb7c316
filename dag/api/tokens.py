"""`/api/token/`: exchange a username and password for a token, rotate it, revoke it."""
from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from knox.models import AuthToken
from rest_framework import serializers, status
from rest_framework.authtoken.serializers import AuthTokenSerializer
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from ..accounts import tokens
from ..accounts.throttles import LoginRateThrottle
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


class TokenView(APIView):
    """POST: a new API token for a username and password (throttled with the login page). DELETE: revoke
    the token the request is sent with (from a browser session: every token of the user)."""

    renderer_classes = [JSONRenderer]
    parser_classes = [FormParser, MultiPartParser, JSONParser]

    def get_permissions(self):
        return [AllowAny()] if self.request.method == "POST" else [IsAuthenticated()]

    def get_throttles(self):
        return [LoginRateThrottle()] if self.request.method == "POST" else []

    @extend_schema(request=AuthTokenSerializer, responses={
        200: TokenSerializer,
        400: inline_serializer("TokenError", {"non_field_errors": serializers.ListField(
            child=serializers.CharField(), required=False, help_text="e.g. wrong username or password")}),
        429: DetailSerializer,
    })
    def post(self, request):
        credentials = AuthTokenSerializer(data=request.data, context={"request": request})
        credentials.is_valid(raise_exception=True)
        return token_answer(tokens.issue(credentials.validated_data["user"]))

    @extend_schema(request=None, responses={204: None, 401: DetailSerializer, 403: DetailSerializer})
    def delete(self, request):
        current = current_token(request)
        if current is None:
            tokens.revoke_all(request.user)
        else:
            current.delete()
        return Response(status=status.HTTP_204_NO_CONTENT)


class TokenRotateView(APIView):
    """A new token in place of the one the request is sent with (from a browser session: in place of
    every token of the user); the old one stops working at once."""

    renderer_classes = [JSONRenderer]

    @extend_schema(request=None, responses={200: TokenSerializer, 401: DetailSerializer, 403: DetailSerializer})
    def post(self, request):
        return token_answer(tokens.rotate(request.user, current_token(request)))
