"""JSON where Django would answer the API with an HTML page: a path no endpoint has, a body it will not read.

Both are outside DRF's reach. Django resolves the path before any view runs, so an unknown one gets its
HTML 404: `NoSuchEndpoint`, routed last in `dag.api.urls`, is the API's own. A body over
DATA_UPLOAD_MAX_MEMORY_SIZE (or with too many fields or files) raises from `request.data`, which DRF
does not turn into a response; Django then answers an HTML 400 and logs a traceback at ERROR:
`refusing_unreadable_bodies` wraps every API view to answer the JSON 400 instead.
"""
from __future__ import annotations

import functools

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent
from django.http import JsonResponse
from django.http.multipartparser import TooManyFilesSent
from django.urls import URLPattern
from rest_framework.exceptions import NotFound
from rest_framework.views import APIView

# Django answers these 400 too; so does the API, with its JSON (a launch's own limits are 400 as well).
UNREADABLE_BODY_STATUS = 400


class NoSuchEndpoint(APIView):
    """Every /api/ path that names no endpoint: a JSON 404, behind the API's login and CSRF checks like
    every other path (an anonymous caller, or an unsafe request without the token, is refused first)."""

    schema = None  # not an endpoint: never in the OpenAPI schema

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        # Here rather than in get() and the rest: one answer whatever the method, OPTIONS included.
        path = request.path if len(request.path) <= 200 else request.path[:200] + "..."
        raise NotFound(f"no API endpoint at {path}; GET /api/ lists them")


def unreadable_body(exc: Exception) -> JsonResponse:
    """The JSON answer to a body Django refused to read: what the limit is and the setting that sets it."""
    if isinstance(exc, RequestDataTooBig):
        detail = (f"the request body is over {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes, the most this server "
                  f"reads (setting DATA_UPLOAD_MAX_MEMORY_SIZE)")
    elif isinstance(exc, TooManyFieldsSent):
        detail = (f"the request has more than {settings.DATA_UPLOAD_MAX_NUMBER_FIELDS} form fields "
                  f"(setting DATA_UPLOAD_MAX_NUMBER_FIELDS)")
    else:
        detail = (f"the request has more than {settings.DATA_UPLOAD_MAX_NUMBER_FILES} files "
                  f"(setting DATA_UPLOAD_MAX_NUMBER_FILES)")
    # Compact, as DRF's renderer writes every other API answer.
    return JsonResponse({"detail": detail}, status=UNREADABLE_BODY_STATUS,
                        json_dumps_params={"separators": (",", ":")})


def refusing_unreadable_bodies(view):
    """`view`, answering a body Django will not read with JSON. functools.wraps keeps what DRF and
    drf-spectacular read off a view (`cls`, `actions`, `initkwargs`, `csrf_exempt`)."""

    @functools.wraps(view)
    def wrapped(request, *args, **kwargs):
        try:
            return view(request, *args, **kwargs)
        except (RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent) as exc:
            return unreadable_body(exc)

    return wrapped


def guarded(patterns: list) -> list:
    """`patterns` with each view wrapped by `refusing_unreadable_bodies`."""
    return [URLPattern(p.pattern, refusing_unreadable_bodies(p.callback), p.default_args, p.name) for p in patterns]
