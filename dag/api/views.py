"""REST API views: the function catalog, launching and reading sessions, and stopping them.

Every query is scoped to the caller's own sessions, so another user's session is simply not found (404).
"""
from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import PageNumberPagination
from rest_framework.response import Response

from .. import share_links
from ..models import Session
from ..recording import write_path
from ..recording.export import export_filename, export_session
from ..runs import catalog, lifecycle
from ..runs.launch import LaunchLimited, LaunchRejected, launch
from ..runs.model_choice import available_models
from ..timestamps import iso
from . import examples
from .serializers import (DeleteRefusedSerializer, ExportSerializer, FunctionSerializer, LaunchErrorSerializer,
                          LaunchLimitedSerializer, LaunchSerializer, ModelChoiceSerializer, NoBodySerializer,
                          NodeSerializer, NotFoundSerializer, PageErrorSerializer, SessionSerializer,
                          ShareLinkSerializer, SinceRevErrorSerializer)


# A number of more digits than this (leading zeros aside) is past any page size, and past any revision a
# session can reach (a BigIntegerField, at most 19 digits, bumped once per change); reading no more also
# keeps int() under its 4,300-digit limit.
MAX_READ_DIGITS = 18
PAST_ANY = 10 ** MAX_READ_DIGITS  # what a number of more digits reads as


def read_count(raw: str) -> int | None:
    """Query parameter `raw` as a whole number of 0 or more written in ASCII digits alone, the one rule of
    `page`, `page_size` and `since_rev`; None if it is not one. int() alone also reads "+1", " 1 ", "1_0"
    and other scripts' digits ("٣"); str.isdigit() alone takes "²", which int() refuses. Leading zeros
    say nothing (and int() would count them against its limit); more than MAX_READ_DIGITS digits read as
    PAST_ANY."""
    if not (raw.isascii() and raw.isdigit()):
        return None
    digits = raw.lstrip("0")
    return PAST_ANY if len(digits) > MAX_READ_DIGITS else int(digits or "0")


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

    @extend_schema(responses={200: FunctionSerializer, 404: NotFoundSerializer})
    def retrieve(self, request, name: str):
        try:
            entry = catalog.get(name)
        except catalog.UnknownFunction as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_404_NOT_FOUND)
        return Response(FunctionSerializer(entry).data)


class SessionPagination(PageNumberPagination):
    page_size_query_param = "page_size"
    max_page_size = 500

    def get_page_size(self, request):
        """The page size asked for, or the default; a 400 naming it when it is not one (DRF would
        silently use the default)."""
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None:
            return self.page_size
        size = read_count(raw)
        if size is None or not 1 <= size <= self.max_page_size:
            raise ValidationError({self.page_size_query_param: [
                f"must be a whole number from 1 to {self.max_page_size}, got {raw[:40]!r}"]})
        return size

    def get_page_number(self, request, paginator):
        """The page asked for: a whole number from 1, or "last"; a 400 naming `page` when it is not one
        (DRF reads an empty one as page 1, and answers others with a 404 that names nothing). A page
        past the last stays a 404: the number is well formed, there is no such page."""
        raw = request.query_params.get(self.page_query_param)
        if raw is None or raw in self.last_page_strings:
            return super().get_page_number(request, paginator)
        if not read_count(raw):  # None, or 0
            raise ValidationError({self.page_query_param: [
                f"must be a whole number from 1 (or \"last\"), got {raw[:40]!r}"]})
        return raw  # however long: past the last page, Django's paginator makes it DRF's 404

    def get_paginated_response_schema(self, schema):
        """DRF's page shape, with examples of this API's own URLs (DRF's say /accounts/)."""
        paginated = super().get_paginated_response_schema(schema)
        for name, example in examples.PAGE_LINKS.items():
            paginated["properties"][name]["example"] = example
        return paginated

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        bounds = {self.page_query_param: {"minimum": 1},
                  self.page_size_query_param: {"minimum": 1, "maximum": self.max_page_size}}
        for parameter in parameters:
            parameter["schema"].update(bounds.get(parameter["name"], {}))
        return parameters


# Any id reaches the view (a malformed one is a JSON 404), but only a UUID can name a session: the schema
# says so, so a client (or a generated test) knows what an id looks like.
SESSION_ID = OpenApiParameter("id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="The session's id.")


@extend_schema_view(
    list=extend_schema(responses={200: SessionSerializer(many=True), 400: PageErrorSerializer,
                                  404: NotFoundSerializer}, examples=examples.SESSION_LIST_EXAMPLES),
    retrieve=extend_schema(parameters=[SESSION_ID], responses={200: SessionSerializer, 404: NotFoundSerializer},
                           examples=examples.SESSION_EXAMPLES),
)
class SessionViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Runs of functions: launch one, list yours, read one and its nodes, export it, stop it, share it
    read-only, delete it."""

    serializer_class = SessionSerializer
    pagination_class = SessionPagination
    # Any id reaches the view, so a malformed one gets the API's JSON 404, not Django's HTML page.
    lookup_value_regex = r"[^/]+"

    def get_queryset(self):
        return Session.objects.filter(owner=self.request.user).order_by("-created_at")

    def get_serializer_class(self):
        """The body each POST reads, as OPTIONS describes it (its `actions`): a launch's, or none to stop.
        DRF asks during OPTIONS with `action` "metadata" and the request cloned as the POST."""
        action = self.action_map.get(self.request.method.lower()) if self.action == "metadata" else self.action
        return {"create": LaunchSerializer, "stop": NoBodySerializer, "share": NoBodySerializer}.get(action,
                                                                                                SessionSerializer)

    def get_object(self):
        # Read-your-writes: node writes of a run in this process still queued for their batch commit first.
        write_path.flush_session(self.kwargs.get(self.lookup_url_kwarg or self.lookup_field))
        return super().get_object()

    @extend_schema(request=LaunchSerializer, responses={201: SessionSerializer, 400: LaunchErrorSerializer,
                                                        429: LaunchLimitedSerializer},
                   examples=examples.LAUNCH_EXAMPLES)
    def create(self, request):
        # A body over DATA_UPLOAD_MAX_MEMORY_SIZE is answered for every API view (dag.api.errors).
        shape = LaunchSerializer(data=request.data)
        shape.is_valid(raise_exception=True)
        try:
            session = launch(request.user, shape.validated_data["function"], shape.validated_data["args"],
                             shape.validated_data["budget"], shape.validated_data["model"],
                             unattended=shape.validated_data["unattended"])
        except LaunchLimited as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_429_TOO_MANY_REQUESTS)
        except LaunchRejected as exc:
            return Response(exc.errors, status=status.HTTP_400_BAD_REQUEST)
        return Response(SessionSerializer(session).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        parameters=[SESSION_ID, OpenApiParameter("since_rev", {"type": "integer", "minimum": 0},
                                     description="Only nodes changed after this session revision (default 0: "
                                     "every node).")],
        responses={200: NodeSerializer(many=True), 400: SinceRevErrorSerializer, 404: NotFoundSerializer},
        examples=examples.NODES_EXAMPLES)
    @action(detail=True, methods=["get"], pagination_class=None)
    def nodes(self, request, pk=None):
        session = self.get_object()
        raw = request.query_params.get("since_rev", "0")
        since_rev = read_count(raw)
        if since_rev is None:
            return Response({"since_rev": [f"must be a whole number of 0 or more, got {raw[:40]!r}"]},
                            status=status.HTTP_400_BAD_REQUEST)
        if since_rev == PAST_ANY:
            return Response([])  # after any revision a session can reach: nothing has changed since
        nodes = session.nodes.filter(rev__gt=since_rev).order_by("seq")
        return Response([node.as_dict() for node in nodes])

    @extend_schema(parameters=[SESSION_ID], responses={200: ExportSerializer, 404: NotFoundSerializer},
                   examples=examples.EXPORT_EXAMPLES)
    @action(detail=True, methods=["get"], pagination_class=None)
    def export(self, request, pk=None):
        """The whole DAG, as an attachment: a plain link to it downloads `<function>-<id>.json`."""
        session = self.get_object()
        return Response(export_session(session),
                        headers={"Content-Disposition": f'attachment; filename="{export_filename(session)}"'})

    @extend_schema(parameters=[SESSION_ID], responses={204: None, 404: NotFoundSerializer,
                                                       409: DeleteRefusedSerializer})
    def destroy(self, request, pk=None):
        """Delete an ended session with its nodes (its size no longer counts against the storage limit).
        A session still queued or running is a 409: stop it first."""
        session = self.get_object()
        try:
            write_path.delete_owned_session(request.user, session.pk)
        except Session.DoesNotExist:  # deleted by another request since
            raise NotFound("No Session matches the given query.") from None
        except write_path.SessionStillActive as exc:
            return Response({"detail": str(exc), "status": exc.status}, status=status.HTTP_409_CONFLICT)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=None, parameters=[SESSION_ID], responses={200: ShareLinkSerializer, 404: NotFoundSerializer})
    @action(detail=True, methods=["post"], url_path="share")
    def share(self, request, pk=None):
        """A new read-only link to the session's page, for anyone who has it, without login, live, until
        `expires_at` (OPENPROGRAM_SHARE_DAYS) or until the session's links are revoked."""
        path, expires_at = share_links.new_link(self.get_object())
        return Response({"url": request.build_absolute_uri(path), "expires_at": iso(expires_at)})

    @extend_schema(request=None, parameters=[SESSION_ID], responses={204: None, 404: NotFoundSerializer})
    @share.mapping.delete
    def revoke_shares(self, request, pk=None):
        """Revoke every share link of the session made so far; its open shared pages close."""
        session = self.get_object()
        try:
            write_path.revoke_shares(session.pk)
        except Session.DoesNotExist:  # deleted by another request since
            raise NotFound("No Session matches the given query.") from None
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=None, parameters=[SESSION_ID], responses={200: SessionSerializer, 404: NotFoundSerializer},
                   examples=examples.STOP_EXAMPLES)
    @action(detail=True, methods=["post"])
    def stop(self, request, pk=None):
        session = self.get_object()
        return Response(SessionSerializer(lifecycle.request_stop(session.pk)).data)

