"""REST API views: the function catalog, launching and reading sessions, and stopping them.

Every query is scoped to the caller's own sessions, so another user's session is simply not found (404).
"""
from __future__ import annotations

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.pagination import PageNumberPagination
from rest_framework.response import Response

from ..models import Session
from ..recording.export import export_session
from ..runs import catalog, lifecycle
from ..runs.launch import LaunchRejected, launch
from ..runs.model_choice import available_models
from .serializers import (ExportSerializer, FunctionSerializer, LaunchErrorSerializer, LaunchSerializer,
                          ModelChoiceSerializer, NodeSerializer, SessionSerializer, SinceRevErrorSerializer)


class ModelViewSet(viewsets.ViewSet):
    """The models a launch may choose on this server (`"model"` in POST /api/sessions/)."""

    serializer_class = ModelChoiceSerializer

    @extend_schema(responses=ModelChoiceSerializer(many=True))
    def list(self, request):
        return Response([{"model": spec, "description": text} for spec, text in available_models()])


class FunctionViewSet(viewsets.ViewSet):
    """The functions that can be launched (from OPENPROGRAM_FUNCTION_MODULES)."""

    lookup_field = "name"
    lookup_value_regex = r"[^/]+"
    serializer_class = FunctionSerializer

    @extend_schema(responses=FunctionSerializer(many=True))
    def list(self, request):
        return Response(FunctionSerializer(catalog.entries(), many=True).data)

    @extend_schema(responses=FunctionSerializer)
    def retrieve(self, request, name: str):
        try:
            entry = catalog.get(name)
        except catalog.UnknownFunction as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_404_NOT_FOUND)
        return Response(FunctionSerializer(entry).data)


class SessionPagination(PageNumberPagination):
    page_size_query_param = "page_size"
    max_page_size = 500


class SessionViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Runs of functions: launch one, list yours, read one and its nodes, export it, stop it."""

    serializer_class = SessionSerializer
    pagination_class = SessionPagination
    lookup_value_regex = r"[0-9a-fA-F-]{32,36}"

    def get_queryset(self):
        return Session.objects.filter(owner=self.request.user).order_by("-created_at")

    @extend_schema(request=LaunchSerializer, responses={201: SessionSerializer, 400: LaunchErrorSerializer})
    def create(self, request):
        try:
            data = request.data
        except RequestDataTooBig:
            return Response({"detail": f"the request body is over {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes; "
                                       f"launch arguments are limited to {settings.OPENPROGRAM_MAX_ARGS_BYTES}"},
                            status=status.HTTP_400_BAD_REQUEST)
        shape = LaunchSerializer(data=data)
        shape.is_valid(raise_exception=True)
        try:
            session = launch(request.user, shape.validated_data["function"], shape.validated_data["args"],
                             shape.validated_data["budget"], shape.validated_data["model"])
        except LaunchRejected as exc:
            return Response(exc.errors, status=status.HTTP_400_BAD_REQUEST)
        return Response(session.as_dict(), status=status.HTTP_201_CREATED)

    @extend_schema(
        parameters=[OpenApiParameter("since_rev", int, description="Only nodes changed after this session "
                                     "revision (default 0: every node).")],
        responses={200: NodeSerializer(many=True), 400: SinceRevErrorSerializer})
    @action(detail=True, methods=["get"], pagination_class=None)
    def nodes(self, request, pk=None):
        session = self.get_object()
        raw = request.query_params.get("since_rev", "0")
        try:
            since_rev = int(raw)
            if since_rev < 0:
                raise ValueError
        except ValueError:
            return Response({"since_rev": [f"must be a whole number of 0 or more, got {raw!r}"]},
                            status=status.HTTP_400_BAD_REQUEST)
        nodes = session.nodes.filter(rev__gt=since_rev).order_by("seq")
        return Response([node.as_dict() for node in nodes])

    @extend_schema(responses=ExportSerializer)
    @action(detail=True, methods=["get"], pagination_class=None)
    def export(self, request, pk=None):
        return Response(export_session(self.get_object()))

    @extend_schema(request=None, responses=SessionSerializer)
    @action(detail=True, methods=["post"])
    def stop(self, request, pk=None):
        session = self.get_object()
        return Response(lifecycle.request_stop(session.pk).as_dict())

