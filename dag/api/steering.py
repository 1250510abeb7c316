"""API views for steering a live run: its pending approval requests, a person's answer to one, pause and
resume (`dag.runs.steering`).

Each acts only on the caller's own sessions: another user's session is not found (404), as everywhere in
the API.
"""
from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view, inline_serializer
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from ..recording import write_path
from ..runs import steering
from ..runs.launch_values import NUL_PROBLEM, SURROGATE_PROBLEM, holds_nul, lone_surrogate
from ..runs.rerun import own_session
from . import examples
from .debugging import NOT_FOUND, SESSION_ID, body_object, not_an_object
from .serializers import NotFoundSerializer, SessionSerializer

MAX_REASON_CHARS = 2000
NODE_SEQ = OpenApiParameter("seq", int, OpenApiParameter.PATH, description="The waiting call's node (its seq).")

ApprovalRequestShape = inline_serializer("ApprovalRequest", {
    "node": serializers.IntegerField(help_text="The waiting call's node (its seq)."),
    "tool": serializers.CharField(),
    "arguments": serializers.JSONField(),
    "depth": serializers.IntegerField(help_text="Its nesting level (1: the entry call)."),
    "requested_at": serializers.DateTimeField(),
    "path": serializers.ListField(child=serializers.CharField(), help_text="The calls from the entry call down."),
}, many=True)
AnswerShape = inline_serializer("ApprovalAnswer", {
    "approve": serializers.BooleanField(),
    "reason": serializers.CharField(required=False, help_text="Why not: the model reads it with the denial."),
})
DetailShape = inline_serializer("SteeringConflict", {"detail": serializers.CharField()})


def _not_found() -> Response:
    return Response(NOT_FOUND, status=status.HTTP_404_NOT_FOUND)


class ApprovalsView(APIView):
    """The session's tool calls waiting for a person's approval, oldest first."""

    @extend_schema(parameters=[SESSION_ID], responses={200: ApprovalRequestShape, 404: NotFoundSerializer},
                   examples=examples.APPROVALS_EXAMPLES)
    def get(self, request, **route):
        session = own_session(request.user, route["id"])
        if session is None:
            return _not_found()
        return Response(steering.pending_approvals(session))


class ApprovalAnswerView(APIView):
    """Answer one waiting call: `{"approve": true}`, or `{"approve": false, "reason": "..."}` (the model reads
    the denial, with the reason, as the tool's result). 404: no call waits there; 409: answered already."""

    @extend_schema(parameters=[SESSION_ID, NODE_SEQ], request=AnswerShape,
                   responses={200: AnswerShape, 400: DetailShape, 404: NotFoundSerializer, 409: DetailShape},
                   examples=examples.ANSWER_EXAMPLES)
    def post(self, request, **route):
        session = own_session(request.user, route["id"])
        if session is None:
            return _not_found()
        body = body_object(request)
        if body is None:
            return not_an_object()
        approve, reason = body.get("approve"), body.get("reason", "")
        if not isinstance(approve, bool):
            return Response({"approve": ["must be true or false"]}, status=status.HTTP_400_BAD_REQUEST)
        if not isinstance(reason, str) or len(reason) > MAX_REASON_CHARS:
            return Response({"reason": [f"must be text of at most {MAX_REASON_CHARS} characters"]},
                            status=status.HTTP_400_BAD_REQUEST)
        # The answer is stored in jsonb, which holds neither: a 500 on PostgreSQL, not a 400, without this.
        unstorable = NUL_PROBLEM if holds_nul(reason) else SURROGATE_PROBLEM if lone_surrogate(reason) else None
        if unstorable:
            return Response({"reason": [unstorable]}, status=status.HTTP_400_BAD_REQUEST)
        try:
            answer = steering.answer_approval(session, route["seq"], approve, reason.strip())
        except write_path.NoSuchRequest:
            return Response({"detail": f"no call of this session waits for approval at node {route['seq']}"},
                            status=status.HTTP_404_NOT_FOUND)
        except write_path.AlreadyAnswered:
            return Response({"detail": f"the call at node {route['seq']} was answered already"},
                            status=status.HTTP_409_CONFLICT)
        return Response(answer)


class PauseSwitchView(APIView):
    """Set the session's `pause_requested` to the view's `paused`: shared by pause and resume."""

    paused: bool

    @extend_schema(request=None, parameters=[SESSION_ID], responses={200: SessionSerializer, 404: NotFoundSerializer})
    def post(self, request, **route):
        session = own_session(request.user, route["id"])
        if session is None:
            return _not_found()
        return Response(SessionSerializer(steering.set_pause(session, self.paused)).data)


@extend_schema_view(post=extend_schema(examples=examples.PAUSE_EXAMPLES))
class PauseView(PauseSwitchView):
    """Pause the run at its next function entry, model call or tool call (`phase` `paused` once there).
    Like a stop, it changes nothing once the session has ended (the session is answered as it is)."""

    paused = True


@extend_schema_view(post=extend_schema(examples=examples.RESUME_EXAMPLES))
class ResumeView(PauseSwitchView):
    """Let a paused run go on (or take back a pause it has not reached yet)."""

    paused = False
