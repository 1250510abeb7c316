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
from django.core.handlers.exception import response_for_exception  # noqa: E402
from django.http import Http404  # noqa: E402

from dag.routing import websocket_urlpatterns  # noqa: E402
from dag.runs import reaper  # noqa: E402
from openprogram_web.security import with_security_headers  # noqa: E402
from openprogram_web.websocket_origin import SameOriginValidator  # noqa: E402


class StaticFilesHandler(ASGIStaticFilesHandler):
    """Static files, with the security headers pages get (CSP, nosniff, X-Frame-Options, and the HTTPS
    redirect), their 404s included; a path that climbs out of the static directories
    (`/static/%2e%2e/manage.py`) is simply not found, instead of the SuspiciousFileOperation that Django's
    handler lets become a 500."""

    def __init__(self, application):
        super().__init__(application)
        self.secured = with_security_headers(self.serve_file)

    def serve(self, request):
        return self.secured(request)

    def serve_file(self, request):
        try:
            return super().serve(request)
        except (Http404, SuspiciousFileOperation):
            return response_for_exception(request, Http404("no such static file"))


class StartsReaper:
    """Starts this process's lease reaper at its first connection, so a web process, too, writes off the
    sessions of a worker that died (with no worker left alive, nobody else would). Not at import:
    `manage.py` commands and tests import this module without serving; a server serves
    `openprogram_web.serve`, which starts the reaper as it loads."""

    def __init__(self, app):
        self.app = app
        self.started = False

    async def __call__(self, scope, receive, send):
        if not self.started and scope["type"] in ("http", "websocket"):
            self.started = True
            reaper.start()
        return await self.app(scope, receive, send)


application = StartsReaper(ProtocolTypeRouter({
    "http": StaticFilesHandler(django_asgi_app),
    "websocket": SameOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
}))

from openprogram_web.gc_tuning import tune_for_serving  # noqa: E402

tune_for_serving()  # last: everything the server imports at start-up is in place
