"""REST API routes, the OpenAPI schema and its docs page (all behind login like the rest of the API)."""
from django.urls import path
from drf_spectacular.utils import extend_schema, inline_serializer
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework import serializers
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.permissions import IsAuthenticated
from rest_framework.renderers import JSONRenderer
from rest_framework.routers import SimpleRouter

from ..accounts.throttles import LoginRateThrottle
from .parsers import JSONParser
from .views import FunctionViewSet, ModelViewSet, SessionViewSet

router = SimpleRouter()
router.register("functions", FunctionViewSet, basename="function")
router.register("sessions", SessionViewSet, basename="session")
router.register("models", ModelViewSet, basename="model")

# drf-spectacular serves its views to anyone by default; here they need a login like everything else.
_private = {"permission_classes": [IsAuthenticated]}


class TokenView(ObtainAuthToken):
    """Exchange a username and password for an API token (send it as `Authorization: Token <key>`)."""

    renderer_classes = [JSONRenderer]
    parser_classes = [FormParser, MultiPartParser, JSONParser]  # ObtainAuthToken's, with our JSONParser
    throttle_classes = [LoginRateThrottle]  # shared with the login page

    @extend_schema(responses={
        200: inline_serializer("Token", {"token": serializers.CharField()}),
        400: inline_serializer("TokenError", {"non_field_errors": serializers.ListField(
            child=serializers.CharField(), required=False, help_text="e.g. wrong username or password")}),
        429: inline_serializer("TokenThrottled", {"detail": serializers.CharField()}),
    })
    def post(self, request, *args, **kwargs):
        return super().post(request, *args, **kwargs)


urlpatterns = router.urls + [
    path("token/", TokenView.as_view(), name="api-token"),
    path("schema/", SpectacularAPIView.as_view(**_private), name="schema"),
    # The split view serves its start-up script as a file, so the page works under our CSP.
    path("docs/", SpectacularSwaggerSplitView.as_view(url_name="schema", **_private), name="api-docs"),
]
