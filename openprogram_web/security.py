"""Response headers Django 5.2 does not set by itself, and the set of header middleware that the static
files get too (they are served by the ASGI handler, outside the middleware stack)."""
from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.utils.module_loading import import_string

# The middleware that only add headers (or redirect plain HTTP to HTTPS): pages and static files alike.
HEADER_MIDDLEWARE = (
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "openprogram_web.security.ContentSecurityPolicyMiddleware",
)


def with_security_headers(get_response):
    """`get_response` wrapped in HEADER_MIDDLEWARE, in settings order (the first is outermost)."""
    for path in reversed(HEADER_MIDDLEWARE):
        get_response = import_string(path)(get_response)
    return get_response


def websocket_origin(request) -> str:
    """The request's own origin in websocket form (`wss://host:port` over HTTPS), the one websocket
    origin its page may connect to; empty when the host is not one of ALLOWED_HOSTS."""
    try:
        host = request.get_host()
    except DisallowedHost:
        return ""
    return f"{'wss' if request.is_secure() else 'ws'}://{host}"


class ContentSecurityPolicyMiddleware:
    """Send settings.CONTENT_SECURITY_POLICY on every response that does not set its own, its
    `{websocket}` replaced by this request's websocket origin (not any host's `ws:` / `wss:`)."""

    def __init__(self, get_response):
        self.get_response = get_response
        self.policy = settings.CONTENT_SECURITY_POLICY

    def __call__(self, request):
        response = self.get_response(request)
        if "Content-Security-Policy" not in response.headers:
            policy = self.policy.replace("{websocket}", websocket_origin(request))
            response.headers["Content-Security-Policy"] = " ".join(policy.split())  # no double space if empty
        return response
