"""ASGI entry point: HTTP through Django (static files served here, no separate server needed), and
websockets through Channels with the session user attached, from this site's pages only."""
import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "openprogram_web.settings")

from django.core.asgi import get_asgi_application  # noqa: E402

django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from django.core.exceptions import SuspiciousFileOperation  # noqa: E402
from django.http import Http404  # noqa: E402

from dag.routing import websocket_urlpatterns  # noqa: E402
from openprogram_web.websocket_origin import SameOriginValidator  # noqa: E402


class StaticFilesHandler(ASGIStaticFilesHandler):
    """Static files; a path that climbs out of the static directories (`/static/%2e%2e/manage.py`) is
    simply not found, instead of the SuspiciousFileOperation that Django's handler lets become a 500."""

    def serve(self, request):
        try:
            return super().serve(request)
        except SuspiciousFileOperation:
            raise Http404("no such static file") from None


application = ProtocolTypeRouter({
    "http": StaticFilesHandler(django_asgi_app),
    "websocket": SameOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
})
