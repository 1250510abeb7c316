"""API views for debugging a run: replay it, fork it at a model call, compare two runs.

Each acts only on the caller's own sessions: another user's session is not found (404), as everywhere in
the API.
"""
from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from ..recording.compare import compare_sessions
from ..runs.launch import LaunchLimited, LaunchRejected
from ..runs.rerun import own_session, start_fork, start_replay
from .serializers import LaunchErrorSerializer, LaunchLimitedSerializer, NotFoundSerializer, SessionSerializer

SESSION_ID = OpenApiParameter("id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="The session's id.")
NOT_FOUND = {"detail": "no such session of yours"}


def body_object(request) -> dict | None:
    """The request's JSON body when it is an object (an empty body reads as {}), else None."""
    data = request.data
    return data if isinstance(data, dict) else None


def not_an_object() -> Response:
    return Response({"detail": "the body must be a JSON object"}, status=status.HTTP_400_BAD_REQUEST)


def rerun(request, session_id, start, *fields: tuple[str, object]) -> Response:
    """`start(user, original, ...)` with the body's `fields` ((name, default) each), for the caller's
    session `session_id`: the new session (201), or why not (404, or a launch's 400 or 429)."""
    original = own_session(request.user, session_id)
    if original is None:
        return Response(NOT_FOUND, status=status.HTTP_404_NOT_FOUND)
    body = body_object(request)
    if body is None:
        return not_an_object()
    try:
        session = start(request.user, original, *(body.get(name, default) for name, default in fields))
    except LaunchLimited as exc:
        return Response({"detail": str(exc)}, status=status.HTTP_429_TOO_MANY_REQUESTS)
    except LaunchRejected as exc:
        return Response(exc.errors, status=status.HTTP_400_BAD_REQUEST)
    return Response(SessionSerializer(session).data, status=status.HTTP_201_CREATED)


RESPONSES = {201: SessionSerializer, 400: LaunchErrorSerializer, 404: NotFoundSerializer,
             429: LaunchLimitedSerializer}


class ReplayView(APIView):
    """Replay a session: a new session of the same function and arguments whose model calls are answered
    from the recorded replies (no provider call, no cost). At a call the recording has no answer for, it
    stops with ReplayDiverged, or with `{"then": "live"}` goes on with live calls."""

    @extend_schema(parameters=[SESSION_ID], responses=RESPONSES, request=inline_serializer("ReplayRequest", {
        "then": serializers.ChoiceField(["stop", "live"], required=False, default="stop")}))
    def post(self, request, **route):
        return rerun(request, route["id"], start_replay, ("then", "stop"))


class ForkView(APIView):
    """Fork a session at one of its model calls (`node`: its seq): the calls before it served from the
    record, that call answered with `reply` (or made live with `model`), every call after it live."""

    @extend_schema(parameters=[SESSION_ID], responses=RESPONSES, request=inline_serializer("ForkRequest", {
        "node": serializers.IntegerField(help_text="The seq of a model call of the session."),
        "reply": serializers.CharField(required=False, help_text="The edited reply that call gets."),
        "model": serializers.CharField(required=False, help_text="Or: a model to make it live with."),
    }))
    def post(self, request, **route):
        return rerun(request, route["id"], start_fork, ("node", None), ("reply", None), ("model", None))


class CompareView(APIView):
    """Two of your sessions side by side: their calls aligned by call path, and what differs in each pair
    (arguments, output, status, tokens, cost, duration; "missing" for a call only one made)."""

    @extend_schema(parameters=[OpenApiParameter("a", str, required=True, description="A session's id."),
                               OpenApiParameter("b", str, required=True, description="Another session's id.")],
                   responses={200: OpenApiTypes.OBJECT, 400: OpenApiTypes.OBJECT, 404: NotFoundSerializer})
    def get(self, request):
        problems = {side: ["give a session's id"] for side in ("a", "b") if not request.query_params.get(side)}
        if problems:
            return Response(problems, status=status.HTTP_400_BAD_REQUEST)
        sessions = [own_session(request.user, request.query_params[side]) for side in ("a", "b")]
        if None in sessions:
            return Response(NOT_FOUND, status=status.HTTP_404_NOT_FOUND)
        return Response(compare_sessions(*sessions))
