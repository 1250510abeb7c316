"""`GET /api/`: what the API offers, one line per endpoint, with links to its docs and schema.

The table is written out rather than read from the schema so that each line says what a user wants to
know; a test checks it names every path the schema documents, so the two cannot drift apart.
"""
from __future__ import annotations

from django.urls import reverse
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

# (methods, path, what it does); paths as the OpenAPI schema writes them.
ENDPOINTS = (
    ("GET", "/api/", "This index: every endpoint, and where the docs and the schema are."),
    ("GET", "/api/functions/", "The functions you can launch, each with its spec (parameters as JSON schema)."),
    ("GET", "/api/functions/{name}/", "One function of the catalog."),
    ("GET", "/api/models/", "The models a launch may choose on this server."),
    ("GET, POST", "/api/sessions/", "Your sessions, newest first and paginated; POST launches a function."),
    ("GET, DELETE", "/api/sessions/{id}/", "One session: its status, result, nodes by status, model calls, "
                                           "tokens, warning and wall time; DELETE deletes an ended one."),
    ("GET", "/api/sessions/{id}/nodes/", "The session's calls in seq order; ?since_rev=R only those changed "
                                         "after revision R."),
    ("GET", "/api/sessions/{id}/export/", "The session's whole DAG as a JSON download, <function>-<id>.json."),
    ("POST", "/api/sessions/{id}/stop/", "Stop the run; idempotent, and no change once it has ended."),
    ("GET", "/api/sessions/{id}/approvals/", "The session's tool calls waiting for a person's approval, oldest "
                                             "first: node, tool, arguments, depth, call path."),
    ("POST", "/api/sessions/{id}/approvals/{seq}/", '{"approve": true} or {"approve": false, "reason": "..."}: '
                                                    "answer the call waiting at node seq; 409 once answered."),
    ("POST", "/api/sessions/{id}/pause/", "Pause the run at its next function entry, model call or tool call "
                                          "(phase paused); no change once it has ended."),
    ("POST", "/api/sessions/{id}/resume/", "Let a paused run go on, or take back a pause not yet reached."),
    ("POST, DELETE", "/api/sessions/{id}/share/", "POST: a read-only link to the session's live page for anyone "
                                                  "who has it, no login; DELETE revokes all its links."),
    ("POST", "/api/sessions/{id}/replay/", "Run it again with each model call answered from its recorded reply "
                                           '(no model called); {"then": "live"} goes on live past a divergence.'),
    ("POST", "/api/sessions/{id}/fork/", 'Run it again from one model call: {"node": seq, "reply": "..."} or '
                                         '{"node": seq, "model": "..."}; the calls before served, the rest live.'),
    ("GET", "/api/sessions/compare/", "?a=<id>&b=<id>: two sessions' calls aligned by call path, with what "
                                      "differs in each."),
    ("POST, DELETE", "/api/token/", "POST a username and password for a token; DELETE revokes the token "
                                    "sent (from a browser login: all of yours)."),
    ("POST", "/api/token/rotate/", "Swap the token sent for a new one."),
)


class EndpointSerializer(serializers.Serializer):
    methods = serializers.CharField(help_text='The HTTP methods it answers, e.g. "GET, POST".')
    path = serializers.CharField(help_text="Its path; {id}, {name} and {seq} stand for a session's id, "
                                           "a function's name and a node's seq.")
    description = serializers.CharField()


class ApiIndexSerializer(serializers.Serializer):
    endpoints = EndpointSerializer(many=True)
    docs = serializers.CharField(help_text="The interactive API documentation (a page).")
    schema = serializers.CharField(help_text="The OpenAPI 3 schema these docs are drawn from.")


class ApiIndexView(APIView):
    """The API's index: each endpoint with one line on what it does, and where its docs are."""

    @extend_schema(responses=ApiIndexSerializer)
    def get(self, request):
        return Response({
            "endpoints": [{"methods": methods, "path": path, "description": description}
                          for methods, path, description in ENDPOINTS],
            "docs": request.build_absolute_uri(reverse("api-docs")),
            "schema": request.build_absolute_uri(reverse("schema")),
        })
