"""REST API routes, its index, the OpenAPI schema and its docs page (all behind login like the rest of the API),
and JSON answers where Django's would be HTML (see `errors`)."""
from django.urls import path, re_path
from rest_framework.routers import SimpleRouter

from . import debugging, steering
from .errors import NoSuchEndpoint, guarded
from .index import ApiIndexView
from .schema_views import DocsView, SchemaView
from .tokens import TokenRotateView, TokenView
from .views import FunctionViewSet, ModelViewSet, SessionViewSet

router = SimpleRouter()
router.register("functions", FunctionViewSet, basename="function")
router.register("sessions", SessionViewSet, basename="session")
router.register("models", ModelViewSet, basename="model")

# Before the router's: its session routes would read "compare" as a session id.
DEBUGGING = [
    path("sessions/compare/", debugging.CompareView.as_view(), name="session-compare-api"),
    path("sessions/<str:id>/replay/", debugging.ReplayView.as_view(), name="session-replay"),
    path("sessions/<str:id>/fork/", debugging.ForkView.as_view(), name="session-fork"),
]
STEERING = [
    path("sessions/<str:id>/approvals/", steering.ApprovalsView.as_view(), name="session-approvals"),
    path("sessions/<str:id>/approvals/<int:seq>/", steering.ApprovalAnswerView.as_view(), name="session-approval"),
    path("sessions/<str:id>/pause/", steering.PauseView.as_view(), name="session-pause"),
    path("sessions/<str:id>/resume/", steering.ResumeView.as_view(), name="session-resume"),
]

urlpatterns = guarded([path("", ApiIndexView.as_view(), name="api-index")] + DEBUGGING + STEERING + router.urls + [
    path("token/", TokenView.as_view(), name="api-token"),
    path("token/rotate/", TokenRotateView.as_view(), name="api-token-rotate"),
    path("schema/", SchemaView.as_view(), name="schema"),
    path("docs/", DocsView.as_view(url_name="schema"), name="api-docs"),
    # Last: any other path is the API's JSON 404, not Django's page. Only paths ending in "/", so that
    # Django still redirects "/api/sessions" to "/api/sessions/" (APPEND_SLASH), and an unknown
    # "/api/x" to "/api/x/", which answers this. [\s\S], not ".": "." misses a newline (%0A) in the path.
    re_path(r"^[\s\S]*/$", NoSuchEndpoint.as_view(), name="api-not-found"),
])
