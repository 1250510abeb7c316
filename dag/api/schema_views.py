"""The OpenAPI schema and its docs page, behind a login like the rest of the API (drf-spectacular serves
both to anyone by default).

The schema answers a refusal in JSON like every other API path: negotiated as YAML, its default, DRF's
error object would come out as YAML of the error's internals. The docs page is for a person in a
browser: without a login it sends them to log in and back, as the app's other pages do.
"""
from __future__ import annotations

from django.contrib.auth.views import redirect_to_login
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.exceptions import NotAuthenticated
from rest_framework.permissions import IsAuthenticated
from rest_framework.renderers import JSONRenderer


class SchemaView(SpectacularAPIView):
    permission_classes = [IsAuthenticated]

    def handle_exception(self, exc):
        self.request.accepted_renderer, self.request.accepted_media_type = JSONRenderer(), "application/json"
        return super().handle_exception(exc)


class DocsView(SpectacularSwaggerSplitView):
    """Serves its start-up script as a file (the split view), so the page works under our CSP; its page
    has a bar back into the app (templates/api/docs.html)."""

    permission_classes = [IsAuthenticated]
    template_name = "api/docs.html"

    def options(self, request, *args, **kwargs):
        # DRF's OPTIONS answer is data, which the page's template renderer has no template for (a 500):
        # it is JSON here, as on every other API path.
        request.accepted_renderer, request.accepted_media_type = JSONRenderer(), "application/json"
        return super().options(request, *args, **kwargs)

    def handle_exception(self, exc):
        if isinstance(exc, NotAuthenticated):  # no session and no token; a bad token is still refused
            return redirect_to_login(self.request.get_full_path())
        return super().handle_exception(exc)
